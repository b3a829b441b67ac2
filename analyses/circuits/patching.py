"""Running a circuit: exact patching of everything outside it from the corrupted run.

``patch_edges``: the clean prompt runs, and each reader's input is rebuilt so that every edge
*outside* the circuit carries its writer's corrupted output instead of its current one (a reader
input is the residual, a sum of the writers' outputs, so this is subtracting
``sum over patched writers (current - corrupted)`` from the reader's own copy, through the split
reader inputs of ``models/split_inputs.py``). The writers compute from their own, rebuilt, inputs,
so an effect travels only along kept edges. Keep every edge: the clean run; keep none: the
corrupted run. Grouped-query attention: a kv head's k (v) input is one reader, one edge per writer.

Node circuits run through the one node-circuit runner, ``analyses.circuits.runner`` (``patch_nodes``,
``run_circuits``: the input is in every non-empty circuit, so keeping no node is the corrupted run
and keeping every head and MLP the clean run).

``circuit_metric`` streams a metric of an edge or a node circuit over a pair set; ``gap_recovered`` is the fraction of
the clean-corrupted metric gap a circuit recovers: (circuit - corrupted) / (clean - corrupted) of
the metric's mean over pairs.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import torch
from torch import Tensor

from analyses.circuits.attribution import cache_values, check_pairs, forward, run_metric
from analyses.circuits.edges import EdgeGraph, edge_graph
from analyses.circuits.runner import patch_nodes, run_circuits
from interp.pairs import Metric, Pairs, logit_diff
from models.split_inputs import split_inputs
from models.transformer import Transformer

__all__ = [
    "circuit_metric",
    "clean_and_corrupted",
    "gap_recovered",
    "patch_edges",
    "patch_edges_stacked",
    "patch_nodes",
]

Edge = tuple[str, str] | str


def _patched_matrix(graph: EdgeGraph, keep: Collection[Edge] | None, patch: Collection[Edge] | None) -> Tensor:
    """[reader, writer] float: 1 where the edge carries the corrupted output."""
    if (keep is None) == (patch is None):
        raise ValueError(
            "give exactly one of keep= (the circuit's edges; the rest are patched) or patch= (edges to patch)"
        )
    chosen = torch.zeros(graph.valid.shape, dtype=torch.bool)
    for edge in keep if keep is not None else patch:
        chosen[graph.index(edge)] = True
    patched = graph.valid & ~chosen if keep is not None else chosen
    return patched.float()


def _writer_hook(graph_slice: slice, buffer: list[Tensor | None], corrupted: Tensor):
    def hook(x: Tensor, hook: Any) -> None:
        current = x.permute(2, 0, 1, 3) if x.ndim == 4 else x[None]
        diff = current - (corrupted.permute(2, 0, 1, 3) if corrupted.ndim == 4 else corrupted[None])
        for i, d in zip(range(graph_slice.start, graph_slice.stop), diff):
            buffer[i] = d

    return hook


def _reader_hook(rows: slice, buffer: list[Tensor | None], patched: Tensor):
    """Subtract, from these readers' inputs, the patched writers' (current - corrupted)."""
    weights = patched[rows]  # [rows, writer]
    used = weights.any(0).nonzero().flatten().tolist()  # writers before these readers (valid edges only)
    weights = weights[:, used]

    def hook(x: Tensor, hook: Any) -> Tensor:
        diffs = torch.stack([buffer[i] for i in used])  # [writer, batch, pos, d_model]
        correction = torch.einsum("rw,wbpd->bprd", weights.to(diffs.device, diffs.dtype), diffs)
        return x - (correction if x.ndim == 4 else correction[:, :, 0])

    return hook if used else None


def _site(reader_hook: str) -> str:
    """The residual-stream hook whose value a reader hook's input copies (in the same run)."""
    layer, name = reader_hook.split(".")[1], reader_hook.rsplit(".", 1)[1]
    if name in ("hook_q_input", "hook_k_input", "hook_v_input"):
        return f"blocks.{layer}.hook_resid_pre"
    return f"blocks.{layer}.hook_resid_mid" if name == "hook_mlp_in" else reader_hook


