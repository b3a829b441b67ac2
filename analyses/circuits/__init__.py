"""Circuit discovery (issue 22), in its rooms: ``pairs`` (clean/corrupted prompt pairs, the
logit-difference metric) -> ``attribution`` (node scores: EAP, EAP-IG, on our model or a
TransformerBridge) -> ``edges`` (edge scores between every writer and reader, grouped-query
attention native) -> ``patching`` (run a circuit: exact edge or node patching from the corrupted
run, the gap it recovers) -> ``tasks`` (the validation generator's pairs the model solves) ->
``faithfulness`` (circuits by size, MIB's CPR / CMD, random and pattern-label baselines, exact
per-head patching) -> ``run`` (``analyse_circuit``) -> ``report`` (csv, md, ``figures``). The public
names are re-exported here."""

from analyses.circuits.attribution import METHODS, head_name, mlp_name, node_scores
from analyses.circuits.edges import EDGE_COLUMNS, EdgeGraph, edge_graph, edge_scores
from analyses.circuits.faithfulness import (
    MIB_PROPORTIONS,
    PairBatch,
    circuit_metrics,
    cmd,
    cpr,
    edge_faithfulness_curve,
    exact_head_effects,
    faithfulness_curve,
    rank_agreement,
    summarise_curve,
)
from analyses.circuits.pairs import Metric, Pairs, logit_diff
from analyses.circuits.patching import circuit_metric, clean_and_corrupted, gap_recovered, patch_edges, patch_nodes
from analyses.circuits.report import page_circuits, write_outputs
from analyses.circuits.run import CircuitResult, analyse_circuit
from analyses.circuits.tasks import TASK_ROLES, TASKS, CircuitTask, circuit_task, task_accuracy

__all__ = [
    "Pairs",
    "Metric",
    "logit_diff",
    "METHODS",
    "node_scores",
    "head_name",
    "mlp_name",
    "EDGE_COLUMNS",
    "EdgeGraph",
    "edge_graph",
    "edge_scores",
    "patch_edges",
    "patch_nodes",
    "circuit_metric",
    "clean_and_corrupted",
    "gap_recovered",
    "TASKS",
    "TASK_ROLES",
    "CircuitTask",
    "circuit_task",
    "task_accuracy",
    "MIB_PROPORTIONS",
    "PairBatch",
    "circuit_metrics",
    "cpr",
    "cmd",
    "faithfulness_curve",
    "edge_faithfulness_curve",
    "summarise_curve",
    "exact_head_effects",
    "rank_agreement",
    "CircuitResult",
    "analyse_circuit",
    "write_outputs",
    "page_circuits",
]
