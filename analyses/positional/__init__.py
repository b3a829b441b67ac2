"""The positional-encoding study: one small model per scheme, trained on the same data, compared
(``study``; run it with ``python -m analyses.positional``)."""

from analyses.positional.study import (
    BUDGETS,
    SCHEMES,
    Budget,
    StudyResult,
    get_budget,
    head_scores,
    heldout_data,
    load_scheme,
    loss_by_position,
    measure,
    prepare_data,
    repeated_sequence_scores,
    repeated_tokens,
    run_study,
    shift_invariance,
    shuffled_loss,
    train_scheme,
)

__all__ = [
    "BUDGETS",
    "SCHEMES",
    "Budget",
    "StudyResult",
    "get_budget",
    "head_scores",
    "heldout_data",
    "load_scheme",
    "loss_by_position",
    "measure",
    "prepare_data",
    "repeated_sequence_scores",
    "repeated_tokens",
    "run_study",
    "shift_invariance",
    "shuffled_loss",
    "train_scheme",
]
