"""The positional-encoding study (run it with ``interp positional``, or ``python -m analyses.positional``).

Its face in the analyses' contract (``result``): ``run(budget, ...) -> PositionalResult`` (every run's
result; the budget, not a model: the study trains its own), ``OUTPUTS`` and ``write(result, folder)``.

- ``tasks``: synthetic tasks, one claim each (order, copy k back, induction) and planted models;
- ``synthetic``: train and measure one model on one task (resumable);
- ``formation``: the induction runs' head scores on their own sequences, the route they copy by,
  the abruptness of a rise, retrieval at a controlled distance;
- ``study``: the natural-text models (BoolQ passages) and their measurements;
- ``runs``: the whole study as independent, resumable runs (``--jobs`` processes); its budgets are
  the one registry of budgets by name (``study_budget``);
- ``text_stats``: the bootstrap over seeds and windows (crossed; paired across schemes) behind the
  natural-text intervals;
- ``anchor``: SmolLM2's held-out loss from the passage start, aligned by character onto the study's
  own token axes, beside the study's models;
- ``report``: one table and one figure per claim, the claims table; ``text_report``: the natural-text
  tables, criteria and figures; ``common``: what the two share.
"""

from analyses.positional.report import claims_table, fill_doc, write_report
from analyses.positional.result import OUTPUTS, PositionalResult, run, write
from analyses.positional.runs import STUDY_BUDGETS, Run, StudyBudget, execute, plan, run_all, study_budget
from analyses.positional.study import (
    BUDGETS,
    SCHEMES,
    Budget,
    head_scores,
    heldout_data,
    load_scheme,
    loss_by_position,
    measure,
    measure_text,
    per_window,
    prepare_data,
    repeated_sequence_scores,
    repeated_tokens,
    shift_invariance,
    shuffled_loss,
    text_run,
    train_scheme,
    window_losses,
)
from analyses.positional.synthetic import TaskSpec, train_task
from analyses.positional.tasks import CopyBackTask, InductionTask, OrderTask

__all__ = [
    "BUDGETS",
    "OUTPUTS",
    "SCHEMES",
    "STUDY_BUDGETS",
    "Budget",
    "CopyBackTask",
    "InductionTask",
    "OrderTask",
    "PositionalResult",
    "Run",
    "StudyBudget",
    "TaskSpec",
    "claims_table",
    "execute",
    "fill_doc",
    "head_scores",
    "heldout_data",
    "load_scheme",
    "loss_by_position",
    "measure",
    "measure_text",
    "per_window",
    "plan",
    "prepare_data",
    "repeated_sequence_scores",
    "repeated_tokens",
    "run",
    "run_all",
    "shift_invariance",
    "shuffled_loss",
    "study_budget",
    "text_run",
    "train_scheme",
    "train_task",
    "window_losses",
    "write",
    "write_report",
]