def _stacked_reader_hook(
    rows: slice, buffer: list[Tensor | None], patched: Tensor, valid: Tensor, corrupted_site: Tensor, copies: int
):
    """``_reader_hook`` for ``copies`` circuits stacked along the batch: ``patched`` [copy, reader,
    writer]; copy c's rows get copy c's correction, sum over its patched writers of (current -
    corrupted). Where fewer writers are kept than patched (small circuits), the same sum is taken the
    other way: the reader's input minus the corrupted run's value at the same point of the stream
    (``corrupted_site``; the sum over *every* earlier writer, the residual being a sum of them) minus
    the kept writers' differences, so the work follows the circuit's size, not the graph's."""
    weights = patched[:, rows]  # [copy, rows, writer]
    kept = valid[rows][None] & (weights == 0)
    used_p = weights.any(0).any(0).nonzero().flatten().tolist()
    used_k = kept.any(0).any(0).nonzero().flatten().tolist()
    complement = len(used_k) < len(used_p)
    used = used_k if complement else used_p
    weights = (kept.to(weights.dtype) if complement else weights)[:, :, used]

    def hook(x: Tensor, hook: Any) -> Tensor:
        rows_, pos, d = x.shape[0], x.shape[1], x.shape[-1]
        n_read = weights.shape[1]
        if used:
            diffs = torch.stack([buffer[i] for i in used])  # [writer, copy * batch, pos, d_model]
            diffs = diffs.view(len(used), copies, rows_ // copies, pos, d)
            summed = torch.einsum("crw,wcbpd->cbprd", weights.to(diffs.device, diffs.dtype), diffs)
            summed = summed.reshape(rows_, pos, n_read, d)
        else:
            summed = x.new_zeros(rows_, pos, n_read, d)
        if complement:  # every earlier writer's difference, minus the kept ones'
            base = x if x.ndim == 4 else x[:, :, None]
            summed = (base - corrupted_site[:, :, None]) - summed
        return x - (summed if x.ndim == 4 else summed[:, :, 0])

    return hook if (used or complement) else None


def patch_edges_stacked(model: Transformer, batch: Pairs, keeps: Sequence[Collection[Edge]]) -> Tensor:
    """``patch_edges(model, batch, keep)`` for every ``keep`` of ``keeps`` in one forward pass: the
    batch repeated ``len(keeps)`` times along the batch axis, copy c running circuit ``keeps[c]``
    (rows c * n .. (c + 1) * n - 1 of the output [len(keeps) * n, pos, vocab]). The same numbers as
    one ``patch_edges`` per circuit within float rounding (tested); what the edge-level curve runs.
    Each reader's correction is summed over the patched writers or, where fewer are kept, over the
    kept ones (``_stacked_reader_hook``)."""
    graph = edge_graph(model)
    check_pairs(model, batch)
    if not keeps:
        raise ValueError("patch_edges_stacked needs at least one circuit (a collection of edges to keep)")
    copies = len(keeps)
    patched = torch.stack([_patched_matrix(graph, keep, None) for keep in keeps])  # [copy, reader, writer]
    sites = sorted({_site(n) for n, _ in graph.reader_hooks})
    corrupted = cache_values(model, batch.corrupted, batch, [*(n for n, _ in graph.writer_hooks), *sites])
    corrupted = {n: v.repeat(copies, *([1] * (v.ndim - 1))) for n, v in corrupted.items()}
    buffer: list[Tensor | None] = [None] * len(graph.writers)
    hooks = [(n, _writer_hook(s, buffer, corrupted[n])) for n, s in graph.writer_hooks]
    for n, s in graph.reader_hooks:
        h = _stacked_reader_hook(s, buffer, patched, graph.valid, corrupted[_site(n)], copies)
        if h is not None:
            hooks.append((n, h))
    stacked = batch.repeat(copies)
    with torch.no_grad(), split_inputs(model), model.hooks(fwd_hooks=hooks):
        return forward(model, stacked.clean, stacked)


def patch_edges(
    model: Transformer,
    batch: Pairs,
    keep: Collection[Edge] | None = None,
    *,
    patch: Collection[Edge] | None = None,
    scale: float = 1.0,
) -> Tensor:
    """The model's output [n, pos, vocab] on ``batch.clean`` with the edges outside ``keep`` (or
    the edges in ``patch``) carrying the corrupted run's writer outputs. Edges are
    ``(upstream, downstream)`` or "up->down" (names of ``analyses.circuits.edges``). ``scale``
    moves a patched edge only part of the way, ``current + scale * (corrupted - current)``: the
    derivative at 0 is the edge's EAP score (what the tests check)."""
    graph = edge_graph(model)
    check_pairs(model, batch)
    patched = _patched_matrix(graph, keep, patch) * float(scale)
    corrupted = cache_values(model, batch.corrupted, batch, [n for n, _ in graph.writer_hooks])
    buffer: list[Tensor | None] = [None] * len(graph.writers)
    hooks = [(n, _writer_hook(s, buffer, corrupted[n])) for n, s in graph.writer_hooks]
    # readers after writers in the list: a block's result hook fires before its own MLP reader
    hooks += [(n, h) for n, s in graph.reader_hooks if (h := _reader_hook(s, buffer, patched)) is not None]
    with torch.no_grad(), split_inputs(model), model.hooks(fwd_hooks=hooks):
        return forward(model, batch.clean, batch)


def circuit_metric(
    model: Transformer,
    pairs: Pairs,
    metric: Metric = logit_diff,
    *,
    edges: Collection[Edge] | None = None,
    nodes: Collection[str] | None = None,
    batch_size: int = 16,
) -> Tensor:
    """[n] the metric of each pair with only the circuit (``edges`` or ``nodes``) running clean."""
    if (edges is None) == (nodes is None):
        raise ValueError("give exactly one of edges= or nodes= (the circuit to keep)")
    check_pairs(model, pairs)
    if nodes is not None:
        runs = run_circuits(model, pairs, {"circuit": nodes}, metric=metric, batch_size=batch_size)
        return torch.as_tensor(runs.per_pair["circuit"])
    out = []
    for batch in pairs.batches(batch_size):
        out.append(run_metric(model, batch, metric, patch_edges(model, batch, edges)).detach().cpu())
    return torch.cat(out)


def clean_and_corrupted(
    model: Transformer, pairs: Pairs, metric: Metric, batch_size: int = 16
) -> tuple[Tensor, Tensor]:
    """[n] the metric on the clean and on the corrupted prompts (no patching)."""
    clean, corrupted = [], []
    with torch.no_grad():
        for batch in pairs.batches(batch_size):
            clean.append(run_metric(model, batch, metric, forward(model, batch.clean, batch)).cpu())
            corrupted.append(run_metric(model, batch, metric, forward(model, batch.corrupted, batch)).cpu())
    return torch.cat(clean), torch.cat(corrupted)


def gap_recovered(
    model: Transformer,
    pairs: Pairs,
    metric: Metric = logit_diff,
    *,
    edges: Collection[Edge] | None = None,
    nodes: Collection[str] | None = None,
    batch_size: int = 16,
) -> float:
    """(mean circuit - mean corrupted) / (mean clean - mean corrupted): 1 = the whole gap."""
    clean, corrupted = clean_and_corrupted(model, pairs, metric, batch_size)
    circuit = circuit_metric(model, pairs, metric, edges=edges, nodes=nodes, batch_size=batch_size)
    gap = float(clean.mean() - corrupted.mean())
    if abs(gap) < 1e-12:
        raise ValueError("the clean and corrupted prompts give the same mean metric: there is no gap to recover")
    return float(circuit.mean() - corrupted.mean()) / gap
