"""What the positional study's report modules share: the spread of a few seeds, the scalar columns
of the runs' results, and figure plumbing (``report`` for the synthetic claims, ``text_report``
for natural text)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from interp.io import atomic_save


def spread(values: Sequence[float], digits: int = 2) -> str:
    """ "mean [min, max]" over the finite values; "n/a" when there are none; one value alone."""
    v = np.array([x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))], dtype=float)
    if v.size == 0:
        return "n/a"
    if v.size == 1 or np.ptp(v) == 0:
        return f"{v.mean():.{digits}f}"
    return f"{v.mean():.{digits}f} [{v.min():.{digits}f}, {v.max():.{digits}f}]"


def scalars(results: list[dict]) -> pd.DataFrame:
    """One row per result, its scalar entries only (curves, histories and tables left out)."""
    return pd.DataFrame([{k: v for k, v in r.items() if not isinstance(v, (list, dict))} for r in results])


def nan_if_none(x):
    """A stored result's None (JSON has no NaN) read back as NaN."""
    return np.nan if x is None else x


def pyplot():
    """(matplotlib.pyplot, seaborn) on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    return plt, sns


def save_figure(fig, path: Path) -> Path:
    atomic_save(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    return path
