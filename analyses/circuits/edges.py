"""Edge attribution patching (EAP, EAP-IG) between every writer and every reader of the residual.

Writers (upstream): ``input`` (the embeddings, ``blocks.0.hook_resid_pre``), each head ``a{l}.h{h}``
(its ``attn.hook_result``, ``z[h] @ W_O[h]``) and each MLP ``m{l}`` (``hook_mlp_out``). Readers
(downstream): each query head's q input ``a{l}.h{h}<q>``, each key/value head's k and v inputs
``a{l}.kv{g}<k>`` / ``a{l}.kv{g}<v>``, each MLP's input ``m{l}`` and the final residual ``logits``
(what the final norm and the unembedding read). A writer feeds every reader after it: the heads and
MLPs of later layers, its own layer's MLP (a head), and the logits.

    score(u -> r) = (u_corrupted - u_clean) . d metric / d (input of r)        (Syed et al. 2023)

summed over positions, averaged over pairs, with the gradient at the clean run (EAP) or averaged
over the EAP-IG path of ``analyses.circuits.attribution`` (input embeddings interpolated, Hanna
et al. 2024). The reader gradients come from the split reader inputs (``models/split_inputs.py``):
in a pre-norm model each reader normalises its own copy of the residual, which is a plain sum of
the writers' outputs (biases are the same in both runs and cancel), so a writer's effect on one
reader is separable from its effect on the others. Three norm placements break that, and
``edge_scores`` refuses them up front (``edge_refusal``; use ``node_scores``): post-norm (BERT/MiniLM)
puts the norm on the residual stream itself, so no reader sees a writer's output as an additive term;
sandwich norms (Gemma 2/3) and reordered norms (OLMo-2) add ``ln1_post(sum of the heads' outputs)``
to the residual, a norm of the heads' sum, so one head's output is not a term of any later reader's
input (the readers' side is additive there, and so are the input and the MLPs' ``hook_mlp_out``,
after ``ln2_post``, but a graph without per-head writers is not this one). Two block shapes are refused
the same way (``analyses.architecture``): parallel blocks (GPT-J, NeoX: a layer's MLP reads the block's
input, not its own layer's heads, and there is no ``hook_resid_mid`` for the edge patching) and
Granite's residual multiplier (the residual receives m times each head's output, not the hooked
output itself).

Grouped-query attention, natively: a key/value head ``g`` computes its keys and values once, from
one input, for all the query heads of its group (SmolLM2: kv head g serves heads 3g..3g+2), so the
edge into its k (or v) input is one edge, ``a{l}.kv{g}<k>``, whose score is that input's gradient
summed over the whole group's use of it. Query inputs are per query head.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from analyses.architecture import refuse, setting
from analyses.circuits.attribution import (
    cache_values,
    check_method,
    check_pairs,
    gradients_along_path,
    head_name,
    mlp_name,
)
from analyses.circuits.pairs import Metric, Pairs, logit_diff
from models.split_inputs import split_inputs
from models.transformer import Transformer

__all__ = ["EDGE_COLUMNS", "EdgeGraph", "edge_graph", "edge_refusal", "edge_scores"]

EDGE_COLUMNS = ["upstream", "downstream", "score", "up_layer", "up_head", "down_layer", "down_head", "down_input"]


@dataclass(frozen=True)
class EdgeGraph:
    """The writers and readers of a pre-norm model and which writer feeds which reader.

    ``writers`` / ``readers``: names in forward order; ``valid`` [reader, writer] bool: the writer
    comes before the reader. ``writer_hooks`` / ``reader_hooks``: the hook points whose values are
    the writers' outputs / the readers' inputs, each with the slice of writers (readers) it holds.
    """

    n_layers: int
    n_heads: int
    kv_heads: int
    writers: tuple[str, ...]
    readers: tuple[str, ...]
    valid: Tensor

    @property
    def writer_hooks(self) -> list[tuple[str, slice]]:
        out = [("blocks.0.hook_resid_pre", slice(0, 1))]
        for layer in range(self.n_layers):
            start = 1 + layer * (self.n_heads + 1)
            out.append((f"blocks.{layer}.attn.hook_result", slice(start, start + self.n_heads)))
            out.append((f"blocks.{layer}.hook_mlp_out", slice(start + self.n_heads, start + self.n_heads + 1)))
        return out

    @property
    def reader_hooks(self) -> list[tuple[str, slice]]:
        h, kv, out = self.n_heads, self.kv_heads, []
        for layer in range(self.n_layers):
            start = layer * (h + 2 * kv + 1)
            out.append((f"blocks.{layer}.hook_q_input", slice(start, start + h)))
            out.append((f"blocks.{layer}.hook_k_input", slice(start + h, start + h + kv)))
            out.append((f"blocks.{layer}.hook_v_input", slice(start + h + kv, start + h + 2 * kv)))
            out.append((f"blocks.{layer}.hook_mlp_in", slice(start + h + 2 * kv, start + h + 2 * kv + 1)))
        n = len(self.readers)
        out.append((f"blocks.{self.n_layers - 1}.hook_resid_post", slice(n - 1, n)))
        return out

    def index(self, edge: tuple[str, str] | str) -> tuple[int, int]:
        """(reader, writer) indices of an edge given as ``(upstream, downstream)`` or "up->down"."""
        up, down = edge.split("->") if isinstance(edge, str) else edge
        w, r = self._writer_ids.get(up), self._reader_ids.get(down)
        if w is None or r is None:
            bad = up if w is None else down
            kind = "upstream writer" if w is None else "downstream reader"
            examples = self.writers[:3] if w is None else self.readers[:4]
            raise ValueError(f"edge {edge!r}: no {kind} {bad!r} in this model (names look like {', '.join(examples)})")
        if not self.valid[r, w]:
            raise ValueError(f"edge {edge!r}: {up} does not come before {down}, so it does not feed it")
        return r, w

    @functools.cached_property
    def _writer_ids(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.writers)}

    @functools.cached_property
    def _reader_ids(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.readers)}

    def edges(self) -> list[tuple[str, str]]:
        """Every (upstream, downstream) pair that is an edge, readers in forward order."""
        r, w = self.valid.nonzero(as_tuple=True)
        return [(self.writers[j], self.readers[i]) for i, j in zip(r.tolist(), w.tolist())]


# the features without an edge graph, and why (``analyses.architecture.refuse``); a plain pre-norm
# model has one
_NOT_A_TERM = "so a head's output is not a term of any later reader's input"
_NO_EDGES = {
    "post_norm": "its norms sit on the residual stream itself, so a writer's output is not an additive term of any "
    "later reader's input",
    "sandwich_norms": f"ln1_post rescales the sum of the heads' outputs before it joins the residual, {_NOT_A_TERM}",
    "reordered_norms": f"ln1_post rescales the sum of the heads' outputs before it joins the residual, {_NOT_A_TERM}",
    "parallel_block": "a layer's MLP does not read its own layer's heads, and there is no resid_mid for the edge "
    "patching to read (the graph has a head feed its own layer's MLP)",
    "residual_multiplier": "the residual receives each head's output times it, so a head's hooked output is not the "
    "term it adds to later readers' inputs",
    "no_lm_head": "the edge scores are the gradient of a metric of the logits (a logit difference), and an encoder "
    "returns hidden states",
}


def edge_refusal(cfg: Any) -> str:
    """'' if the edge graph of a model with config ``cfg`` is defined (pre-norm, sequential blocks,
    sublayer outputs added as they are), else one line saying why not, naming the model and the
    feature (``analyses.architecture``)."""
    why = refuse(cfg, _NO_EDGES)
    if why:
        return f"model {why}"
    placement = setting(cfg, "norm_placement")
    if placement != "pre":
        name = getattr(cfg, "name", "?")
        return f"model {name!r} has norm placement {placement!r}, for which no edge graph is defined"
    return ""


def edge_graph(model: Any) -> EdgeGraph:
    """The ``EdgeGraph`` of a pre-norm ``models.Transformer``; a clear refusal otherwise."""
    if not isinstance(model, Transformer):
        raise TypeError(
            f"edge attribution runs on models.Transformer (it needs the split reader inputs), got "
            f"{type(model).__name__}; TransformerLens's bridge refuses grouped-query models in its edge mode"
        )
    cfg = model.cfg
    why = edge_refusal(cfg)
    if why:
        raise ValueError(f"{why}, so edge scores are not defined; use node_scores (node level)")
    L, H, K = cfg.n_layers, cfg.n_heads, cfg.kv_heads
    writers, readers = ["input"], []
    for layer in range(L):
        writers += [head_name(layer, h) for h in range(H)] + [mlp_name(layer)]
        readers += [f"{head_name(layer, h)}<q>" for h in range(H)]
        readers += [f"a{layer}.kv{g}<{x}>" for x in ("k", "v") for g in range(K)]
        readers.append(mlp_name(layer))
    readers.append("logits")
    valid = torch.zeros(len(readers), len(writers), dtype=torch.bool)
    for layer in range(L):
        start, seen_attn = layer * (H + 2 * K + 1), 1 + layer * (H + 1)
        valid[start : start + H + 2 * K, :seen_attn] = True
        valid[start + H + 2 * K, : seen_attn + H] = True
    valid[-1] = True
    return EdgeGraph(L, H, K, tuple(writers), tuple(readers), valid)


def stack_writers(graph: EdgeGraph, values: dict[str, Tensor]) -> Tensor:
    """The writers' outputs [writer, batch, pos, d_model] from the values of ``writer_hooks``."""
    parts = []
    for name, _ in graph.writer_hooks:
        v = values[name]
        parts.append(v.permute(2, 0, 1, 3) if v.ndim == 4 else v[None])
    return torch.cat(parts)


