"""Causal validation of head labels (``interp validate``), in its rooms: ``prompts`` (seeded prompt
sets) -> ``metrics`` (behaviour scores, the role -> metric table) -> ``verdicts`` (null, BH per role,
the decision rule) -> ``runner`` (``run``) -> ``report`` (``write``: validation.csv / .md / .json);
``labels`` reads and checks a labels table (or reads labels off attention patterns), ``planted`` is
a hand-set model for tests; ``powered`` is the powered run (``run_powered``: many prompts the model
solves, layer-matched nulls, group ablations; ``write_powered``) and ``prompts.contrastive_pairs``
the pairs the circuits work shares; ``job`` is what ``interp validate`` runs from a model's name.
The public names are re-exported here.

The analyses' one contract (``analyses.contract``), with two output sets:

>>> result = validation.run(model, labels)           # ValidationResult: .table, .heads, .info
>>> validation.write(result, "out/minilm/validation")  # the files of OUTPUTS
>>> powered = validation.run_powered(lm, labels)     # PoweredResult (causal LMs)
>>> validation.write_powered(powered, "out/smollm2/powered")  # the files of POWERED_OUTPUTS

``validate``, ``validate_powered`` and ``write_outputs`` are the old names (deprecated)."""

from analyses.validation.job import run_named, run_powered_named
from analyses.validation.labels import (
    LABEL_COLUMNS,
    check_labels,
    check_labels_model,
    pattern_labels,
    read_labels,
    role_names,
)
from analyses.validation.metrics import (
    OTHER_ROLE,
    REL_MIN_EFFECT,
    ROLE_METRICS,
    fit_probe,
    metric_functions,
    role_metric,
)
from analyses.validation.planted import planted_copies, planted_model
from analyses.validation.powered import (
    POWERED_METRICS,
    SINK_ROLES,
    PoweredResult,
    powered_prompts,
    run_powered,
    validate_powered,
)
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
from analyses.validation.report import OUTPUTS, POWERED_OUTPUTS, write, write_outputs, write_powered
from analyses.validation.runner import ValidationResult, run, validate
from analyses.validation.verdicts import (
    COLUMNS,
    NO_METRIC,
    OLD_VERDICTS,
    UNDER_POWERED,
    VERDICTS,
    check_settings,
    decide,
    empirical_p,
    p_floor,
    p_floor_problem,
    verdict_table,
)

__all__ = [
    "run",
    "ValidationResult",
    "OUTPUTS",
    "write",
    "run_powered",
    "PoweredResult",
    "POWERED_OUTPUTS",
    "write_powered",
    "run_named",
    "run_powered_named",
    "VERDICTS",
    "UNDER_POWERED",
    "OLD_VERDICTS",
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
    "p_floor",
    "p_floor_problem",
    "check_settings",
    "decide",
    "verdict_table",
    "validate",
    "write_outputs",
    "planted_model",
    "planted_copies",
    "POWERED_METRICS",
    "SINK_ROLES",
    "powered_prompts",
    "validate_powered",
    "pattern_labels",
    "LABEL_COLUMNS",
    "read_labels",
    "check_labels",
    "check_labels_model",
    "role_names",
]
