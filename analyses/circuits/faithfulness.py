"""Circuits of a given size and how much of the behaviour they carry: the faithfulness curve and
MIB's summaries of it (Mueller et al. 2025, "MIB: a mechanistic interpretability benchmark").

A *node* is a component that writes to the residual stream: ``"a{layer}.h{head}"`` (one attention
head: its ``hook_z`` slice, per *query* head under grouped-query attention), ``"m{layer}"`` (one
MLP: ``hook_mlp_out``), and ``"input"`` (the embeddings: ``blocks.0.hook_resid_pre``). MIB's names.

Running a circuit (``circuit_metrics``): the clean prompt runs with every node *outside* the circuit
replaced by its activation on the corrupted prompt (activation patching from the corrupted run, not
mean ablation); nodes inside compute freely. The input belongs to every non-empty circuit (a circuit
reads the clean prompt); the empty circuit patches the input too, so it *is* the corrupted run, and
the full circuit patches nothing, so it *is* the clean run. Hence, with

    f(C) = (m(C) - m(corrupted)) / (m(clean) - m(corrupted))

(m: the task's logit difference, averaged over pairs), f(empty) = 0 and f(all nodes) = 1 exactly,
the normalisation MIB uses (its m(empty) equals our m(corrupted) by this construction).

The curve: circuits of the top ``int(p * n_nodes)`` nodes by |score| for MIB's proportions
p = 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1 (``MIB_PROPORTIONS``). Its summaries,
trapezoids over p on a linear axis as MIB's ``evaluate_area_under_curve`` computes them:

- CPR (``cpr``): the area under f(p); higher is better (1 - 0.001 for a circuit that is perfect
  from the first proportion on).
- CMD (``cmd``): the area under |1 - f(p)|; 0 is best.

Baselines on the same proportions (``faithfulness_curve``): ``n_random`` random circuits per size
(seeded), and a ranking of the heads by their pattern role (labelled heads first, then the role's
score; MLPs after every head, since a pattern role says nothing about them).

Ground truth for the scores (``exact_head_effects``): every head patched alone from the corrupted
run into the clean run (``interp.interventions.head_sweep``), the exact counterpart of what EAP
linearises ((corrupted - clean) . gradient at the clean run); ``rank_agreement`` is Spearman's rho
between the two over heads.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from interp.interventions import head_sweep
from interp.names import act_name
from interp.view import view

__all__ = [
    "MIB_PROPORTIONS",
    "INPUT",
    "PairBatch",
    "as_batch",
    "node_name",
    "parse_node",
    "all_nodes",
    "scores_to_series",
    "top_nodes",
    "random_circuits",
    "logit_diff",
    "circuit_metrics",
    "cpr",
    "cmd",
    "faithfulness_curve",
    "edge_faithfulness_curve",
    "greedy_edges",
    "summarise_curve",
    "exact_head_effects",
    "rank_agreement",
    "to_pairs",
]

MIB_PROPORTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
INPUT = "input"
_HEAD = re.compile(r"^a(\d+)\.h(\d+)$")
_MLP = re.compile(r"^m(\d+)$")


# ------------------------------------------------------------------------------------------------
# pairs


@dataclass
class PairBatch:
    """Clean / corrupted prompts of the same length and what the metric reads.

    clean, corrupted: token ids [batch, pos]; attention_mask: [batch, pos] of the clean prompts (1
    real, 0 padding), corrupted_mask: of the corrupted ones (None: the same); pos: the position
    whose next-token logits the metric reads [batch]; right, wrong: the clean prompt's right and
    wrong answer token ids [batch]."""

    clean: Tensor
    corrupted: Tensor
    attention_mask: Tensor | None
    pos: Tensor
    right: Tensor
    wrong: Tensor
    corrupted_mask: Tensor | None = None

    def __len__(self) -> int:
        return int(self.clean.shape[0])

    def __getitem__(self, rows: Any) -> PairBatch:
        rows = torch.as_tensor(rows) if not isinstance(rows, slice) else rows

        def pick(x: Tensor | None) -> Tensor | None:
            return None if x is None else x[rows]

        return PairBatch(
            self.clean[rows],
            self.corrupted[rows],
            pick(self.attention_mask),
            self.pos[rows],
            self.right[rows],
            self.wrong[rows],
            pick(self.corrupted_mask),
        )

    def batches(self, batch_size: int) -> Iterable[PairBatch]:
        for start in range(0, len(self), batch_size):
            yield self[slice(start, start + batch_size)]


_ALIASES = {
    "clean": ("clean", "clean_tokens", "clean_ids"),
    "corrupted": ("corrupted", "corrupted_tokens", "corrupted_ids"),
    "attention_mask": ("attention_mask", "clean_mask", "clean_attention_mask", "mask"),
    "corrupted_mask": ("corrupted_mask", "corrupted_attention_mask"),
    "pos": ("pos", "answer_pos", "position", "positions"),
    "right": ("right", "right_ids", "answer", "correct"),
    "wrong": ("wrong", "wrong_ids", "distractor", "incorrect"),
}


def as_batch(pairs: Any) -> PairBatch:
    """``pairs`` (a ``PairBatch``, the circuits' or the prompt generator's pair set, or a mapping)
    as a ``PairBatch``: fields looked up by their usual names; ``pos`` defaults to each clean
    prompt's last real token. Checks that clean and corrupted prompts have the same shape."""
    if isinstance(pairs, PairBatch):
        return pairs

    def get(field: str) -> Any:
        for name in _ALIASES[field]:
            value = pairs.get(name) if isinstance(pairs, Mapping) else getattr(pairs, name, None)
            if value is not None:
                return value
        return None

    clean, corrupted = get("clean"), get("corrupted")
    if clean is None or corrupted is None:
        raise TypeError(
            f"{type(pairs).__name__} has no clean / corrupted token ids; pass a PairBatch or a pair set "
            "with fields clean, corrupted, attention_mask, right, wrong (and pos)"
        )
    clean, corrupted = torch.as_tensor(clean), torch.as_tensor(corrupted)
    if clean.shape != corrupted.shape:
        raise ValueError(
            f"clean prompts {tuple(clean.shape)} and corrupted prompts {tuple(corrupted.shape)} must have the "
            "same shape: patching copies activations position by position"
        )
    mask = get("attention_mask")
    mask = None if mask is None else torch.as_tensor(mask).long()
    cmask = get("corrupted_mask")
    cmask = None if cmask is None else torch.as_tensor(cmask).long()
    pos = get("pos")
    if pos is None:
        pos = (mask.sum(1) - 1) if mask is not None else torch.full((clean.shape[0],), clean.shape[1] - 1)
    right, wrong = get("right"), get("wrong")
    if right is None or wrong is None:
        raise TypeError(f"{type(pairs).__name__} has no right / wrong answer ids")
    return PairBatch(
        clean,
        corrupted,
        mask,
        torch.as_tensor(pos).long(),
        torch.as_tensor(right).long(),
        torch.as_tensor(wrong).long(),
        cmask,
    )


