"""The positional study's face in the analyses' contract (``analyses.contract``): ``run(budget, ...)
-> PositionalResult``, ``OUTPUTS`` and ``write(result, folder)``.

The study trains its own models, so ``run`` takes a budget (``StudyBudget`` or its name, the training
configs of every run) rather than a model; its identity in ``info`` is ``positional-<budget>``.

>>> result = run("quick", work="out/positional-quick")
>>> write(result, "reports/positional")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analyses.contract import make_info
from analyses.positional.common import scalars
from analyses.positional.runs import KINDS, StudyBudget, plan, run_all, study_budget
from analyses.positional.study import SCHEMES
from interp.io import write_set

__all__ = ["OUTPUTS", "PositionalResult", "run", "write"]

# every file ``report.write_report`` can write (a study of some kinds writes some of them; the set
# replaces all of them, so no table of an earlier, larger study is left beside a smaller one's claims)
OUTPUTS = (
    "runs.csv",
    "claims.md",
    "cpu.md",
    "order.md",
    "order.png",
    "extrapolation.md",
    "extrapolation.png",
    "distance.md",
    "induction.md",
    "induction.png",
    "induction_abruptness.md",
    "long_range.md",
    "anchor.md",
    "anchor.png",
    "text.md",
    "text_criteria.md",
    "text_paired.md",
    "text_gain_by_size.md",
    "text_estimates.csv",
    "loss_in_context_stream.png",
    "loss_in_context_passage.png",
    "loss_by_position.csv",
    "loss_by_position.png",
    "heads.csv",
    "heads.png",
)


@dataclass
class PositionalResult:
    """Every run's stored result (``results``, in ``plan`` order: one dict per trained model, see
    ``runs``), the budget they were run under, and ``info`` (the budget's name as the model identity,
    the kinds, schemes and seeds as parameters; ``seed`` is None: each kind has its seeds)."""

    results: list[dict]
    budget: StudyBudget
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def runs(self) -> pd.DataFrame:
        """One row per run, its scalar results (``runs.csv``)."""
        return scalars(self.results)

    @property
    def claims(self) -> pd.DataFrame:
        """The claims table (``claims.md``): computed when asked (the natural-text claim bootstraps)."""
        from analyses.positional.report import claims_table

        return claims_table(self.results)


def run(
    budget: str | StudyBudget,
    work: str | Path | None = None,
    checkpoints: str | Path | None = None,
    kinds: Sequence[str] = KINDS,
    schemes: Sequence[str] = SCHEMES,
    jobs: int = 1,
    progress: bool = True,
) -> PositionalResult:
    """The study under ``budget``: every planned run not yet done in ``work`` (default
    ``out/positional-<budget>``) executed (``runs.run_all``: ``jobs`` processes), all results
    returned. Finished runs are read back, not repeated."""
    b = study_budget(budget)
    kinds, schemes = list(kinds), list(schemes)
    planned = plan(b, kinds, schemes)  # a wrong kind or scheme fails here, before any work
    results = run_all(b, Path(work or f"out/positional-{b.name}"), checkpoints, kinds, schemes, jobs, progress)
    seeds = {k: list(b.seeds_for(k)) for k in dict.fromkeys(r.kind for r in planned)}
    params = dict(budget=b.name, kinds=kinds, schemes=schemes, seeds=seeds)
    info = make_info("positional", f"positional-{b.name}", None, **params)
    return PositionalResult(results, b, info)


def write(result: PositionalResult, folder: str | Path, force: bool = False) -> Path:
    """The study's tables and figures (``report.write_report``) as one output set in ``folder``."""
    from analyses.positional.report import write_report

    def files(tmp: Path) -> None:
        write_report(result.results, tmp, copy_train_len=result.budget.copy_back.task.length)

    return write_set(folder, OUTPUTS, files, command="interp positional", force=force)
