"""The one node-circuit runner: a circuit runs on the clean prompt with every node *outside* it
replaced by its activation on the corrupted prompt (activation patching from the corrupted run, not
mean ablation); nodes inside compute freely.

The input rule (MIB's ends, docs/circuits.md): the input (``blocks.0.hook_resid_pre``) belongs to
every non-empty circuit, named or not (a circuit reads the clean prompt); only the empty circuit
patches it, so the empty circuit *is* the corrupted run and every head and MLP (with or without
``"input"``) *is* the clean run. f(empty) = 0 and f(all nodes) = 1 exactly.

``run_circuits`` streams a set of circuits over the pairs and returns each circuit's metric per
pair and its mean over pairs; ``circuit_metrics`` is the means alone; ``patch_nodes`` is one
circuit's output on one batch. The replacement hooks come from ``interp.interventions``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from analyses.circuits.nodes import INPUT, all_nodes, circuit_parts
from interp.interventions import ablation_hooks, replace_all, replace_stacked
from interp.names import act_name
from interp.pairs import Metric, Pairs, answer_diff, logit_diff
from interp.view import view

__all__ = ["STACK_ROWS", "CircuitRuns", "run_circuits", "circuit_metrics", "patch_nodes", "pairs_metric"]

# rows of one stacked forward (circuits x pairs): large enough that the per-operation cost of a
# 30-layer model on a few short prompts is shared, small enough to keep one run's logits small
STACK_ROWS = 128


def narrow(model: Any, metric: Callable) -> bool:
    """Whether a run may stop at the final norm and unembed only the answer position: the
    toolkit's own model (``return_type="hidden"``, ``_unembed``) and the metric ``logit_diff``,
    which reads nothing else. The unembedding is about a fifth of SmolLM2's forward (49,152 x 576
    of its 135M weights) and all but one position of it is thrown away by the metric."""
    from models.transformer import Transformer

    return metric is logit_diff and isinstance(model, Transformer)


def answer_metric(model: Any, hidden: Tensor, pairs: Pairs) -> Tensor:
    """``logit_diff`` from the final-norm output [n, pos, d_model]: the unembedding of the answer
    position only (the same numbers as the full logits' within float rounding: tested)."""
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    return answer_diff(model._unembed(hidden[rows, pairs.position.to(hidden.device)]), pairs)


def pairs_metric(
    model: Any,
    tokens: Tensor,
    pairs: Pairs,
    metric: Metric,
    mask: Tensor | None,
    hooks: Sequence[tuple[str, Callable]] = (),
) -> Tensor:
    """[n] ``metric`` of one forward on ``tokens`` with ``hooks``, through ``answer_metric`` where
    ``narrow`` allows."""
    kw = {} if mask is None else {"attention_mask": mask}
    if narrow(model, metric):
        with model.hooks(fwd_hooks=list(hooks)):
            return answer_metric(model, model(tokens, return_type="hidden", **kw), pairs)
    return metric(model.run_with_hooks(tokens, fwd_hooks=list(hooks), **kw), pairs)


def _corrupted_cache(model: Any, pairs: Pairs) -> tuple[Tensor, dict[str, Tensor]]:
    """The corrupted run's output and the activations a node circuit patches from it."""
    v = view(model)
    names = [act_name(0, "hook_resid_pre")]
    for layer in range(v.n_layers):
        names += [act_name(layer, "attn.hook_z"), act_name(layer, "hook_mlp_out")]
    mask = pairs.corrupted_attention_mask
    kw = {} if mask is None else {"attention_mask": mask}
    out, cache = model.run_with_cache(pairs.corrupted, names_filter=names, **kw)
    return out, {name: cache[name] for name in names}


def _patch_hooks(model: Any, circuit: Collection[str], cache: Mapping[str, Tensor]) -> list[tuple[str, Callable]]:
    """Hooks that replace every node outside ``circuit`` by its corrupted activation (the input
    only for the empty circuit)."""
    v = view(model)
    inside, mlps = circuit_parts(model, circuit)
    hooks = []
    if not circuit:  # the empty circuit reads the corrupted prompt: the corrupted run itself
        name = act_name(0, "hook_resid_pre")
        hooks.append((name, functools.partial(replace_all, src=cache[name])))
    out = [(layer, h) for layer in range(v.n_layers) for h in range(v.n_heads) if h not in inside[layer]]
    z = {layer: cache[act_name(layer, "attn.hook_z")] for layer in range(v.n_layers)}
    hooks += ablation_hooks(out, z)
    for layer in range(v.n_layers):
        if layer not in mlps:
            name = act_name(layer, "hook_mlp_out")
            hooks.append((name, functools.partial(replace_all, src=cache[name])))
    return hooks


def _stacked_hooks(
    model: Any, circuits: Sequence[Collection[str]], cache: Mapping[str, Tensor]
) -> list[tuple[str, Callable]]:
    """``_patch_hooks`` of ``len(circuits)`` circuits at once, on a batch stacked that many times
    (copy i runs circuit i): every node is replaced where its circuit leaves it out, with the same
    corrupted values ``_patch_hooks`` copies."""
    v = view(model)
    g = len(circuits)
    heads = torch.ones(g, v.n_layers, v.n_heads, dtype=torch.bool)  # True: patched from the corrupted run
    mlps = torch.ones(g, v.n_layers, dtype=torch.bool)
    empty = torch.zeros(g, dtype=torch.bool)
    for i, circuit in enumerate(circuits):
        inside, kept_mlps = circuit_parts(model, circuit)
        empty[i] = not circuit
        for layer, kept in inside.items():
            heads[i, layer, sorted(kept)] = False
        mlps[i, sorted(kept_mlps)] = False
    hooks = []
    if empty.any():
        name = act_name(0, "hook_resid_pre")
        hooks.append((name, functools.partial(replace_stacked, src=cache[name], where=empty.view(g, 1, 1, 1))))
    for layer in range(v.n_layers):
        if heads[:, layer].any():
            name = act_name(layer, "attn.hook_z")
            where = heads[:, layer].view(g, 1, 1, v.n_heads, 1)
            hooks.append((name, functools.partial(replace_stacked, src=cache[name], where=where)))
        if mlps[:, layer].any():
            name = act_name(layer, "hook_mlp_out")
            where = mlps[:, layer].view(g, 1, 1, 1)
            hooks.append((name, functools.partial(replace_stacked, src=cache[name], where=where)))
    return hooks


@dataclass
class CircuitRuns:
    """What ``run_circuits`` measured: ``mean[name]`` the metric's mean over pairs (as the curve and
    its CSV use it) and ``per_pair[name]`` the metric of each pair [n], for every circuit and for
    ``"clean"`` and ``"corrupted"`` (the unpatched runs)."""

    mean: dict[str, float]
    per_pair: dict[str, np.ndarray]


def _batch_runs(model, batch, runs, metric, fast, sums, parts, bar) -> None:
    """One batch of ``run_circuits``: the clean and corrupted runs and every circuit in ``runs``,
    summed into ``sums`` (fp32 batch sums, as the means have always been computed) and appended per
    pair to ``parts``."""
    kw = {} if batch.attention_mask is None else {"attention_mask": batch.attention_mask}

    def add(key: Any, values: Tensor, total: float) -> None:
        sums[key] += total
        parts[key].append(values.detach().float().cpu().numpy())

    if fast:
        clean = pairs_metric(model, batch.clean, batch, metric, batch.attention_mask)
    else:
        clean = metric(model(batch.clean, **kw), batch)
    add("clean", clean, float(clean.sum()))
    out, cache = _corrupted_cache(model, batch)
    corrupted = metric(out, batch)
    add("corrupted", corrupted, float(corrupted.sum()))
    bar.update(2)
    if not fast:
        for circuit in runs:
            values = metric(
                model.run_with_hooks(batch.clean, fwd_hooks=_patch_hooks(model, circuit, cache), **kw), batch
            )
            add(circuit, values, float(values.sum()))
            bar.update(1)
        return
    g = max(1, STACK_ROWS // len(batch))
    for start in range(0, len(runs), g):
        chunk = runs[start : start + g]
        stacked = batch.repeat(len(chunk))
        hooks = _stacked_hooks(model, chunk, cache)
        values = pairs_metric(model, stacked.clean, stacked, metric, stacked.attention_mask, hooks)
        rows = values.view(len(chunk), len(batch))
        for circuit, row, total in zip(chunk, rows, rows.sum(1).tolist()):
            add(circuit, row, total)
        bar.update(len(chunk))


@torch.no_grad()
def run_circuits(
    model: Any,
    pairs: Pairs,
    circuits: Mapping[str, Collection[str]],
    metric: Metric = logit_diff,
    batch_size: int = 32,
    progress: bool = False,
    known_ends: bool = False,
    fast: bool = True,
) -> CircuitRuns:
    """Every circuit of ``circuits`` ({name: node names}) run over ``pairs``: the metric per pair
    and its mean, plus ``"clean"`` and ``"corrupted"``. Streams over the pairs in batches: one
    corrupted run per batch is cached and every circuit reuses it, so memory does not grow with the
    number of pairs; circuits with the same nodes run once. ``known_ends``: the empty circuit takes
    the corrupted values and the full one (every node) the clean values without a run (they are
    those runs exactly: tested). ``fast`` (the toolkit's model): circuits run side by side, stacked
    along the batch axis (``STACK_ROWS`` rows a forward), and with ``logit_diff`` only the answer
    position is unembedded; False runs one circuit a forward with full logits (the straightforward
    path: the same numbers within float rounding, tested)."""
    from tqdm.auto import tqdm

    from models.transformer import Transformer

    if not isinstance(pairs, Pairs):
        raise TypeError(f"pairs must be interp.pairs.Pairs (or a PairSet), got {type(pairs).__name__}")
    fast = fast and isinstance(model, Transformer)
    nodes = all_nodes(model)
    unique: dict[frozenset, list[str]] = {}
    for name, circuit in circuits.items():
        unique.setdefault(frozenset(circuit), []).append(name)
    ends = {}
    if known_ends:  # every head and MLP is the clean run, with the input named or not
        ends = {frozenset(): "corrupted", frozenset(nodes): "clean", frozenset([INPUT, *nodes]): "clean"}
    runs = [c for c in unique if c not in ends]
    sums: dict[Any, float] = {"clean": 0.0, "corrupted": 0.0, **{c: 0.0 for c in runs}}
    parts: dict[Any, list] = {key: [] for key in sums}
    n_batches = -(-len(pairs) // batch_size)
    bar = tqdm(total=n_batches * (len(runs) + 2), desc="circuits", disable=not progress, leave=False)
    for batch in pairs.batches(batch_size):
        _batch_runs(model, batch, runs, metric, fast, sums, parts, bar)
    bar.close()
    mean = {key: s / len(pairs) for key, s in sums.items()}
    per = {key: np.concatenate(p) for key, p in parts.items()}
    out = CircuitRuns(
        {"clean": mean["clean"], "corrupted": mean["corrupted"]}, {k: per[k] for k in ("clean", "corrupted")}
    )
    for circuit, names in unique.items():
        key = ends.get(circuit, circuit)
        for name in names:
            out.mean[name], out.per_pair[name] = mean[key], per[key]
    return out


def circuit_metrics(model: Any, pairs: Pairs, circuits: Mapping[str, Collection[str]], *args: Any, **kw: Any) -> dict:
    """``run_circuits(...).mean`` (the same arguments): each circuit's mean metric over the pairs,
    and "clean" and "corrupted"."""
    return run_circuits(model, pairs, circuits, *args, **kw).mean


@torch.no_grad()
def patch_nodes(model: Any, batch: Pairs, keep: Collection[str]) -> Tensor:
    """The model's output on ``batch.clean`` with every node not named in ``keep`` ("a3.h2", "m3";
    the input is kept unless ``keep`` is empty) replaced by its value in the corrupted run: one
    circuit of ``run_circuits``, with its full logits."""
    from analyses.circuits.attribution import check_pairs

    check_pairs(model, batch)
    circuit_parts(model, keep)
    _, cache = _corrupted_cache(model, batch)
    kw = {} if batch.attention_mask is None else {"attention_mask": batch.attention_mask}
    return model.run_with_hooks(batch.clean, fwd_hooks=_patch_hooks(model, keep, cache), **kw)
