"""Invariance checks on real weights (``interp invariance``).

``run_all`` (in ``run``) measures everything; ``write_report`` / ``invariance_section`` (in
``report``) write it up. The checks live in ``permutation``, ``rotation``, ``position`` and
``scale``, on the shared tolerances and helpers of ``common``.
"""

from analyses.invariance.common import ROW_COLUMNS, make_row, random_orthogonal, relerr
from analyses.invariance.report import SECTION_INTRO, figures, invariance_section, write_report
from analyses.invariance.run import InvarianceResult, run_all

__all__ = [
    "InvarianceResult",
    "run_all",
    "invariance_section",
    "write_report",
    "figures",
    "SECTION_INTRO",
    "ROW_COLUMNS",
    "random_orthogonal",
    "relerr",
    "make_row",
]
