"""Causal validation of head labels (``interp validate``), in its rooms: ``prompts`` (seeded prompt
sets) -> ``metrics`` (behaviour scores, the role -> metric table) -> ``verdicts`` (null, BH per role,
the decision rule) -> ``run`` (``validate``) -> ``report`` (validation.csv / .md); ``labels`` reads
and checks a labels table (or reads labels off attention patterns), ``planted`` is a hand-set model
for tests; ``powered`` is the powered run (many prompts the model solves, layer-matched nulls,
group ablations) and ``prompts.contrastive_pairs`` the pairs the circuits work shares. The public
names are re-exported here."""

from analyses.validation.labels import LABEL_COLUMNS, check_labels, check_labels_model, pattern_labels, read_labels
from analyses.validation.metrics import (
    OTHER_ROLE,
    REL_MIN_EFFECT,
    ROLE_METRICS,
    fit_probe,
    metric_functions,
    role_metric,
)
from analyses.validation.planted import planted_copies, planted_model
from analyses.validation.powered import POWERED_METRICS, SINK_ROLES, PoweredResult, powered_prompts, validate_powered
from analyses.validation.prompts import (
    PAIR_TASKS,
    PairSet,
    PromptSet,
    Task,
    build_prompts,
    contrastive_pairs,
    pair_logit_diff,
    planted_prompts,
    solved,
)
from analyses.validation.run import ValidationResult, validate
from analyses.validation.verdicts import COLUMNS, NO_METRIC, VERDICTS, decide, empirical_p, verdict_table

__all__ = [
    "VERDICTS",
    "COLUMNS",
    "NO_METRIC",
    "Task",
    "PromptSet",
    "build_prompts",
    "planted_prompts",
    "PAIR_TASKS",
    "PairSet",
    "contrastive_pairs",
    "pair_logit_diff",
    "solved",
    "ROLE_METRICS",
    "OTHER_ROLE",
    "REL_MIN_EFFECT",
    "role_metric",
    "fit_probe",
    "metric_functions",
    "empirical_p",
    "decide",
    "verdict_table",
    "validate",
    "ValidationResult",
    "planted_model",
    "planted_copies",
    "POWERED_METRICS",
    "SINK_ROLES",
    "PoweredResult",
    "powered_prompts",
    "validate_powered",
    "pattern_labels",
    "LABEL_COLUMNS",
    "read_labels",
    "check_labels",
    "check_labels_model",
]
