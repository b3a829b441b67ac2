"""Invariance checks on real weights (``interp invariance``), on the analyses' one contract
(``analyses.contract``): ``run(model, ...) -> InvarianceResult`` (in ``runner``) measures
everything, ``write(result, folder)`` writes the files of ``OUTPUTS`` as one output set and
``invariance_section`` (in ``report``) is the summary page's section. The checks live in
``permutation``, ``rotation``, ``conditioning``, ``interpretation``, ``position`` and ``scale``, on
the shared tolerances and helpers of ``common``. ``run_all`` and ``write_report`` are the old names
of ``run`` and ``write`` (deprecated).
"""

from analyses.invariance.common import ROW_COLUMNS, make_row, random_orthogonal, relerr
from analyses.invariance.report import OUTPUTS, SECTION_INTRO, figures, invariance_section, write, write_report
from analyses.invariance.runner import InvarianceResult, refusal, run, run_all

__all__ = [
    "InvarianceResult",
    "run",
    "refusal",
    "OUTPUTS",
    "write",
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
