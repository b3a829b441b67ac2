"""Head roles (``interp probe``): ``roles`` (names and table columns), ``scoring`` (scorers on
tensors), ``probe`` (the probe over a dataset, with statistics), ``report`` (heads.csv, report.md,
report.html, figures).

>>> import models
>>> from analyses import heads
>>> df = heads.probe_heads(models.load("minilm"), n=200, seed=0)
"""

from analyses.heads.probe import (
    EXAMPLES,
    Adapter,
    adapt,
    example_patterns,
    head_summary,
    probe_heads,
    probe_items,
    top_head,
)
from analyses.heads.roles import COLUMNS, LINGUISTIC_ROLES, RELATIONS, ROLES, SET_ROLES
from analyses.heads.scoring import relation_scores, tl_detection_score, token_role_scores

__all__ = [
    "ROLES",
    "LINGUISTIC_ROLES",
    "RELATIONS",
    "SET_ROLES",
    "COLUMNS",
    "Adapter",
    "adapt",
    "probe_heads",
    "probe_items",
    "head_summary",
    "example_patterns",
    "top_head",
    "token_role_scores",
    "relation_scores",
    "tl_detection_score",
    "EXAMPLES",
]
