"""The circuits' tasks: contrastive prompt pairs from the validation prompt generator
(``analyses.validation.prompts.contrastive_pairs``: one generator, two users), kept only where the
model shows the behaviour.

For each task the model's accuracy is measured first on every generated pair (clean logit
difference right - wrong > 0, the generator's ``solved``); a task counts as solved when that
accuracy is at least ``MIN_ACCURACY`` and at least ``MIN_PAIRS`` pairs are solved. Circuits are
found on the solved pairs outside the generator's held-out split and evaluated (faithfulness) on the
solved held-out pairs. ``task_accuracy`` is the table of all tasks, saying which the model does not
solve.

``TASK_ROLES``: the head report's roles whose pattern labels are the baseline circuit of a task
(subject-verb agreement: ``subject_verb`` heads; pronoun gender: ``anaphora``; IOI: the probe's
``ioi`` heads (final token -> indirect object, predictive) and duplicate-token and induction heads, two
classes of Wang et al. 2022's circuit; induction: ``induction``). A relation read both ways is taken
in its predictive reading on a causal model where the heads table has it (``run.role_labels``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from analyses.tasks import TASKS, check_task
from interp.pairs import Pairs, logit_diff

__all__ = [
    "TASKS",
    "TASK_ROLES",
    "MIN_PAIRS",
    "MIN_ACCURACY",
    "CircuitTask",
    "check_task",
    "check_thresholds",
    "circuit_task",
    "task_accuracy",
    "clean_logit_diff",
]

TASK_ROLES = {
    "subject_verb": ("subject_verb",),
    "pronoun_gender": ("anaphora",),
    "ioi": ("ioi", "duplicate_token", "induction"),
    "induction": ("induction",),
}
MIN_PAIRS = 100
MIN_ACCURACY = 0.7  # a two-way choice: chance is 0.5; below 0.7 the "behaviour" is mostly noise


@dataclass
class CircuitTask:
    """One task's pairs on one model.

    pairs: the solved pairs (clean logit difference > 0); held_out: a bool per solved pair, True
    for the faithfulness evaluation (the generator's ``Pairs.held_out``). n_generated / accuracy:
    every generated pair and the share of them the model solves."""

    name: str
    pairs: Pairs
    held_out: np.ndarray
    n_generated: int
    accuracy: float
    min_accuracy: float = MIN_ACCURACY
    min_pairs: int = MIN_PAIRS

    @property
    def discovery(self) -> Pairs:
        """The pairs that scores (attribution, exact patching) are computed on."""
        return self.pairs[torch.as_tensor(np.flatnonzero(~self.held_out))]

    @property
    def evaluation(self) -> Pairs:
        """The held-out pairs that faithfulness is measured on."""
        return self.pairs[torch.as_tensor(np.flatnonzero(self.held_out))]

    @property
    def solved(self) -> bool:
        return self.accuracy >= self.min_accuracy and len(self.pairs) >= self.min_pairs

    def why_not(self) -> str:
        """'' for a solved task, else a sentence saying why it is not."""
        if self.accuracy < self.min_accuracy:
            return (
                f"the model solves {self.accuracy:.0%} of {self.n_generated} pairs "
                f"(below {self.min_accuracy:.0%}): it does not show the behaviour"
            )
        if len(self.pairs) < self.min_pairs:
            return f"only {len(self.pairs)} pairs solved (need {self.min_pairs}); generate more with a larger n"
        return ""

    def row(self) -> dict:
        return dict(
            task=self.name,
            n_generated=self.n_generated,
            accuracy=self.accuracy,
            n_solved=len(self.pairs),
            n_discovery=int((~self.held_out).sum()),
            n_held_out=int(self.held_out.sum()),
            solved=self.solved,
            note=self.why_not(),
        )


def _held_out(pairs: Pairs, seed: int) -> np.ndarray:
    """The generator's held-out flag (``Pairs.held_out``), or (pairs without one) a seeded half."""
    n = len(pairs)
    if pairs.held_out is not None:
        return pairs.held_out.numpy().astype(bool)
    rng = np.random.default_rng(seed)
    flag = np.zeros(n, dtype=bool)
    flag[rng.permutation(n)[: n // 2]] = True
    return flag


@torch.no_grad()
def clean_logit_diff(model: Any, pairs: Pairs, batch_size: int = 64) -> np.ndarray:
    """[n] logit(right) - logit(wrong) on each clean prompt (the answer position alone unembedded
    on the toolkit's model: ``runner.pairs_metric``)."""
    from analyses.circuits.runner import pairs_metric

    out = []
    for batch in pairs.batches(batch_size):
        out.append(pairs_metric(model, batch.clean, batch, logit_diff, batch.attention_mask).cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def _generate(task: str, tokenizer: Any, n: int, seed: int) -> Pairs:
    from analyses.validation.prompts import contrastive_pairs

    return contrastive_pairs(task, tokenizer, n=n, seed=seed)


def check_thresholds(min_accuracy: float = MIN_ACCURACY, min_pairs: int = MIN_PAIRS) -> None:
    """Refuse, in one line, a ``min_accuracy`` outside [0, 1] or a ``min_pairs`` below 1 (a task
    that needs 2 accuracy or -3 pairs is no threshold at all)."""
    if isinstance(min_accuracy, bool) or not isinstance(min_accuracy, (int, float)) or not 0 <= min_accuracy <= 1:
        raise ValueError(f"min_accuracy={min_accuracy!r}: give a share in [0, 1] (default {MIN_ACCURACY})")
    if isinstance(min_pairs, bool) or not isinstance(min_pairs, (int, np.integer)) or min_pairs < 1:
        raise ValueError(f"min_pairs={min_pairs!r}: give a whole number of solved pairs >= 1 (default {MIN_PAIRS})")


def circuit_task(
    model: Any,
    task: str,
    n: int = 240,
    seed: int = 0,
    min_accuracy: float = MIN_ACCURACY,
    min_pairs: int = MIN_PAIRS,
    generator: Any = None,
) -> CircuitTask:
    """``n`` generated pairs of ``task`` for ``model`` (its tokenizer), the model's accuracy on them,
    and the solved ones with their held-out flags. ``generator(task, tokenizer, n, seed)`` stands in
    for ``contrastive_pairs`` (tests)."""
    check_task(task)
    check_thresholds(min_accuracy, min_pairs)
    if n < 2:
        raise ValueError(f"n={n} pairs is too few; a task needs pairs to find and to evaluate circuits on")
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("circuit tasks need a model with a tokenizer attached (the pairs are text)")
    batch = (generator or _generate)(task, tokenizer, n, seed)
    if not isinstance(batch, Pairs):
        raise TypeError(
            f"the pair generator must return interp.pairs.Pairs (a PairSet is one), got {type(batch).__name__}"
        )
    held = _held_out(batch, seed)
    diff = clean_logit_diff(model, batch)
    ok = diff > 0
    keep = torch.as_tensor(np.flatnonzero(ok))
    return CircuitTask(
        task,
        batch[keep],
        held[ok],
        n_generated=len(batch),
        accuracy=float(ok.mean()) if len(ok) else 0.0,
        min_accuracy=min_accuracy,
        min_pairs=min_pairs,
    )


def task_accuracy(
    model: Any, tasks: tuple[str, ...] = TASKS, n: int = 240, seed: int = 0, generator: Any = None, **kw: Any
) -> tuple[pd.DataFrame, dict[str, CircuitTask]]:
    """Every task's accuracy table (task, n_generated, accuracy, n_solved, n_discovery, n_held_out,
    solved, note) and the ``CircuitTask`` objects by name."""
    built = {t: circuit_task(model, t, n=n, seed=seed, generator=generator, **kw) for t in tasks}
    return pd.DataFrame([t.row() for t in built.values()]), built