def logit_diff(logits: Tensor, batch: PairBatch) -> Tensor:
    """[batch]: logit(right) - logit(wrong) at each pair's answer position, in fp32."""
    rows = torch.arange(logits.shape[0], device=logits.device)
    at = logits[rows, batch.pos.to(logits.device)].float()  # [batch, vocab]
    return at[rows, batch.right.to(logits.device)] - at[rows, batch.wrong.to(logits.device)]


def _narrow(model: Any, metric: Callable) -> bool:
    """Whether a run may stop at the final norm and unembed only the answer position: the
    toolkit's own model (``return_type="hidden"``, ``_unembed``) and the metric ``logit_diff``,
    which reads nothing else. The unembedding is about a fifth of SmolLM2's forward (49,152 x 576
    of its 135M weights) and all but one position of it is thrown away by the metric."""
    from models.transformer import Transformer

    return metric is logit_diff and isinstance(model, Transformer)


def _answer_metric(model: Any, hidden: Tensor, batch: PairBatch) -> Tensor:
    """``logit_diff`` from the final-norm output [batch, pos, d_model]: the unembedding of the
    answer position only (the same numbers as the full logits' within float rounding: tested)."""
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    at = model._unembed(hidden[rows, batch.pos.to(hidden.device)]).float()  # [batch, vocab]
    return at[rows, batch.right.to(at.device)] - at[rows, batch.wrong.to(at.device)]


def _run_metric(
    model: Any,
    tokens: Tensor,
    batch: PairBatch,
    metric: Callable[[Tensor, PairBatch], Tensor],
    mask: Tensor | None,
    hooks: Sequence[tuple[str, Callable]] = (),
) -> Tensor:
    """[batch] ``metric`` of one forward on ``tokens`` with ``hooks``, through ``_answer_metric``
    where ``_narrow`` allows."""
    kw = {} if mask is None else {"attention_mask": mask}
    if _narrow(model, metric):
        with model.hooks(fwd_hooks=list(hooks)):
            return _answer_metric(model, model(tokens, return_type="hidden", **kw), batch)
    return metric(model.run_with_hooks(tokens, fwd_hooks=list(hooks), **kw), batch)


def _repeat(batch: PairBatch, g: int) -> PairBatch:
    """``batch`` stacked ``g`` times along the batch axis (copy i: rows i*b .. (i+1)*b - 1)."""

    def rep(x: Tensor | None) -> Tensor | None:
        return None if x is None else x.repeat(g, *([1] * (x.ndim - 1)))

    return PairBatch(
        rep(batch.clean),
        rep(batch.corrupted),
        rep(batch.attention_mask),
        rep(batch.pos),
        rep(batch.right),
        rep(batch.wrong),
        rep(batch.corrupted_mask),
    )


# ------------------------------------------------------------------------------------------------
# nodes and circuits


