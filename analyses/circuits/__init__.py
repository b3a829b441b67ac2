"""Circuit discovery (issue 22), in its rooms: ``pairs`` (clean/corrupted prompt pairs, the
logit-difference metric) -> ``attribution`` (node scores: EAP, EAP-IG, on our model or a
TransformerBridge) -> ``edges`` (edge scores between every writer and reader, grouped-query
attention native) -> ``patching`` (run a circuit: exact edge or node patching from the corrupted
run, the gap it recovers). The public names are re-exported here."""

from analyses.circuits.attribution import METHODS, head_name, mlp_name, node_scores
from analyses.circuits.edges import EDGE_COLUMNS, EdgeGraph, edge_graph, edge_scores
from analyses.circuits.pairs import Metric, Pairs, logit_diff
from analyses.circuits.patching import circuit_metric, clean_and_corrupted, gap_recovered, patch_edges, patch_nodes

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
]
