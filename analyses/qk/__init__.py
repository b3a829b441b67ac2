"""QK attribution (issue 37): why a head attends where it does. ``attribution`` splits one head's
pre-softmax score into (query-side component) x (key-side component) terms of the residual stream,
exactly, with the norms' scales frozen (``qk_attribution``, ``qk_attributions``, ``frozen_scale_checks``);
``run`` reads it on a task's solved prompts (the causal side's rows and targets) with intervals over
prompts; ``report`` writes the output set; ``planted`` builds a model with a planted K- and
Q-composition. The package's face is the house contract (``analyses.contract``): ``run``,
``OUTPUTS``, ``write``; ``interp qk`` is the command; docs/qk.md the story."""

from analyses.qk.attribution import (
    BIAS,
    POS,
    QKAttribution,
    components_of,
    frozen_scale_check,
    frozen_scale_checks,
    qk_attribution,
    qk_attributions,
    refusal,
)
from analyses.qk.report import OUTPUTS, qk_figure, write
from analyses.qk.run import OTHER, QK_TASKS, QKResult, parse_heads, run, task_positions

__all__ = [
    "run",
    "OUTPUTS",
    "write",
    "QKResult",
    "QKAttribution",
    "qk_attribution",
    "qk_attributions",
    "frozen_scale_check",
    "frozen_scale_checks",
    "components_of",
    "refusal",
    "parse_heads",
    "task_positions",
    "qk_figure",
    "QK_TASKS",
    "OTHER",
    "BIAS",
    "POS",
]