def node_name(layer: int, head: int | str) -> str:
    """``"a{layer}.h{head}"`` for a head, ``"m{layer}"`` for ``head == "mlp"``."""
    return f"m{int(layer)}" if str(head) == "mlp" else f"a{int(layer)}.h{int(head)}"


def parse_node(name: str) -> tuple[str, int, int | None]:
    """(kind, layer, head): ("head", L, H), ("mlp", L, None) or ("input", -1, None)."""
    if name == INPUT:
        return "input", -1, None
    m = _HEAD.match(name)
    if m:
        return "head", int(m.group(1)), int(m.group(2))
    m = _MLP.match(name)
    if m:
        return "mlp", int(m.group(1)), None
    raise ValueError(f"{name!r} is not a node name; use 'a<layer>.h<head>', 'm<layer>' or 'input'")


def all_nodes(model: Any) -> list[str]:
    """Every head and MLP of ``model`` in layer order (the input is not listed: it is in every
    non-empty circuit)."""
    v = view(model)
    out = []
    for layer in range(v.n_layers):
        out += [node_name(layer, h) for h in range(v.n_heads)]
        out.append(node_name(layer, "mlp"))
    return out


def scores_to_series(scores: pd.DataFrame | pd.Series | Mapping[str, float]) -> pd.Series:
    """Node scores as a Series indexed by node name: from a DataFrame with ``layer``, ``head`` (an
    int, or "mlp") and ``score`` columns (what ``node_scores`` returns), or ``node`` and ``score``."""
    if isinstance(scores, pd.Series):
        return scores.astype(float)
    if isinstance(scores, Mapping):
        return pd.Series(dict(scores), dtype=float)
    if "score" not in scores.columns:
        raise ValueError(f"node scores need a 'score' column; the table has {list(scores.columns)}")
    if "node" in scores.columns:
        names = scores["node"].astype(str)
    elif {"layer", "head"} <= set(scores.columns):
        names = [node_name(layer, head) for layer, head in zip(scores["layer"], scores["head"])]
    else:
        raise ValueError("node scores need a 'node' column or 'layer' and 'head' columns")
    return pd.Series(scores["score"].to_numpy(dtype=float), index=list(names))


def top_nodes(scores: pd.Series, k: int, absolute: bool = True) -> list[str]:
    """The ``k`` nodes of highest |score| (``absolute``, MIB's default) or score; ties by name order."""
    if k < 0:
        raise ValueError(f"a circuit has k >= 0 nodes, got k={k}")
    key = scores.abs() if absolute else scores
    order = np.argsort(-key.to_numpy(), kind="stable")
    return [scores.index[i] for i in order[:k]]


def random_circuits(nodes: Sequence[str], k: int, n: int, seed: int = 0) -> list[list[str]]:
    """``n`` circuits of ``k`` nodes drawn uniformly without replacement from ``nodes`` (seeded)."""
    rng = np.random.default_rng(seed)
    return [[nodes[i] for i in rng.choice(len(nodes), size=k, replace=False)] for _ in range(n)]


def _corrupted_cache(model: Any, batch: PairBatch) -> tuple[Tensor, dict[str, Tensor]]:
    """The corrupted run's output and the activations a node circuit patches from it."""
    v = view(model)
    names = [act_name(0, "hook_resid_pre")]
    for layer in range(v.n_layers):
        names += [act_name(layer, "attn.hook_z"), act_name(layer, "hook_mlp_out")]
    mask = batch.corrupted_mask if batch.corrupted_mask is not None else batch.attention_mask
    kw = {} if mask is None else {"attention_mask": mask}
    out, cache = model.run_with_cache(batch.corrupted, names_filter=names, **kw)
    return out, {name: cache[name] for name in names}


def _inside(model: Any, circuit: Collection[str]) -> tuple[dict[int, set[int]], set[int]]:
    """A circuit's heads by layer and its MLPs' layers, its names checked against the model."""
    v = view(model)
    inside: dict[int, set[int]] = {layer: set() for layer in range(v.n_layers)}
    mlps: set[int] = set()
    for name in circuit:
        kind, layer, head = parse_node(name)
        if (kind != "input" and not 0 <= layer < v.n_layers) or (kind == "head" and not 0 <= head < v.n_heads):
            raise ValueError(f"node {name!r} does not exist: the model has {v.n_layers} layers of {v.n_heads} heads")
        if kind == "head":
            inside[layer].add(head)
        elif kind == "mlp":
            mlps.add(layer)
    return inside, mlps


