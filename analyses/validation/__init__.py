"""Causal validation of head labels (``interp validate``): ``run`` (prompts, metrics, the
ablation sweep against a null of random heads, verdicts) and ``report`` (validation.csv / .md)."""

from analyses.validation.run import (
    COLUMNS,
    VERDICTS,
    PromptSet,
    Task,
    ValidationResult,
    build_prompts,
    decide,
    empirical_p,
    fit_probe,
    metric_functions,
    pattern_labels,
    planted_model,
    planted_prompts,
    role_metric,
    validate,
)

__all__ = [
    "VERDICTS",
    "COLUMNS",
    "Task",
    "PromptSet",
    "build_prompts",
    "role_metric",
    "fit_probe",
    "metric_functions",
    "empirical_p",
    "decide",
    "validate",
    "ValidationResult",
    "planted_model",
    "planted_prompts",
    "pattern_labels",
]
