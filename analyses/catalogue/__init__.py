"""The head catalogue: one verdict per head and task, where what a head attends to (the probe's
labels) and what it does (patching on the tasks the model solves) are joined. ``run`` ->
``CatalogueResult``; ``write`` -> ``OUTPUTS``; the rule in ``verdicts``; docs/catalogue.md. A planted
model whose verdicts are known, with its heads table and pairs: ``planted`` (notebook 04, the tests)."""

from analyses.catalogue.report import OUTPUTS, disagreements, markdown, read_catalogue, verdict_counts, write
from analyses.catalogue.run import COLUMNS, MIN_SOLVED, TASK_COLUMNS, CatalogueResult, pattern_side, run, t_interval
from analyses.catalogue.verdicts import (
    ALL_POSITION_ROLES,
    ELSEWHERE,
    ENCODER_TASKS,
    NO_TASK,
    ROLE_TASKS,
    STATES,
    VERDICTS,
    acts_elsewhere,
    causal_state,
    decide,
    tasks_of,
)

__all__ = [
    "OUTPUTS",
    "COLUMNS",
    "TASK_COLUMNS",
    "MIN_SOLVED",
    "CatalogueResult",
    "run",
    "write",
    "read_catalogue",
    "verdict_counts",
    "disagreements",
    "markdown",
    "pattern_side",
    "t_interval",
    "VERDICTS",
    "STATES",
    "ROLE_TASKS",
    "ENCODER_TASKS",
    "ALL_POSITION_ROLES",
    "ELSEWHERE",
    "acts_elsewhere",
    "NO_TASK",
    "causal_state",
    "decide",
    "tasks_of",
]
