"""Circuits of a given size and how much of the behaviour they carry: the faithfulness curve and
MIB's summaries of it (Mueller et al. 2025, "MIB: a mechanistic interpretability benchmark").

Circuits run through the one node-circuit runner (``analyses.circuits.runner.run_circuits``: every
node outside a circuit patched from the corrupted run; the input in every non-empty circuit, so
the empty circuit *is* the corrupted run and every head and MLP *is* the clean run) or, at edge
level, through ``analyses.circuits.patching.patch_edges``. With

    f(C) = (m(C) - m(corrupted)) / (m(clean) - m(corrupted))

(m: the task's logit difference, averaged over pairs), f(empty) = 0 and f(all nodes) = 1 exactly,
the normalisation MIB uses (its m(empty) equals our m(corrupted) by this construction).

The curve: circuits of the top ``int(p * n_nodes)`` nodes by |score| for MIB's proportions
p = 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1 (``MIB_PROPORTIONS``). Its summaries,
trapezoids over p on a linear axis as MIB's ``evaluate_area_under_curve`` computes them:

- CPR (``cpr``): the area under f(p); higher is better (1 - 0.001 for a circuit that is perfect
  from the first proportion on).
- CMD (``cmd``): the area under |1 - f(p)|; 0 is best.

On a linear axis [0.5, 1] is half of CPR's weight and every size up to 10% of the nodes a tenth, so
two rankings that differ only in their small circuits (the ones worth reading) get nearly the same
CPR. Beside it, in the units of f (both are means of f, so a constant curve c gives c):

- ``small_area`` (summary column ``mean_f_p_le_0.1``): the trapezoidal area of f over [p_min, 0.1]
  divided by that range's width, the mean faithfulness of the small circuits;
- ``log_area`` (``mean_f_log_p``): the area on a log(p) axis divided by the axis's width
  (log(1 / 0.001) = 6.91 on MIB's proportions), which weighs each decade of sizes alike.
  ``cpr(..., log_scale=True)`` is that area *not* divided (in f x log-units), kept as it was.

``summarise_curve(curve, per_pair=...)`` adds a 95% bootstrap interval of CPR, CMD and both areas
over the pairs (``bootstrap_summary``: pairs resampled with replacement, f renormalised by the
resample's own clean - corrupted gap, percentile interval).

Baselines on the same proportions (``faithfulness_curve``): ``n_random`` random circuits per size
(seeded), and a ranking of the heads by their pattern role (labelled heads first, then the role's
score; MLPs after every head, since a pattern role says nothing about them).

Node names and rankings live in ``analyses.circuits.nodes``, the runner in ``runner``, exact
per-head patching in ``exact``; their names are importable from here as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from analyses.circuits.exact import exact_head_effects, exact_patching, rank_agreement
from analyses.circuits.nodes import (
    INPUT,
    all_nodes,
    label_ranking,
    node_name,
    parse_node,
    random_circuits,
    scores_to_series,
    top_nodes,
)
from analyses.circuits.pairs import DEPRECATED
from analyses.circuits.runner import STACK_ROWS, circuit_metrics, run_circuits
from interp.pairs import Metric, Pairs, logit_diff
from interp.view import view

__all__ = [
    "MIB_PROPORTIONS",
    "SMALL_P",
    "cpr",
    "cmd",
    "small_area",
    "log_area",
    "bootstrap_summary",
    "faithfulness_curve",
    "pair_faithfulness",
    "edge_faithfulness_curve",
    "greedy_edges",
    "summarise_curve",
]
# importable from here as before (their homes: nodes, runner, exact, interp.pairs)
_MOVED = (INPUT, all_nodes, node_name, parse_node, random_circuits, scores_to_series, top_nodes, STACK_ROWS,
          circuit_metrics, exact_head_effects, exact_patching, rank_agreement, logit_diff)  # fmt: skip

MIB_PROPORTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
SMALL_P = 0.1  # the largest proportion of ``small_area``'s "small circuits"


def __getattr__(name: str) -> Any:
    if name in DEPRECATED:
        return DEPRECATED[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check_curve(x: Sequence[float], f: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, f = np.asarray(x, dtype=float), np.asarray(f, dtype=float)
    if x.ndim != 1 or x.shape != f.shape or len(x) < 2:
        raise ValueError(f"a curve needs >= 2 proportions and one value each; got {x.shape} and {f.shape}")
    if np.any(np.diff(x) <= 0) or x[0] <= 0 or x[-1] > 1:
        raise ValueError(f"proportions must increase strictly within (0, 1], got {x.tolist()}")
    return x, f


def cpr(x: Sequence[float], f: Sequence[float], log_scale: bool = False) -> float:
    """MIB's CPR: the trapezoidal area under faithfulness ``f`` over circuit proportions ``x``
    (increasing, in (0, 1]). Higher is better. ``log_scale``: the area over log(x) instead, *not*
    divided by the axis's width (log(x_max / x_min), 6.91 on MIB's proportions), so it is not in the
    units of f; kept for compatibility: ``log_area`` is that area as a mean faithfulness."""
    x, f = _check_curve(x, f)
    if log_scale:
        x = np.log(x)
    return float(np.sum(np.diff(x) * (f[1:] + f[:-1]) / 2))


def _areas(x: np.ndarray, f: np.ndarray, p_max: float = SMALL_P) -> np.ndarray:
    """[cpr, cmd, small_area, log_area] of curves ``f`` [n_x, ...] over checked proportions ``x``
    [n_x] (every column of ``f`` at once: the bootstrap's resamples)."""
    f = f.reshape(len(x), -1)

    def trapezoids(t: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (np.diff(t)[:, None] * (y[1:] + y[:-1]) / 2).sum(axis=0)

    # small circuits: the points up to p_max, and the linear interpolation at p_max if it falls between
    # two; NaN where no proportion lies below p_max (no range to average over)
    small = np.full(f.shape[1], np.nan)
    if x[0] < p_max:
        inside = x <= p_max
        xs, fs = x[inside], f[inside]
        if xs[-1] < p_max < x[-1]:
            j = int(np.searchsorted(x, p_max))
            w = (p_max - x[j - 1]) / (x[j] - x[j - 1])
            xs, fs = np.append(xs, p_max), np.vstack([fs, (1 - w) * f[j - 1] + w * f[j]])
        small = trapezoids(xs, fs) / (xs[-1] - xs[0])
    logx = np.log(x)
    return np.stack(
        [trapezoids(x, f), trapezoids(x, np.abs(1.0 - f)), small, trapezoids(logx, f) / (logx[-1] - logx[0])]
    )


def _check_small(x: np.ndarray, p_max: float) -> None:
    if not (isinstance(p_max, (int, float)) and x[0] < p_max):
        raise ValueError(
            f"p_max={p_max!r}: the small circuits' range [{x[0]:g}, p_max] needs p_max above the smallest "
            f"proportion {x[0]:g} (e.g. 0.1)"
        )


def small_area(x: Sequence[float], f: Sequence[float], p_max: float = SMALL_P) -> float:
    """The trapezoidal area of faithfulness ``f`` over proportions ``x`` from the smallest, x[0], to
    ``p_max`` (f linearly interpolated at p_max where it falls between two proportions; the whole
    curve where p_max >= x[-1]), divided by that range's width: the mean faithfulness of the small
    circuits, in the units of f (a constant curve c gives c). Higher is better."""
    x, f = _check_curve(x, f)
    _check_small(x, p_max)
    return float(_areas(x, f, p_max)[2, 0])


def log_area(x: Sequence[float], f: Sequence[float]) -> float:
    """The trapezoidal area of faithfulness ``f`` over log(proportion), divided by the log axis's
    width log(x[-1] / x[0]): the mean faithfulness on a log axis, each decade of circuit sizes
    weighed alike, in the units of f (a constant curve c gives c; ``cpr(x, f, log_scale=True)``
    is the undivided area). Higher is better."""
    x, f = _check_curve(x, f)
    return float(_areas(x, f)[3, 0])


def cmd(x: Sequence[float], f: Sequence[float], log_scale: bool = False) -> float:
    """MIB's CMD: the trapezoidal area under |1 - f| over proportions ``x``. 0 is best."""
    x, f = _check_curve(x, f)
    return cpr(x, np.abs(1.0 - f), log_scale=log_scale)


def faithfulness_curve(
    model: Any,
    pairs: Pairs,
    scores: pd.DataFrame | pd.Series | Mapping[str, Any] | None,
    proportions: Sequence[float] = MIB_PROPORTIONS,
    n_random: int = 10,
    labels: pd.DataFrame | None = None,
    seed: int = 0,
    batch_size: int = 32,
    metric: Metric = logit_diff,
    method: str = "attribution",
    progress: bool = False,
    per_pair: bool = False,
) -> pd.DataFrame | tuple[pd.DataFrame, np.ndarray]:
    """Faithfulness of circuits of ``int(p * n_nodes)`` nodes for each proportion p: the top nodes
    by |score| (named ``method``; ``scores`` may also be ``{method: scores}`` for several rankings,
    or None for none), ``n_random`` random circuits, and
    with ``labels`` (rows of one role: layer, head, label, score) the pattern-label ranking.

    Returns one row per (method, proportion, draw): method, proportion, k, draw, metric,
    faithfulness, and attrs clean, corrupted, gap, n_nodes; with ``per_pair`` also each row's
    faithfulness on each pair [row, pair] (``pair_faithfulness``)."""
    nodes = all_nodes(model)
    rankings: dict[str, pd.Series] = {}
    by_method = scores if isinstance(scores, Mapping) and all(not np.isscalar(v) for v in scores.values()) else None
    for name, table in (by_method or ({method: scores} if scores is not None else {})).items():
        rankings[name] = scores_to_series(table).reindex(nodes).fillna(0.0)
    if labels is not None and len(labels):
        rankings["pattern_labels"] = label_ranking(nodes, labels)
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
    runs = run_circuits(
        model, pairs, circuits, metric=metric, batch_size=batch_size, progress=progress, known_ends=True
    )
    table = _curve_rows(runs.mean, meta, len(nodes), "node")
    return (table, pair_faithfulness(runs, list(meta))) if per_pair else table


def pair_faithfulness(runs: Any, names: Sequence[str]) -> np.ndarray:
    """[circuit, pair] each pair's share of the curve's f: (m_i(C) - m_i(corrupted)) / (mean
    clean - mean corrupted), so that its mean over pairs is f (within float rounding) and intervals
    over prompts resample its columns. ``runs``: ``run_circuits``' result."""
    gap = runs.mean["clean"] - runs.mean["corrupted"]
    safe = gap if gap != 0 else float("nan")
    corrupted = runs.per_pair["corrupted"].astype(float)
    return np.stack([(runs.per_pair[name].astype(float) - corrupted) / safe for name in names])


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
    pairs: Pairs,
    scores: Mapping[str, pd.DataFrame],
    proportions: Sequence[float] = MIB_PROPORTIONS,
    n_random: int = 10,
    seed: int = 0,
    batch_size: int = 16,
    metric: Metric = logit_diff,
    progress: bool = False,
    greedy: bool = False,
    per_pair: bool = False,
) -> pd.DataFrame | tuple[pd.DataFrame, np.ndarray]:
    """``faithfulness_curve`` at edge level: circuits of the top ``int(p * n_edges)`` edges by
    |score| per method (``scores``: {method: every edge's score, ``edge_scores``' table}; with
    ``greedy`` also "{method} greedy", the connected selection of ``greedy_edges``) and
    ``n_random`` random edge sets per size, each run with every edge outside it carrying the
    corrupted run's writer output (``analyses.circuits.patching.patch_edges``: keep none = the
    corrupted run, keep all = the clean run). Same columns and attrs (n_nodes: the number of edges);
    with ``per_pair`` also each row's faithfulness on each pair [row, pair], as ``faithfulness_curve``.
    The circuits run stacked along the batch axis (``patch_edges_stacked``, ``STACK_ROWS`` rows a
    forward pass), the same numbers as one run per circuit within float rounding (tested)."""
    from tqdm.auto import tqdm

    from analyses.circuits.patching import patch_edges_stacked
    from analyses.circuits.runner import STACK_ROWS

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
        for d, draw in enumerate(random_circuits(edges, k, n_random, seed=seed + j)):
            circuits[f"random|{p}|{d}"] = draw
            meta[f"random|{p}|{d}"] = ("random", p, k, d)
    # keep no edge: the corrupted run; keep every edge: the clean run (patch_edges' identities)
    runs = {name: keep for name, keep in circuits.items() if 0 < len(keep) < len(edges)}
    names = list(runs)
    per: dict[str, list[np.ndarray]] = {name: [] for name in ["clean", "corrupted", *names]}
    group = max(1, STACK_ROWS // max(1, min(batch_size, len(pairs))))  # circuits per forward pass
    n_batches = -(-len(pairs) // batch_size)
    bar = tqdm(total=n_batches * len(names), desc="edge circuits", disable=not progress, leave=False)
    for batch in pairs.batches(batch_size):
        kw = {} if batch.attention_mask is None else {"attention_mask": batch.attention_mask}
        per["clean"].append(metric(model(batch.clean, **kw), batch).double().cpu().numpy())
        ckw = {} if batch.corrupted_attention_mask is None else {"attention_mask": batch.corrupted_attention_mask}
        per["corrupted"].append(metric(model(batch.corrupted, **ckw), batch).double().cpu().numpy())
        # circuits of one size per pass: a reader's correction sums the kept or the patched writers of
        # every copy in the pass, whichever side is smaller, so copies of one size keep it small
        by_size: dict[int, list[str]] = {}
        for n in names:
            by_size.setdefault(meta[n][2], []).append(n)
        chunks = [ns[i : i + group] for ns in by_size.values() for i in range(0, len(ns), group)]
        for chunk in chunks:
            out = patch_edges_stacked(model, batch, [runs[n] for n in chunk])
            values = metric(out, batch.repeat(len(chunk))).double().cpu().numpy().reshape(len(chunk), len(batch))
            for n, v in zip(chunk, values):
                per[n].append(v)
            bar.update(len(chunk))
    bar.close()
    per_pair_m = {name: np.concatenate(v) for name, v in per.items()}
    values = {name: float(v.mean()) for name, v in per_pair_m.items()}
    for name, keep in circuits.items():
        if name not in runs:
            per_pair_m[name] = per_pair_m["clean"] if len(keep) else per_pair_m["corrupted"]
            values[name] = values["clean"] if len(keep) else values["corrupted"]
    table = _curve_rows(values, meta, len(edges), "edge")
    if not per_pair:
        return table
    gap = values["clean"] - values["corrupted"]
    safe = gap if gap != 0 else float("nan")
    return table, np.stack([(per_pair_m[name] - per_pair_m["corrupted"]) / safe for name in meta])


STATS = ("cpr", "cmd", "mean_f_p_le_0.1", "mean_f_log_p")  # the order of ``_areas``' rows


def summarise_curve(
    curve: pd.DataFrame, per_pair: np.ndarray | None = None, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> pd.DataFrame:
    """One row per method: MIB's ``cpr`` and ``cmd``, and in f's units ``mean_f_p_le_0.1``
    (``small_area`` up to ``SMALL_P``) and ``mean_f_log_p`` (``log_area``); random: each draw's
    curve, then the mean over draws (and ``cpr_sd`` / ``cmd_sd`` over draws), ``draws``.

    ``per_pair`` (``faithfulness_curve(..., per_pair=True)``'s [curve row, pair]): also each
    statistic's ``level`` bootstrap interval over the pairs, ``{stat}_ci95_lo`` / ``{stat}_ci95_hi``
    at level 0.95 (``ci90`` at 0.9; ``bootstrap_summary``, ``n_boot`` resamples, ``seed``) and
    ``ci_pairs``, the number of pairs; without it those columns are NaN and ``ci_pairs`` 0."""
    rows = []
    for (method, draw), g in curve.groupby(["method", "draw"], sort=False):
        g = g.sort_values("proportion")
        x, f = _check_curve(g["proportion"].to_numpy(), g["faithfulness"].to_numpy())
        rows.append(dict(method=method, draw=draw, **dict(zip(STATS, _areas(x, f)[:, 0]))))
    per = pd.DataFrame(rows)
    out = per.groupby("method", sort=False).agg(
        cpr=("cpr", "mean"), cpr_sd=("cpr", "std"), cmd=("cmd", "mean"), cmd_sd=("cmd", "std"),
        draws=("draw", "size"), **{s: (s, "mean") for s in STATS[2:]},
    ).reset_index()  # fmt: skip
    tag = f"ci{round(level * 100)}"
    ci = None if per_pair is None else bootstrap_summary(curve, per_pair, n_boot=n_boot, seed=seed, level=level)
    for s in STATS:
        for end in ("lo", "hi"):
            values = np.nan if ci is None else ci.set_index("method").loc[out["method"], f"{s}_{end}"].to_numpy()
            out[f"{s}_{tag}_{end}"] = values
    out["ci_pairs"] = 0 if per_pair is None else int(np.asarray(per_pair).shape[1])
    return out


def bootstrap_summary(
    curve: pd.DataFrame, per_pair: np.ndarray, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> pd.DataFrame:
    """Percentile bootstrap intervals over pairs of each method's CPR, CMD, ``mean_f_p_le_0.1`` and
    ``mean_f_log_p``: one row per method, ``{stat}_lo`` / ``{stat}_hi``.

    A resample draws the pairs with replacement; each circuit's f on it is the ratio of its means,
    sum_i (m_i(C) - m_i(corrupted)) / sum_i (m_i(clean) - m_i(corrupted)) over the drawn pairs, which
    is f's own definition on the resample (its gap renormalised: the full circuit stays at 1, the
    empty one at 0). ``per_pair`` [curve row, pair] holds the numerators over the whole set's gap
    (``pair_faithfulness``), and the full circuit's row (``k`` = ``curve.attrs["n_nodes"]``, the
    clean run exactly) the per-pair gaps over it, so the curve must include proportion 1. Random:
    the statistic is the mean over draws on the same resample (the draws' spread is ``cpr_sd``)."""
    per_pair = np.asarray(per_pair, dtype=float)
    if per_pair.ndim != 2 or per_pair.shape[0] != len(curve):
        raise ValueError(
            f"per_pair must be [curve row, pair] with one row per curve row ({len(curve)}), got shape {per_pair.shape}"
        )
    n_pairs = per_pair.shape[1]
    if n_pairs < 2:
        raise ValueError(f"a bootstrap over pairs needs >= 2 pairs, got {n_pairs}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 2:
        raise ValueError(f"n_boot={n_boot!r}: use a whole number of resamples >= 2 (e.g. 1000)")
    if not 0 < level < 1:
        raise ValueError(f"level={level!r}: an interval's coverage lies in (0, 1), e.g. 0.95")
    full = np.flatnonzero(curve["k"].to_numpy() == curve.attrs.get("n_nodes", -1))
    if not len(full):
        raise ValueError(
            "bootstrap_summary renormalises each resample by its clean - corrupted gap, read off the full "
            "circuit's row: the curve needs proportion 1 (k = n_nodes), as MIB_PROPORTIONS has"
        )
    curve = curve.reset_index(drop=True)  # row i is per_pair's row i
    rng = np.random.default_rng(seed)
    # how often each pair is drawn in each resample [pair, boot]: n draws with replacement
    counts = rng.multinomial(n_pairs, np.full(n_pairs, 1.0 / n_pairs), size=n_boot).T.astype(float)
    gap = per_pair[full[0]] @ counts  # [boot]: the resample's gap over the whole set's
    with np.errstate(divide="ignore", invalid="ignore"):
        f_boot = (per_pair @ counts) / gap  # [curve row, boot]
    q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
    rows = []
    for method, g in curve.groupby("method", sort=False):
        stats = []
        for _, d in g.groupby("draw", sort=False):
            d = d.sort_values("proportion")
            x, _ = _check_curve(d["proportion"].to_numpy(), d["faithfulness"].to_numpy())
            stats.append(_areas(x, f_boot[d.index.to_numpy()]))  # [stat, boot]
        lo, hi = np.nanpercentile(np.mean(stats, axis=0), q, axis=1)
        rows.append(dict(method=method, **{f"{s}_lo": a for s, a in zip(STATS, lo)},
                         **{f"{s}_hi": b for s, b in zip(STATS, hi)}))  # fmt: skip
    return pd.DataFrame(rows)
