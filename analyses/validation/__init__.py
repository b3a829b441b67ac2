"""Causal validation of head labels (``interp validate``): ``run`` (prompts, metrics, the
ablation sweep against a null of random heads, verdicts) and ``report`` (validation.csv / .md).
Every public name of ``run`` is importable from here."""

from analyses.validation.run import *  # noqa: F403