def _stack_readers(graph: EdgeGraph, values: dict[str, Tensor]) -> Tensor:
    parts = []
    for name, _ in graph.reader_hooks:
        v = values[name]
        parts.append(v.permute(2, 0, 1, 3) if v.ndim == 4 else v[None])
    return torch.cat(parts)


def _edge_batch(model: Transformer, graph: EdgeGraph, batch: Pairs, metric: Metric, alphas: list[float]) -> Tensor:
    """Summed edge scores of one batch, [reader, writer] float64 (invalid entries 0)."""
    writer_names = [n for n, _ in graph.writer_hooks]
    reader_names = [n for n, _ in graph.reader_hooks]
    corrupted = cache_values(model, batch.corrupted, batch, [*writer_names, "hook_embed"])
    with split_inputs(model):
        clean, grads = gradients_along_path(
            model, batch, metric, reader_names + writer_names, alphas, corrupted["hook_embed"]
        )
    delta = stack_writers(graph, corrupted) - stack_writers(graph, clean)  # [writer, batch, pos, d_model]
    g = _stack_readers(graph, grads)  # [reader, batch, pos, d_model]
    scores = torch.einsum("wbpd,rbpd->rw", delta.double(), g.double())
    return scores.where(graph.valid.to(scores.device), torch.zeros((), dtype=scores.dtype, device=scores.device)).cpu()