def _patch_hooks(model: Any, circuit: Collection[str], cache: Mapping[str, Tensor]) -> list[tuple[str, Callable]]:
    """Hooks that replace every node outside ``circuit`` by its corrupted activation."""
    v = view(model)
    inside, mlps = _inside(model, circuit)

    def replace_all(x: Tensor, hook: Any, src: Tensor) -> Tensor:
        return src.to(x.dtype)

    def replace_heads(z: Tensor, hook: Any, idx: Tensor, src: Tensor) -> Tensor:
        z = z.clone()
        z[:, :, idx] = src[:, :, idx].to(z.dtype)
        return z

    hooks = []
    if not circuit:  # the empty circuit reads the corrupted prompt: the corrupted run itself
        name = act_name(0, "hook_resid_pre")
        hooks.append((name, lambda x, hook, src=cache[name]: replace_all(x, hook, src)))
    for layer in range(v.n_layers):
        out = [h for h in range(v.n_heads) if h not in inside[layer]]
        if out:
            name = act_name(layer, "attn.hook_z")
            idx = torch.tensor(out)
            hooks.append((name, lambda z, hook, idx=idx, src=cache[name]: replace_heads(z, hook, idx, src)))
        if layer not in mlps:
            name = act_name(layer, "hook_mlp_out")
            hooks.append((name, lambda x, hook, src=cache[name]: replace_all(x, hook, src)))
    return hooks


# rows of one stacked forward (circuits x pairs): large enough that the per-operation cost of a
# 30-layer model on a few short prompts is shared, small enough to keep one run's logits small
STACK_ROWS = 128


def _stacked_hooks(
    model: Any, circuits: Sequence[Collection[str]], cache: Mapping[str, Tensor], b: int
) -> list[tuple[str, Callable]]:
    """``_patch_hooks`` of ``len(circuits)`` circuits at once, on a batch stacked that many times
    (copy i, rows i*b .. (i+1)*b - 1, runs circuit i): every node is replaced where its circuit
    leaves it out, with the same corrupted values ``_patch_hooks`` copies."""
    v = view(model)
    g = len(circuits)
    heads = torch.ones(g, v.n_layers, v.n_heads, dtype=torch.bool)  # True: patched from the corrupted run
    mlps = torch.ones(g, v.n_layers, dtype=torch.bool)
    empty = torch.zeros(g, dtype=torch.bool)
    for i, circuit in enumerate(circuits):
        inside, kept_mlps = _inside(model, circuit)
        empty[i] = not circuit
        for layer, kept in inside.items():
            heads[i, layer, sorted(kept)] = False
        mlps[i, sorted(kept_mlps)] = False

    def replace(x: Tensor, hook: Any, src: Tensor, where: Tensor) -> Tensor:
        stacked = x.view(g, b, *x.shape[1:])
        return torch.where(where.to(x.device), src.to(x.dtype)[None], stacked).view_as(x)

    hooks = []
    if empty.any():
        name = act_name(0, "hook_resid_pre")
        hooks.append((name, functools.partial(replace, src=cache[name], where=empty.view(g, 1, 1, 1))))
    for layer in range(v.n_layers):
        if heads[:, layer].any():
            name = act_name(layer, "attn.hook_z")
            where = heads[:, layer].view(g, 1, 1, v.n_heads, 1)
            hooks.append((name, functools.partial(replace, src=cache[name], where=where)))
        if mlps[:, layer].any():
            name = act_name(layer, "hook_mlp_out")
            hooks.append((name, functools.partial(replace, src=cache[name], where=mlps[:, layer].view(g, 1, 1, 1))))
    return hooks


