"""Circuit discovery (issue 22), in its rooms: ``interp.pairs`` (the one ``Pairs`` type and the fp32
``logit_diff``, re-exported by ``pairs``) -> ``nodes`` (node names, parsing, rankings, random
circuits) -> ``attribution`` (node scores: EAP, EAP-IG, on our model or a TransformerBridge) ->
``edges`` (edge scores between every writer and reader, grouped-query attention native) ->
``runner`` (the one node-circuit runner: every node outside a circuit patched from the corrupted
run, per pair) and ``patching`` (edge circuits, the gap a circuit recovers) -> ``exact`` (exact
per-head patching, per pair) -> ``tasks`` (the validation generator's pairs the model solves) ->
``faithfulness`` (circuits by size, MIB's CPR / CMD, random and pattern-label baselines) -> ``run``
(``run``) -> ``report`` (``OUTPUTS``, ``write``; ``figures``). ``agreement`` is an analysis of its
own with the same face (``agreement.run``, ``agreement.OUTPUTS``, ``agreement.write``; ``interp
agreement``): the rank agreement of pattern scores and exact patching effects.

The package's face (``analyses.contract``): ``run(model, task, ...) -> CircuitResult`` (tables,
``info``, ``heads``: the per-head table), ``OUTPUTS`` and ``write(result, folder, force=False)``.
The public names are re-exported here; ``PairBatch``, ``as_batch``, ``to_pairs``,
``analyse_circuit`` and ``write_outputs`` are deprecated (they warn)."""

from analyses.circuits import agreement
from analyses.circuits.agreement import AgreementResult
from analyses.circuits.attribution import METHODS, node_scores
from analyses.circuits.edges import EDGE_COLUMNS, EdgeGraph, edge_graph, edge_refusal, edge_scores
from analyses.circuits.exact import ExactEffects, exact_head_effects, exact_patching, rank_agreement
from analyses.circuits.faithfulness import (
    MIB_PROPORTIONS,
    SMALL_P,
    bootstrap_summary,
    cmd,
    cpr,
    edge_faithfulness_curve,
    faithfulness_curve,
    log_area,
    pair_faithfulness,
    small_area,
    summarise_curve,
)
from analyses.circuits.nodes import (
    INPUT,
    all_nodes,
    head_name,
    mlp_name,
    node_name,
    parse_node,
    random_circuits,
    scores_to_series,
    top_nodes,
)
from analyses.circuits.pairs import Metric, PairBatch, Pairs, as_batch, logit_diff, to_pairs
from analyses.circuits.patching import circuit_metric, clean_and_corrupted, gap_recovered, patch_edges
from analyses.circuits.report import OUTPUTS, page_circuits, write, write_outputs
from analyses.circuits.run import CircuitResult, analyse_circuit, circuit_refusal, edge_level_ok, run
from analyses.circuits.runner import CircuitRuns, circuit_metrics, patch_nodes, run_circuits
from analyses.circuits.tasks import TASK_ROLES, TASKS, CircuitTask, check_task, circuit_task, task_accuracy

__all__ = [
    "run",
    "OUTPUTS",
    "write",
    "CircuitResult",
    "agreement",
    "AgreementResult",
    "Pairs",
    "Metric",
    "logit_diff",
    "INPUT",
    "head_name",
    "mlp_name",
    "node_name",
    "parse_node",
    "all_nodes",
    "scores_to_series",
    "top_nodes",
    "random_circuits",
    "METHODS",
    "node_scores",
    "EDGE_COLUMNS",
    "EdgeGraph",
    "edge_graph",
    "edge_scores",
    "edge_refusal",
    "edge_level_ok",
    "circuit_refusal",
    "run_circuits",
    "CircuitRuns",
    "circuit_metrics",
    "patch_nodes",
    "patch_edges",
    "circuit_metric",
    "clean_and_corrupted",
    "gap_recovered",
    "exact_patching",
    "ExactEffects",
    "exact_head_effects",
    "rank_agreement",
    "TASKS",
    "TASK_ROLES",
    "check_task",
    "CircuitTask",
    "circuit_task",
    "task_accuracy",
    "MIB_PROPORTIONS",
    "cpr",
    "cmd",
    "SMALL_P",
    "small_area",
    "log_area",
    "bootstrap_summary",
    "faithfulness_curve",
    "pair_faithfulness",
    "edge_faithfulness_curve",
    "summarise_curve",
    "page_circuits",
    "analyse_circuit",
    "write_outputs",
    "PairBatch",
    "as_batch",
    "to_pairs",
]
