"""One circuit analysis (``interp circuit``): a task's solved pairs -> node scores (EAP, EAP-IG) and
edge scores on the discovery pairs -> exact per-head patching on the same pairs (the ground truth,
with Spearman agreement) -> faithfulness curves on the held-out pairs against random and
pattern-label circuits -> ``CircuitResult``, which ``analyses.circuits.report.write`` writes.

``run(model, task, ...)`` is the package's runner (``analyse_circuit`` is its deprecated name); it
takes a loaded model or a model name (loaded with ``dtype``), and the pattern-label baseline as a
table or as the command line's choice (``labels="auto"``, ``"patterns"``, ``"none"`` or a heads.csv
path: ``pick_labels``)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analyses.circuits.attribution import METHODS
from analyses.circuits.exact import exact_patching, rank_agreement
from analyses.circuits.faithfulness import MIB_PROPORTIONS, edge_faithfulness_curve, faithfulness_curve, summarise_curve
from analyses.circuits.nodes import INPUT, all_nodes, node_name, parse_node, scores_to_series, top_nodes
from analyses.circuits.tasks import (
    MIN_ACCURACY,
    MIN_PAIRS,
    TASK_ROLES,
    TASKS,
    CircuitTask,
    check_task,
    check_thresholds,
    task_accuracy,
)
from analyses.contract import head_table, make_info
from interp.pairs import Pairs, logit_diff
from interp.view import view

__all__ = [
    "CircuitResult", "run", "analyse_circuit", "role_labels", "circuit_refusal", "edge_level_ok", "pick_labels",
    "PATTERN_ROLES",
]  # fmt: skip

# what labels="auto" means: the roles pattern_labels reads off attention patterns
PATTERN_ROLES = ("induction", "previous_token")


@dataclass
class CircuitResult:
    """What ``analyse_circuit`` found. nodes: one row per head and MLP (node, layer, head, a score
    column per method, exact patching effect and its normalised value for heads); edges: the top
    edges per method (method, upstream, downstream, score) or None; curve: ``faithfulness_curve``'s
    rows (node level), edge_curve: ``edge_faithfulness_curve``'s (edge level, where edges were
    scored); summary: per method and level CPR / CMD, the mean faithfulness of the small circuits and
    on a log axis, and (node level) their bootstrap intervals over pairs (``summarise_curve``);
    agreement: Spearman rho of each method vs exact patching;
    circuit: the nodes of the circuit drawn in the graph figure; info: ``analyses.contract.make_info``
    (analysis, model, seed, params) plus the run's record (task, times; circuit.json). Per pair
    (not written to files): exact_pairs [pair, head] the exact patching effect of each head on each
    pair (heads in ``nodes``' head order); curve_pairs [curve row, pair] each pair's faithfulness
    (``faithfulness.pair_faithfulness``: its mean over pairs is the curve's f). heads: the per-head
    table (model, layer, head, task, a score column per method, exact_effect, exact_normalised)."""

    model_name: str
    task: CircuitTask
    tasks: pd.DataFrame
    nodes: pd.DataFrame | None = None
    edges: pd.DataFrame | None = None
    curve: pd.DataFrame | None = None
    summary: pd.DataFrame | None = None
    agreement: pd.DataFrame | None = None
    circuit: list = field(default_factory=list)
    info: dict = field(default_factory=dict)
    edge_curve: pd.DataFrame | None = None
    edge_tables: dict = field(default_factory=dict)
    exact_pairs: np.ndarray | None = None
    curve_pairs: np.ndarray | None = None

    @property
    def heads(self) -> pd.DataFrame | None:
        """One row per head: model, layer, head, task, then the nodes table's score columns."""
        if self.nodes is None:
            return None
        rows = self.nodes[self.nodes["head"].astype(str) != "mlp"].drop(columns="node")
        rows = rows.astype({"head": int}).reset_index(drop=True)
        rows.insert(2, "task", self.task.name)
        return head_table(rows, self.model_name)


def edge_level_ok(model: Any) -> str:
    """'' if edge attribution applies to ``model``, else one line saying why not, with "node level
    only": a norm placement without per-writer additive edges (``edges.edge_refusal``: post-norm, and
    the sandwich and reordered norms whose ln1_post rescales the heads' sum), or an encoder. ``run``
    asks before any attribution runs."""
    from analyses.circuits.edges import edge_refusal

    why = edge_refusal(getattr(model, "cfg", None))
    if why:
        return f"{why}; node level only"
    if not view(model).causal:
        return "edge attribution is for causal models here; node level only"
    return ""


def role_labels(
    labels: pd.DataFrame | None, task: str, reading: str | None = None, causal: bool = True
) -> pd.DataFrame | None:
    """The rows of a heads table for the task's pattern roles (``TASK_ROLES``): layer, head, role,
    reading, label (bool), score; None when there are none. A relation read both ways
    (``roles.READING_ROLES``: subject_verb, anaphora) keeps one reading: ``reading`` where given, else
    the predictive one for a causal model (the row where the model predicts the task's answer, where
    the circuit's logit difference is read) when the table has it, else the retrospective one (an
    encoder's, and every heads.csv written before labels v4). ``attrs["reading"]`` says which
    ("-": the task's roles are token roles)."""
    from analyses.heads.roles import READING_ROLES, READINGS, reading_of

    if reading is not None and reading not in READINGS:
        raise ValueError(f"reading must be one of {READINGS} or None (the task's default), got {reading!r}")
    if labels is None or not len(labels):
        return None
    rows = labels[labels["role"].astype(str).isin(TASK_ROLES[task])].copy()
    if not len(rows):
        return None
    directions = rows["direction"].astype(str) if "direction" in rows else pd.Series("", index=rows.index)
    derived = [reading_of(r, d) for r, d in zip(rows["role"].astype(str), directions)]
    given = rows["reading"].astype(str) if "reading" in rows else pd.Series("", index=rows.index)
    rows["reading"] = given.where(given.isin([*READINGS, "-"]), derived)
    relation = rows["role"].astype(str).isin(READING_ROLES)
    if relation.any():
        have = set(rows.loc[relation, "reading"])
        if reading is None:
            reading = "predictive" if causal and "predictive" in have else "retrospective"
        rows = rows[~relation | (rows["reading"] == reading)]
    rows["label"] = rows["label"].astype(str).str.lower().isin(("true", "1", "1.0"))
    rows["score"] = pd.to_numeric(rows.get("score", 0.0), errors="coerce").fillna(0.0)
    out = rows[["layer", "head", "role", "reading", "label", "score"]].astype({"layer": int, "head": int})
    out.attrs["reading"] = reading if relation.any() else "-"
    return out if len(out) else None


def _node_scores(
    model: Any, pairs: Pairs, method: str, steps: int, batch_size: int, progress: bool = False
) -> pd.Series:
    from analyses.circuits.attribution import node_scores

    table = node_scores(model, pairs, logit_diff, method=method, steps=steps, batch_size=batch_size, progress=progress)
    return scores_to_series(table)


def _edge_scores(
    model: Any, pairs: Pairs, method: str, steps: int, batch_size: int, progress: bool = False
) -> pd.DataFrame:
    from analyses.circuits.edges import edge_scores

    table = edge_scores(model, pairs, logit_diff, method=method, steps=steps, batch_size=batch_size, progress=progress)
    return table.assign(method=method)


def _top_edges(table: pd.DataFrame, top: int) -> pd.DataFrame:
    table = table.reindex(table["score"].abs().sort_values(ascending=False).index).head(top)
    return table[["method", "upstream", "downstream", "score"]]


def _nodes_table(model: Any, scores: dict[str, pd.Series], exact: pd.DataFrame | None) -> pd.DataFrame:
    rows = []
    for name in all_nodes(model):
        kind, layer, head = parse_node(name)
        rows.append(dict(node=name, layer=layer, head="mlp" if kind == "mlp" else head))
    df = pd.DataFrame(rows)
    for method, s in scores.items():
        df[method] = s.reindex(df["node"]).to_numpy()
    if exact is not None:
        e = exact.assign(node=[node_name(r.layer, r.head) for r in exact.itertuples()]).set_index("node")
        df["exact_effect"] = e["effect"].reindex(df["node"]).to_numpy()
        df["exact_normalised"] = e["normalised"].reindex(df["node"]).to_numpy()
    return df


def _top_circuit(curve: pd.DataFrame, scores: dict[str, pd.Series], target: float = 0.8, cap: int = 40) -> list:
    """The smallest circuit of the best method (highest CPR) reaching faithfulness ``target`` on the
    curve, at most ``cap`` nodes (else its top ``min(cap, 20)``)."""
    if not scores:
        return []
    summary = summarise_curve(curve[curve["method"].isin(list(scores))])
    best = summary.sort_values("cpr", ascending=False)["method"].iloc[0]
    rows = curve[(curve["method"] == best) & (curve["k"] > 0) & (curve["faithfulness"] >= target)]
    k = int(rows["k"].min()) if len(rows) else min(cap, 20)
    return [INPUT, *top_nodes(scores[best], min(k, cap))]


def pick_labels(model: Any, task: str, choice: Any = "auto", seed: int = 0) -> tuple[pd.DataFrame | None, str]:
    """The pattern-label baseline's heads table and where it came from: ``choice`` is a table, None,
    "none", "patterns" (previous-token and induction heads read off attention patterns:
    ``analyses.validation.pattern_labels``), "auto" (patterns where the task's role is one of
    ``PATTERN_ROLES``, else none) or the path of ``interp probe``'s heads.csv. A table written for
    another model (its ``model`` column) is refused, as ``interp validate`` refuses it
    (``check_labels_model``)."""
    from analyses.validation import check_labels_model, pattern_labels, read_labels

    if isinstance(choice, pd.DataFrame):
        check_labels_model(choice, [view(model).name])
        return choice, "given"
    if choice is None:
        return None, "none"
    if choice == "auto":
        choice = "patterns" if set(TASK_ROLES[task]) & set(PATTERN_ROLES) else "none"
    if choice == "none":
        return None, "none (pass --labels heads.csv from `interp probe` for this task's role)"
    if choice == "patterns":
        return pattern_labels(model, seed=seed), "previous-token and induction heads from patterns"
    table = read_labels(choice)
    check_labels_model(table, [view(model).name])
    return table, f"read from `{choice}`"


def _check_run(model: Any, task: str, methods: Sequence[str]) -> Any:
    """The view of ``model``, after checking the methods and the LM head (``run`` checked the task)."""
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"unknown attribution method {m!r}; use {', '.join(METHODS)}")
    why = circuit_refusal(model)
    if why:
        raise ValueError(why)
    return view(model)


def circuit_refusal(model: Any) -> str:
    """'' if the circuit analysis (node level) runs on ``model``, else one line saying why not: a
    model without an LM head. Node level patches and attributes the model's own hooks (heads'
    results, MLP outputs), so it takes every block shape and norm placement; the edge level has its
    own refusals (``edge_level_ok``). ``run`` asks before it loads any pairs."""
    v = view(model)
    if not v.lm_head:
        return (
            f"{v.name} has no LM head: the circuits' metric is a logit difference of next-token predictions "
            "(all-MiniLM-L6-v2 ships without its masked-LM head)"
        )
    return ""


def _exact(model: Any, discovery: Pairs, exact_pairs: int | None, batch_size: int, progress: bool, scores, result):
    """Exact per-head patching on the first ``exact_pairs`` discovery pairs, and its agreement with
    each method's scores (into ``result``). Returns the effects table."""
    t = time.perf_counter()
    sub = discovery if exact_pairs is None else discovery[slice(0, exact_pairs)]
    result.info["exact_pairs"] = len(sub)
    effects = exact_patching(model, sub, batch_size=batch_size, progress=progress)
    result.info["t_exact"] = time.perf_counter() - t
    result.exact_pairs = effects.per_pair
    cols = ("spearman_rho", "p_value", "n_heads")
    result.agreement = pd.DataFrame(
        [dict(method=m, **dict(zip(cols, rank_agreement(s, effects.table)))) for m, s in scores.items()]
    )
    return effects.table


def _analyse(model: Any, task: str, n: int, seed: int, methods: Sequence[str], steps: int, edges: bool,
             n_top_edges: int, labels: pd.DataFrame | None, n_random: int, proportions: Sequence[float],
             batch_size: int, exact: bool, exact_pairs: int | None, edge_curve: bool, all_tasks: bool,
             progress: bool, info: dict, task_kw: dict) -> CircuitResult:  # fmt: skip
    """The analysis itself (``run``'s steps, on a loaded model, ``info`` started)."""
    why = edge_level_ok(model) if edges else "not asked for (node level only)"
    info["edges"] = why or "scored"  # decided before the model runs
    t0 = time.perf_counter()
    tasks, built = task_accuracy(model, TASKS if all_tasks else (task,), n=n, seed=seed, **task_kw)
    info["t_tasks"] = time.perf_counter() - t0
    ct = built[task]
    info["input"] = getattr(ct.pairs, "input", "as given")  # the pairs' input convention (heads.model_input)
    result = CircuitResult(view(model).name, ct, tasks, info=info)
    if not ct.solved:
        return result
    discovery, evaluation = ct.discovery, ct.evaluation
    scores: dict[str, pd.Series] = {}
    for m in methods:
        t = time.perf_counter()
        scores[m] = _node_scores(model, discovery, m, steps, batch_size, progress)
        info[f"t_nodes_{m}"] = time.perf_counter() - t
    exact_df = _exact(model, discovery, exact_pairs, batch_size, progress, scores, result) if exact else None
    result.nodes = _nodes_table(model, scores, exact_df)
    if not why:
        t = time.perf_counter()
        result.edge_tables = {m: _edge_scores(model, discovery, m, steps, batch_size, progress) for m in methods}
        result.edges = pd.concat([_top_edges(tab, n_top_edges) for tab in result.edge_tables.values()])
        info["t_edges"] = time.perf_counter() - t
    t = time.perf_counter()
    task_labels = role_labels(labels, task, causal=view(model).causal)
    info["label_reading"] = task_labels.attrs["reading"] if task_labels is not None else "-"
    result.curve, result.curve_pairs = faithfulness_curve(
        model, evaluation, scores, proportions=proportions, n_random=n_random,
        labels=task_labels, seed=seed, batch_size=batch_size, progress=progress, per_pair=True,
    )  # fmt: skip
    info["t_curve"] = time.perf_counter() - t
    # intervals over the held-out pairs need two of them at least (a tiny run may have one) and the full
    # circuit's row (proportion 1, which renormalises each resample; custom proportions may lack it)
    full = bool((result.curve["k"] == result.curve.attrs["n_nodes"]).any())
    per_pair = result.curve_pairs if full and result.curve_pairs.shape[1] >= 2 else None
    info["intervals"] = "95% bootstrap over pairs" if per_pair is not None else "none: needs >= 2 pairs and p = 1"
    result.summary = summarise_curve(result.curve, per_pair=per_pair, seed=seed).assign(level="node")
    if result.edges is not None and edge_curve:
        t = time.perf_counter()
        result.edge_curve, edge_pairs = edge_faithfulness_curve(
            model, evaluation, result.edge_tables, proportions=proportions, n_random=n_random, seed=seed,
            batch_size=batch_size, progress=progress, greedy=True, per_pair=True,
        )  # fmt: skip
        info["t_edge_curve"] = time.perf_counter() - t
        full = bool((result.edge_curve["k"] == result.edge_curve.attrs["n_nodes"]).any())
        edge_pairs = edge_pairs if full and edge_pairs.shape[1] >= 2 else None
        edge_summary = summarise_curve(result.edge_curve, per_pair=edge_pairs, seed=seed).assign(level="edge")
        result.summary = pd.concat([result.summary, edge_summary])
    result.circuit = _top_circuit(result.curve, scores)
    info["t_total"] = time.perf_counter() - t0
    return result


def run(
    model: Any,
    task: str,
    n: int = 240,
    seed: int = 0,
    methods: Sequence[str] = METHODS,
    steps: int = 5,
    edges: bool = True,
    n_top_edges: int = 200,
    labels: Any = None,
    n_random: int = 10,
    proportions: Sequence[float] = MIB_PROPORTIONS,
    batch_size: int = 16,
    exact: bool = True,
    exact_pairs: int | None = 32,
    edge_curve: bool = True,
    all_tasks: bool = True,
    progress: bool = False,
    dtype: Any = None,
    threads: int | None = None,
    **task_kw: Any,
) -> CircuitResult:
    """The whole analysis of one task on one model (see the module docstring). ``model``: a loaded
    model, or a name or folder that ``models.load`` loads (with ``dtype``). ``all_tasks``: measure
    the model's accuracy on every task (the table says which it does not solve); the analysis runs
    on ``task`` only, and only if the model solves it. ``labels``: the pattern-label baseline
    (``pick_labels``: a heads table, "auto", "patterns", "none" or a heads.csv path). ``threads``:
    torch CPU threads for the run (restored afterwards). ``task_kw``: ``min_accuracy``,
    ``min_pairs``."""
    import torch

    methods = list(methods)
    check_task(task)
    check_thresholds(task_kw.get("min_accuracy", MIN_ACCURACY), task_kw.get("min_pairs", MIN_PAIRS))  # before loading
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:  # restored: the run may sit inside a longer process (a notebook, the tests)
        if isinstance(model, str):
            import models

            model = models.load(model, dtype=dtype).eval()
        v = _check_run(model, task, methods)
        table, source = pick_labels(model, task, labels, seed=seed)
        params = dict(task=task, n=n, steps=steps, methods=methods, edges=edges, n_top_edges=n_top_edges,
                      n_random=n_random, proportions=list(proportions), batch_size=batch_size, exact=exact,
                      exact_pairs=exact_pairs, edge_curve=edge_curve, all_tasks=all_tasks, labels=source,
                      **task_kw)  # fmt: skip
        info = make_info("circuits", v.name, seed, **params)
        info.update(task=task, n=n, steps=steps, methods=methods)  # circuit.json's record, read by the page
        result = _analyse(model, task, n, seed, methods, steps, edges, n_top_edges, table, n_random, proportions,
                          batch_size, exact, exact_pairs, edge_curve, all_tasks, progress, info, task_kw)  # fmt: skip
        result.info["labels"] = source
        return result
    finally:
        torch.set_num_threads(before)


def analyse_circuit(*args: Any, **kw: Any) -> CircuitResult:
    """Deprecated name of ``run``."""
    warnings.warn("analyse_circuit is deprecated; use analyses.circuits.run", DeprecationWarning, stacklevel=2)
    return run(*args, **kw)