@torch.no_grad()
def circuit_metrics(
    model: Any,
    pairs: Any,
    circuits: Mapping[str, Collection[str]],
    metric: Callable[[Tensor, PairBatch], Tensor] = logit_diff,
    batch_size: int = 32,
    progress: bool = False,
    known_ends: bool = False,
    fast: bool = True,
) -> dict[str, float]:
    """The mean metric over ``pairs`` of each circuit (nodes outside it patched from the corrupted
    run), plus ``"clean"`` and ``"corrupted"`` (the unpatched runs). Streams over the pairs in
    batches: one corrupted run per batch is cached and every circuit reuses it, so memory does not
    grow with the number of pairs; circuits with the same nodes run once. ``known_ends``: the empty
    circuit takes the corrupted value and the full one (every node and the input) the clean value
    without a run (they are those runs exactly: tested). ``fast`` (the toolkit's model): circuits
    run side by side, stacked along the batch axis (``STACK_ROWS`` rows a forward), and with
    ``logit_diff`` only the answer position is unembedded; False runs one circuit a forward with
    full logits (the straightforward path: the same numbers within float rounding, tested)."""
    from tqdm.auto import tqdm

    from models.transformer import Transformer

    batch_all = as_batch(pairs)
    fast = fast and isinstance(model, Transformer)
    full = frozenset([INPUT, *all_nodes(model)])
    unique: dict[frozenset, list[str]] = {}
    for name, circuit in circuits.items():
        unique.setdefault(frozenset(circuit), []).append(name)
    ends = {frozenset(): "corrupted", full: "clean"} if known_ends else {}
    runs = [c for c in unique if c not in ends]
    sums = {"clean": 0.0, "corrupted": 0.0, **{c: 0.0 for c in runs}}
    n_batches = -(-len(batch_all) // batch_size)
    bar = tqdm(total=n_batches * (len(runs) + 2), desc="circuits", disable=not progress, leave=False)
    for batch in batch_all.batches(batch_size):
        kw = {} if batch.attention_mask is None else {"attention_mask": batch.attention_mask}
        if fast:
            sums["clean"] += float(_run_metric(model, batch.clean, batch, metric, batch.attention_mask).sum())
        else:
            sums["clean"] += float(metric(model(batch.clean, **kw), batch).sum())
        out, cache = _corrupted_cache(model, batch)
        sums["corrupted"] += float(metric(out, batch).sum())
        bar.update(2)
        if not fast:
            for circuit in runs:
                out = model.run_with_hooks(batch.clean, fwd_hooks=_patch_hooks(model, circuit, cache), **kw)
                sums[circuit] += float(metric(out, batch).sum())
                bar.update(1)
            continue
        g = max(1, STACK_ROWS // len(batch))
        for start in range(0, len(runs), g):
            chunk = runs[start : start + g]
            stacked = _repeat(batch, len(chunk))
            hooks = _stacked_hooks(model, chunk, cache, len(batch))
            values = _run_metric(model, stacked.clean, stacked, metric, stacked.attention_mask, hooks)
            for circuit, value in zip(chunk, values.view(len(chunk), len(batch)).sum(1).tolist()):
                sums[circuit] += value
            bar.update(len(chunk))
    bar.close()
    mean = {key: s / len(batch_all) for key, s in sums.items()}
    values = {"clean": mean["clean"], "corrupted": mean["corrupted"]}
    for circuit, names in unique.items():
        for name in names:
            values[name] = mean[ends[circuit]] if circuit in ends else mean[circuit]
    return values


# ------------------------------------------------------------------------------------------------
# the curve and its areas


def _check_curve(x: Sequence[float], f: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, f = np.asarray(x, dtype=float), np.asarray(f, dtype=float)
    if x.ndim != 1 or x.shape != f.shape or len(x) < 2:
        raise ValueError(f"a curve needs >= 2 proportions and one value each; got {x.shape} and {f.shape}")
    if np.any(np.diff(x) <= 0) or x[0] <= 0 or x[-1] > 1:
        raise ValueError(f"proportions must increase strictly within (0, 1], got {x.tolist()}")
    return x, f


def cpr(x: Sequence[float], f: Sequence[float], log_scale: bool = False) -> float:
    """MIB's CPR: the trapezoidal area under faithfulness ``f`` over circuit proportions ``x``
    (increasing, in (0, 1]; on log(x) with ``log_scale``). Higher is better."""
    x, f = _check_curve(x, f)
    if log_scale:
        x = np.log(x)
    return float(np.sum(np.diff(x) * (f[1:] + f[:-1]) / 2))


def cmd(x: Sequence[float], f: Sequence[float], log_scale: bool = False) -> float:
    """MIB's CMD: the trapezoidal area under |1 - f| over proportions ``x``. 0 is best."""
    x, f = _check_curve(x, f)
    return cpr(x, np.abs(1.0 - f), log_scale=log_scale)


def _label_ranking(nodes: Sequence[str], labels: pd.DataFrame) -> pd.Series:
    """A score per node from a role's labels: labelled heads first (by their score), then the other
    heads by score, MLPs last."""
    score = {}
    for r in labels.itertuples():
        name = node_name(int(r.layer), int(r.head))
        s = float(getattr(r, "score", 0.0)) if pd.notna(getattr(r, "score", np.nan)) else 0.0
        score[name] = max(score.get(name, -np.inf), s + (1e6 if bool(r.label) else 0.0))
    low = min(score.values(), default=0.0) - 1.0
    out = {n: score.get(n, low if parse_node(n)[0] == "head" else low - 1.0) for n in nodes}
    return pd.Series(out, dtype=float)


def faithfulness_curve(
    model: Any,
    pairs: Any,
    scores: pd.DataFrame | pd.Series | Mapping[str, Any] | None,
    proportions: Sequence[float] = MIB_PROPORTIONS,
    n_random: int = 10,
    labels: pd.DataFrame | None = None,
    seed: int = 0,
    batch_size: int = 32,
    metric: Callable[[Tensor, PairBatch], Tensor] = logit_diff,
    method: str = "attribution",
    progress: bool = False,
) -> pd.DataFrame:
    """Faithfulness of circuits of ``int(p * n_nodes)`` nodes for each proportion p: the top nodes
    by |score| (named ``method``; ``scores`` may also be ``{method: scores}`` for several rankings,
    or None for none), ``n_random`` random circuits, and
    with ``labels`` (rows of one role: layer, head, label, score) the pattern-label ranking.

    Returns one row per (method, proportion, draw): method, proportion, k, draw, metric,
    faithfulness, and attrs clean, corrupted, gap, n_nodes."""
    nodes = all_nodes(model)
    rankings: dict[str, pd.Series] = {}
    by_method = scores if isinstance(scores, Mapping) and all(not np.isscalar(v) for v in scores.values()) else None
    for name, table in (by_method or ({method: scores} if scores is not None else {})).items():
        rankings[name] = scores_to_series(table).reindex(nodes).fillna(0.0)
    if labels is not None and len(labels):
        rankings["pattern_labels"] = _label_ranking(nodes, labels)
    circuits: dict[str, list[str]] = {}
    meta: dict[str, tuple[str, float, int, int]] = {}
    for j, p in enumerate(proportions):
        k = int(p * len(nodes))
        for name, ranking in rankings.items():
            key = f"{name}|{p}"
            circuits[key] = ([INPUT] if k else []) + top_nodes(ranking, k)
            meta[key] = (name, p, k, 0)
        for d, draw in enumerate(random_circuits(nodes, k, n_random, seed=seed + j)):
            key = f"random|{p}|{d}"
            circuits[key] = ([INPUT] if k else []) + draw
            meta[key] = ("random", p, k, d)
    values = circuit_metrics(
        model, pairs, circuits, metric=metric, batch_size=batch_size, progress=progress, known_ends=True
    )
    return _curve_rows(values, meta, len(nodes), "node")


def _curve_rows(values: Mapping[str, float], meta: Mapping[str, tuple], n_items: int, level: str) -> pd.DataFrame:
    """The curve's table from each circuit's mean metric (``values``, with "clean" and "corrupted")
    and its (method, proportion, k, draw)."""
    clean, corrupted = values["clean"], values["corrupted"]
    gap = clean - corrupted
    safe = gap if gap != 0 else float("nan")  # no gap: f is undefined, not infinite
    rows = [
        dict(method=m, proportion=p, k=k, draw=d, metric=values[key], faithfulness=(values[key] - corrupted) / safe)
        for key, (m, p, k, d) in meta.items()
    ]
    table = pd.DataFrame(rows, columns=["method", "proportion", "k", "draw", "metric", "faithfulness"])
    table.attrs.update(clean=clean, corrupted=corrupted, gap=gap, n_nodes=n_items, level=level)
    return table


def _edge_key(up: str, down: str) -> tuple[str, str]:
    return str(up), str(down)


def _edges_of(table: pd.DataFrame) -> pd.Series:
    """An edge table (upstream, downstream, score) as a Series indexed by (upstream, downstream)."""
    missing = {"upstream", "downstream", "score"} - set(table.columns)
    if missing:
        raise ValueError(f"edge scores need columns upstream, downstream, score; missing {sorted(missing)}")
    index = pd.MultiIndex.from_arrays([table["upstream"].astype(str), table["downstream"].astype(str)])
    return pd.Series(table["score"].to_numpy(float), index=index)


def _readers_of(up: str, group: int) -> list[str]:
    """The reader names through which writer ``up`` reads the residual: a head its q input and its
    kv head's k and v inputs (``group`` query heads per kv head), an MLP its input; the input none."""
    kind, layer, head = parse_node(up)
    if kind == "head":
        return [f"a{layer}.h{head}<q>", f"a{layer}.kv{head // group}<k>", f"a{layer}.kv{head // group}<v>"]
    return [f"m{layer}"] if kind == "mlp" else []


def greedy_edges(scores: pd.Series, k: int, group: int = 1) -> list[tuple[str, str]]:
    """A connected circuit of ``k`` edges grown from the logits backwards (Hanna et al. 2024's greedy
    search): the candidates are the edges into a reader already reached (at first, the edges into
    ``logits``); the one of highest |score| joins, and its upstream writer's readers
    (``_readers_of``) become reached. So every chosen edge has a path to the logits, unlike the top
    ``k`` by |score|, which may pick edges into readers nothing downstream reads. ``scores``:
    indexed by (upstream, downstream); ``group``: query heads per kv head. Fewer than ``k`` edges
    only when no candidate is left (ties: the first in ``scores``' order)."""
    import heapq

    if k < 0:
        raise ValueError(f"a circuit has k >= 0 edges, got k={k}")
    into: dict[str, list[tuple[float, int, tuple[str, str]]]] = {}
    for i, ((up, down), value) in enumerate(scores.items()):
        into.setdefault(str(down), []).append((-abs(float(value)), i, (str(up), str(down))))
    heap: list = []
    reached: set[str] = set()

    def reach(reader: str) -> None:
        if reader not in reached:
            reached.add(reader)
            for item in into.get(reader, []):
                heapq.heappush(heap, item)

    reach("logits")
    chosen: list[tuple[str, str]] = []
    while heap and len(chosen) < k:
        _, _, edge = heapq.heappop(heap)
        chosen.append(edge)
        for reader in _readers_of(edge[0], group):
            reach(reader)
    return chosen


@torch.no_grad()
def edge_faithfulness_curve(
    model: Any,
    pairs: Any,
    scores: Mapping[str, pd.DataFrame],
    proportions: Sequence[float] = MIB_PROPORTIONS,
    n_random: int = 10,
    seed: int = 0,
    batch_size: int = 16,
    metric: Callable[[Tensor, PairBatch], Tensor] = logit_diff,
    progress: bool = False,
    greedy: bool = False,
) -> pd.DataFrame:
    """``faithfulness_curve`` at edge level: circuits of the top ``int(p * n_edges)`` edges by
    |score| per method (``scores``: {method: every edge's score, ``edge_scores``' table}; with
    ``greedy`` also "{method} greedy", the connected selection of ``greedy_edges``) and
    ``n_random`` random edge sets per size, each run with every edge outside it carrying the
    corrupted run's writer output (``analyses.circuits.patching.patch_edges``: keep none = the
    corrupted run, keep all = the clean run). Same columns and attrs (n_nodes: the number of edges)."""
    from tqdm.auto import tqdm

    from analyses.circuits.patching import patch_edges

    tables = {m: _edges_of(t) for m, t in scores.items()}
    if not tables:
        raise ValueError("edge_faithfulness_curve needs at least one method's edge scores")
    edges = list(next(iter(tables.values())).index)
    group = view(model).n_heads // max(1, int(getattr(model.cfg, "kv_heads", 0) or view(model).n_heads))
    circuits: dict[str, list] = {}
    meta: dict[str, tuple[str, float, int, int]] = {}
    for j, p in enumerate(proportions):
        k = int(p * len(edges))
        for m, s in tables.items():
            circuits[f"{m}|{p}"] = top_nodes(s.reindex(edges).fillna(0.0), k)
            meta[f"{m}|{p}"] = (m, p, k, 0)
            if greedy:
                circuits[f"{m} greedy|{p}"] = greedy_edges(s.reindex(edges).fillna(0.0), k, group)
                meta[f"{m} greedy|{p}"] = (f"{m} greedy", p, k, 0)
        rng = np.random.default_rng(seed + j)
        for d in range(n_random):
            circuits[f"random|{p}|{d}"] = [edges[i] for i in rng.choice(len(edges), size=k, replace=False)]
            meta[f"random|{p}|{d}"] = ("random", p, k, d)
    batch_all = as_batch(pairs)
    # keep no edge: the corrupted run; keep every edge: the clean run (patch_edges' identities)
    runs = {name: keep for name, keep in circuits.items() if 0 < len(keep) < len(edges)}
    sums = {name: 0.0 for name in ["clean", "corrupted", *runs]}
    n_batches = -(-len(batch_all) // batch_size)
    bar = tqdm(total=n_batches * len(runs), desc="edge circuits", disable=not progress, leave=False)
    for batch in batch_all.batches(batch_size):
        theirs = to_pairs(batch)
        kw = {} if batch.attention_mask is None else {"attention_mask": batch.attention_mask}
        sums["clean"] += float(metric(model(batch.clean, **kw), batch).sum())
        sums["corrupted"] += float(metric(model(batch.corrupted, **kw), batch).sum())
        for name, keep in runs.items():
            sums[name] += float(metric(patch_edges(model, theirs, keep), batch).sum())
            bar.update(1)
    bar.close()
    values = {name: s / len(batch_all) for name, s in sums.items()}
    for name, keep in circuits.items():
        if name not in runs:
            values[name] = values["clean"] if len(keep) else values["corrupted"]
    return _curve_rows(values, meta, len(edges), "edge")


def to_pairs(batch: PairBatch) -> Any:
    """A ``PairBatch`` as the attribution code's ``analyses.circuits.pairs.Pairs``."""
    from analyses.circuits.pairs import Pairs

    return Pairs(batch.clean, batch.corrupted, batch.right, batch.wrong, batch.pos, batch.attention_mask)


def summarise_curve(curve: pd.DataFrame) -> pd.DataFrame:
    """CPR and CMD per method (random: of each draw's curve, then mean and spread over draws), and
    the faithfulness at the largest proportion below 1 that was run."""
    rows = []
    for (method, draw), g in curve.groupby(["method", "draw"], sort=False):
        g = g.sort_values("proportion")
        x, f = g["proportion"].to_numpy(), g["faithfulness"].to_numpy()
        rows.append(dict(method=method, draw=draw, cpr=cpr(x, f), cmd=cmd(x, f)))
    per = pd.DataFrame(rows)
    out = per.groupby("method", sort=False).agg(
        cpr=("cpr", "mean"), cpr_sd=("cpr", "std"), cmd=("cmd", "mean"), cmd_sd=("cmd", "std"), draws=("draw", "size")
    )
    return out.reset_index()


# ------------------------------------------------------------------------------------------------
# exact patching as ground truth


def _sweep_stacked(
    model: Any, batch: PairBatch, z: Mapping[int, Tensor], metric: Callable[[Tensor, PairBatch], Tensor]
) -> tuple[Tensor, Tensor]:
    """(the clean run's metric [batch], the metric with each head alone patched to ``z`` (its
    corrupted ``hook_z``) [layer * head, batch], heads in ``all_heads`` order). One clean run caches
    every block's input; then per layer one ``run_from_layer`` on that input stacked n_heads times,
    copy h with head h patched: what ``head_sweep`` does head by head."""
    v = view(model)
    n_heads, b = v.n_heads, len(batch)
    names = [act_name(layer, "hook_resid_pre") for layer in range(v.n_layers)]
    store: dict[str, Tensor] = {}

    def keep(x: Tensor, hook: Any) -> None:
        store[hook.name] = x

    narrow = _narrow(model, metric)
    kw = {} if batch.attention_mask is None else {"attention_mask": batch.attention_mask}
    with model.hooks(fwd_hooks=[(n, keep) for n in names]):
        out = model(batch.clean, return_type="hidden" if narrow else "default", **kw)
    clean = _answer_metric(model, out, batch) if narrow else metric(out, batch)
    stacked = _repeat(batch, n_heads)
    one_each = torch.eye(n_heads, dtype=torch.bool).view(n_heads, 1, 1, n_heads, 1)

    def patch(x: Tensor, hook: Any, src: Tensor) -> Tensor:
        copies = x.view(n_heads, b, *x.shape[1:])
        return torch.where(one_each.to(x.device), src.to(x.dtype)[None], copies).view_as(x)

    rows = []
    for layer in range(v.n_layers):
        hook = (act_name(layer, "attn.hook_z"), functools.partial(patch, src=z[layer]))
        with model.hooks(fwd_hooks=[hook]):
            out = model.run_from_layer(
                layer,
                store[names[layer]].repeat(n_heads, 1, 1),
                attention_mask=stacked.attention_mask,
                return_type="hidden" if narrow else "default",
            )
        rows.append((_answer_metric(model, out, stacked) if narrow else metric(out, stacked)).view(n_heads, b))
    return clean, torch.cat(rows)


@torch.no_grad()
def exact_head_effects(
    model: Any,
    pairs: Any,
    metric: Callable[[Tensor, PairBatch], Tensor] = logit_diff,
    batch_size: int = 32,
    progress: bool = False,
    fast: bool = True,
) -> pd.DataFrame:
    """Each head patched alone from the corrupted run into the clean run: columns layer, head,
    effect (mean of m(patched) - m(clean) over pairs: what EAP's score estimates) and
    normalised (effect / (m(clean) - m(corrupted)); -1: the head alone carries the whole gap).
    Every run starts from the head's layer (``run_from_layer`` on the clean run's cached input to
    it). ``fast`` (the toolkit's model): one run per layer with its heads' patched copies stacked
    along the batch axis (``_sweep_stacked``); False: one run per head (``head_sweep``), the same
    numbers within float rounding (tested)."""
    from tqdm.auto import tqdm

    from interp.interventions import all_heads, cache_z
    from models.transformer import Transformer

    batch_all = as_batch(pairs)
    heads = all_heads(model)
    total = np.zeros(len(heads))
    clean_sum = corrupted_sum = 0.0
    fast = fast and isinstance(model, Transformer)
    for batch in tqdm(list(batch_all.batches(batch_size)), desc="exact patching", disable=not progress, leave=False):
        cmask = batch.corrupted_mask if batch.corrupted_mask is not None else batch.attention_mask
        out, z = cache_z(model, batch.corrupted, range(view(model).n_layers), attention_mask=cmask)
        corrupted_sum += float(metric(out, batch).sum())
        if fast:
            clean, patched = _sweep_stacked(model, batch, z, metric)
            clean_sum += float(clean.sum())
            total += patched.sum(1).double().cpu().numpy()
            continue
        kw = {} if batch.attention_mask is None else {"attention_mask": batch.attention_mask}
        clean_sum += float(metric(model(batch.clean, **kw), batch).sum())
        res = head_sweep(
            model, batch.clean, z, {"m": lambda out, b=batch: metric(out, b)}, attention_mask=batch.attention_mask
        )
        total += res["m"].sum(1)
    n = len(batch_all)
    clean, corrupted = clean_sum / n, corrupted_sum / n
    effect = total / n - clean
    df = pd.DataFrame(heads, columns=["layer", "head"])
    df["effect"] = effect
    df["normalised"] = effect / (clean - corrupted)
    df.attrs.update(clean=clean, corrupted=corrupted)
    return df


def rank_agreement(attribution: pd.DataFrame | pd.Series, exact: pd.DataFrame) -> tuple[float, float, int]:
    """Spearman's rho (scipy) between attribution scores and exact patching effects over the heads
    both list: (rho, p-value, number of heads)."""
    from scipy.stats import spearmanr

    a = scores_to_series(attribution)
    e = pd.Series(exact["effect"].to_numpy(float), index=[node_name(r.layer, r.head) for r in exact.itertuples()])
    common = [n for n in e.index if n in a.index]
    if len(common) < 3:
        raise ValueError(f"rank agreement needs >= 3 heads scored by both; {len(common)} are")
    rho, p = spearmanr(a[common].to_numpy(), e[common].to_numpy())
    return float(rho), float(p), len(common)