def _names_parts(graph: EdgeGraph, up: str, down: str, layer_of_logits: int) -> tuple[int, int, int, int, str]:
    up_layer = -1 if up == "input" else int(up[1:].split(".")[0])
    up_head = int(up.split(".h")[1]) if ".h" in up else -1
    if down == "logits":
        return up_layer, up_head, layer_of_logits, -1, "logits"
    down_layer = int(down[1:].split(".")[0])
    if down.startswith("m"):
        return up_layer, up_head, down_layer, -1, "mlp"
    kind = down[-2]
    head = int(down.split(".")[1][1 if kind == "q" else 2 :].split("<")[0])
    return up_layer, up_head, down_layer, head, kind


def edge_scores(
    model: Transformer,
    pairs: Pairs,
    metric: Metric = logit_diff,
    method: str = "eap",
    steps: int = 5,
    batch_size: int = 8,
    progress: bool = False,
) -> pd.DataFrame:
    """EAP or EAP-IG score of every edge (module docstring), averaged over ``pairs``.

    Returns a DataFrame, one row per edge (readers in forward order, then writers): ``upstream``,
    ``downstream`` (names as above), ``score``, and the parsed parts ``up_layer`` (-1: input),
    ``up_head`` (-1: an MLP or the input), ``down_layer`` (n_layers for the logits), ``down_head``
    (query head for q, kv head for k/v, -1 otherwise), ``down_input`` ("q", "k", "v", "mlp",
    "logits"). Memory is one batch's: [writers + readers, batch, pos, d_model] floats.
    """
    graph = edge_graph(model)
    alphas = check_method(method, steps)
    check_pairs(model, pairs)
    total = torch.zeros(graph.valid.shape, dtype=torch.float64)
    for batch in tqdm(list(pairs.batches(batch_size)), desc=f"{method} edges", disable=not progress):
        total += _edge_batch(model, graph, batch, metric, alphas)
    total /= len(pairs)
    rows = []
    r_idx, w_idx = graph.valid.nonzero(as_tuple=True)
    for r, w in zip(r_idx.tolist(), w_idx.tolist()):
        up, down = graph.writers[w], graph.readers[r]
        rows.append((up, down, float(total[r, w]), *_names_parts(graph, up, down, graph.n_layers)))
    return pd.DataFrame(rows, columns=EDGE_COLUMNS)
