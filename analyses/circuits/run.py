"""One circuit analysis (``interp circuit``): a task's solved pairs -> node scores (EAP, EAP-IG) and
edge scores on the discovery pairs -> exact per-head patching on the same pairs (the ground truth,
with Spearman agreement) -> faithfulness curves on the held-out pairs against random and
pattern-label circuits -> ``CircuitResult``, which ``analyses.circuits.report`` writes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analyses.circuits.attribution import METHODS
from analyses.circuits.faithfulness import (
    INPUT,
    MIB_PROPORTIONS,
    PairBatch,
    as_batch,
    edge_faithfulness_curve,
    exact_head_effects,
    faithfulness_curve,
    logit_diff,
    node_name,
    rank_agreement,
    scores_to_series,
    summarise_curve,
    to_pairs,
    top_nodes,
)
from analyses.circuits.tasks import TASK_ROLES, TASKS, CircuitTask, check_task, task_accuracy
from interp.view import view

__all__ = ["CircuitResult", "analyse_circuit", "role_labels", "edge_level_ok"]


@dataclass
class CircuitResult:
    """What ``analyse_circuit`` found. nodes: one row per head and MLP (node, layer, head, a score
    column per method, exact patching effect and its normalised value for heads); edges: the top
    edges per method (method, upstream, downstream, score) or None; curve: ``faithfulness_curve``'s
    rows (node level), edge_curve: ``edge_faithfulness_curve``'s (edge level, where edges were
    scored); summary: CPR / CMD per method and level; agreement: Spearman rho of each method vs exact patching;
    circuit: the nodes of the circuit drawn in the graph figure."""

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


def edge_level_ok(model: Any) -> str:
    """'' if edge attribution applies to ``model``, else why not (post-norm: a writer's contribution
    to a reader's input is not additive once a norm sits between them)."""
    cfg = getattr(model, "cfg", None)
    if getattr(cfg, "norm_placement", "pre") == "post":
        return "the model is post-norm (a norm after each residual sum): edge contributions are not additive"
    if not view(model).causal:
        return "edge attribution is for causal models here"
    return ""


def role_labels(labels: pd.DataFrame | None, task: str) -> pd.DataFrame | None:
    """The rows of a heads table for the task's pattern roles (``TASK_ROLES``): layer, head, label
    (bool), score; None when there are none."""
    if labels is None or not len(labels):
        return None
    rows = labels[labels["role"].astype(str).isin(TASK_ROLES[task])].copy()
    if not len(rows):
        return None
    rows["label"] = rows["label"].astype(str).str.lower().isin(("true", "1", "1.0"))
    rows["score"] = pd.to_numeric(rows.get("score", 0.0), errors="coerce").fillna(0.0)
    return rows[["layer", "head", "role", "label", "score"]].astype({"layer": int, "head": int})


def _metric(logits: Any, batch: Any) -> Any:
    return logit_diff(logits, as_batch(batch))


def _node_scores(
    model: Any, pairs: PairBatch, method: str, steps: int, batch_size: int, progress: bool = False
) -> pd.Series:
    from analyses.circuits.attribution import node_scores

    table = node_scores(
        model, to_pairs(pairs), _metric, method=method, steps=steps, batch_size=batch_size, progress=progress
    )
    return scores_to_series(table)


def _edge_scores(
    model: Any, pairs: PairBatch, method: str, steps: int, batch_size: int, progress: bool = False
) -> pd.DataFrame:
    from analyses.circuits.edges import edge_scores

    table = edge_scores(
        model, to_pairs(pairs), _metric, method=method, steps=steps, batch_size=batch_size, progress=progress
    )
    return table.assign(method=method)


def _top_edges(table: pd.DataFrame, top: int) -> pd.DataFrame:
    table = table.reindex(table["score"].abs().sort_values(ascending=False).index).head(top)
    return table[["method", "upstream", "downstream", "score"]]


def _nodes_table(model: Any, scores: dict[str, pd.Series], exact: pd.DataFrame | None) -> pd.DataFrame:
    from analyses.circuits.faithfulness import all_nodes, parse_node

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


def analyse_circuit(
    model: Any,
    task: str,
    n: int = 240,
    seed: int = 0,
    methods: Sequence[str] = METHODS,
    steps: int = 5,
    edges: bool = True,
    n_top_edges: int = 200,
    labels: pd.DataFrame | None = None,
    n_random: int = 10,
    proportions: Sequence[float] = MIB_PROPORTIONS,
    batch_size: int = 16,
    exact: bool = True,
    exact_pairs: int | None = 32,
    edge_curve: bool = True,
    all_tasks: bool = True,
    progress: bool = False,
    **task_kw: Any,
) -> CircuitResult:
    """The whole analysis of one task on one model (see the module docstring). ``all_tasks``: measure
    the model's accuracy on every task (the table says which it does not solve); the analysis runs on
    ``task`` only, and only if the model solves it. ``labels``: a heads table (``interp probe``'s
    heads.csv, or ``pattern_labels``) for the pattern-label baseline."""
    check_task(task)
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"unknown attribution method {m!r}; use {', '.join(METHODS)}")
    v = view(model)
    if not v.lm_head:
        raise ValueError(
            f"{v.name} has no LM head: the circuits' metric is a logit difference of next-token predictions "
            "(all-MiniLM-L6-v2 ships without its masked-LM head)"
        )
    t0, info = time.perf_counter(), dict(model=v.name, task=task, n=n, seed=seed, steps=steps, methods=list(methods))
    tasks, built = task_accuracy(model, TASKS if all_tasks else (task,), n=n, seed=seed, **task_kw)
    info["t_tasks"] = time.perf_counter() - t0
    ct = built[task]
    result = CircuitResult(v.name, ct, tasks, info=info)
    if not ct.solved:
        return result
    discovery, evaluation = ct.discovery, ct.evaluation
    scores: dict[str, pd.Series] = {}
    for m in methods:
        t = time.perf_counter()
        scores[m] = _node_scores(model, discovery, m, steps, batch_size, progress)
        info[f"t_nodes_{m}"] = time.perf_counter() - t
    exact_df = None
    if exact:
        t = time.perf_counter()
        sub = discovery if exact_pairs is None else discovery[slice(0, exact_pairs)]
        info["exact_pairs"] = len(sub)
        exact_df = exact_head_effects(model, sub, batch_size=batch_size, progress=progress)
        info["t_exact"] = time.perf_counter() - t
        result.agreement = pd.DataFrame(
            [
                dict(method=m, **dict(zip(("spearman_rho", "p_value", "n_heads"), rank_agreement(s, exact_df))))
                for m, s in scores.items()
            ]
        )
    result.nodes = _nodes_table(model, scores, exact_df)
    why = edge_level_ok(model) if edges else "not asked for (node level only)"
    info["edges"] = why or "scored"
    if not why:
        t = time.perf_counter()
        result.edge_tables = {m: _edge_scores(model, discovery, m, steps, batch_size, progress) for m in methods}
        result.edges = pd.concat([_top_edges(tab, n_top_edges) for tab in result.edge_tables.values()])
        info["t_edges"] = time.perf_counter() - t
    t = time.perf_counter()
    result.curve = faithfulness_curve(
        model, evaluation, scores, proportions=proportions, n_random=n_random,
        labels=role_labels(labels, task), seed=seed, batch_size=batch_size, progress=progress,
    )  # fmt: skip
    info["t_curve"] = time.perf_counter() - t
    result.summary = summarise_curve(result.curve).assign(level="node")
    if result.edges is not None and edge_curve:
        t = time.perf_counter()
        result.edge_curve = edge_faithfulness_curve(
            model, evaluation, result.edge_tables, proportions=proportions, n_random=n_random, seed=seed,
            batch_size=batch_size, progress=progress, greedy=True,
        )  # fmt: skip
        info["t_edge_curve"] = time.perf_counter() - t
        result.summary = pd.concat([result.summary, summarise_curve(result.edge_curve).assign(level="edge")])
    result.circuit = _top_circuit(result.curve, scores)
    info["t_total"] = time.perf_counter() - t0
    return result
