"""Statistics for head labels: paired one-sided tests, bootstrap intervals, multiple comparisons.

The choice, and why
-------------------
* **Unit**: the sentence (or random token sequence). Scores of one sentence are correlated across
  its words, so resampling words would understate the uncertainty.
* **Test**: for every (head, role, direction) a paired one-sided test of the per-sentence difference
  ``d_i = score_i - baseline_i`` against ``H0: mean(d) <= margin``. The baseline is computed on the
  *same* sentence (best fixed offset, nearest candidate, uniform attention), so pairing removes the
  sentence-to-sentence variation both share. The margin (default 0.05) is a minimum effect size: with
  thousands of sentences any consistent deviation from a baseline, however tiny, is "significant",
  and a label should mean the head does the thing, not that it is a hair better than chance.
  The statistic is Student's t on the mean difference. The differences are bounded (accuracies and
  attention masses lie in [0, 1]), and the probe uses >= 100 sentences, so the t approximation is
  accurate; ``tests/analyses/test_stats.py`` checks its calibration by simulation. A bootstrap
  p-value was not used because Holm over ~1000 tests needs p-values near 1e-5, far below the
  resolution ``1/n_boot`` of any affordable bootstrap.
* **Multiple comparisons**: **Holm-Bonferroni** (``holm``), which the head probe applies within
  each family of label-carrying tests (one per role, and one per boundary role's norm-weighted
  rows: ``analyses.heads.probe``), not over every test of a model: the probability that one
  role's list holds *even one* false head is at most ``alpha`` (0.05), under any dependence between
  heads. The map as a whole is not controlled at ``alpha``: with F families, the chance of some
  false label anywhere is at most F x alpha (union bound; ~18 families, so the bound says little).
  A reader who needs the whole map at 5% runs the probe with ``alpha = 0.05 / F`` (the report states
  F). FWER rather than FDR because a label is a claim about one specific head that later tools act
  on (ablations, circuit work); Holm is uniformly more powerful than plain Bonferroni with the same
  guarantee. Benjamini-Hochberg is provided too (``bh``) for exploratory use.
* **Interval**: 95% percentile bootstrap over sentences (streaming Poisson bootstrap, see
  ``interp.reducers``). It is a per-head interval, reported beside the score; a label needs the
  Holm-adjusted p below alpha *and* the interval's lower end above the baseline (and above the score
  of the same head in a randomly initialised model).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as _st

__all__ = ["paired_p_value", "holm", "bh", "bootstrap_ci", "one_sided_p_from_sums"]


def one_sided_p_from_sums(
    n: ArrayLike, mean_diff: ArrayLike, sd_diff: ArrayLike, margin: ArrayLike = 0.0
) -> np.ndarray:
    """P-value of ``H0: mean(d) <= margin`` against ``mean(d) > margin`` from the sample size, the
    mean and the sample standard deviation (ddof=1) of paired differences; Student's t with n-1
    degrees of freedom. With no variation at all the answer is exact: 0 if the mean clears the
    margin, 1 otherwise. Fewer than 2 units: p = 1 (no evidence)."""
    n = np.asarray(n, dtype=float)
    mean_diff = np.asarray(mean_diff, dtype=float)
    sd_diff = np.asarray(sd_diff, dtype=float)
    margin = np.asarray(margin, dtype=float)
    out = np.ones(np.broadcast(n, mean_diff, sd_diff, margin).shape)
    n, mean_diff, sd_diff, margin = np.broadcast_arrays(n, mean_diff, sd_diff, margin)
    ok = (n >= 2) & np.isfinite(mean_diff)
    # sd below rounding noise of the sums counts as zero variation
    tiny = ok & (~np.isfinite(sd_diff) | (sd_diff <= 1e-12 * np.maximum(1.0, np.abs(mean_diff))))
    out[tiny] = np.where(mean_diff[tiny] > margin[tiny] + 1e-12, 0.0, 1.0)
    t_ok = ok & ~tiny
    t = (mean_diff[t_ok] - margin[t_ok]) / (sd_diff[t_ok] / np.sqrt(n[t_ok]))
    out[t_ok] = _st.t.sf(t, df=n[t_ok] - 1)
    return out


def paired_p_value(scores: ArrayLike, baseline: ArrayLike, margin: float = 0.0) -> float:
    """One-sided paired t-test p-value of ``mean(scores - baseline) > margin`` (per-unit arrays)."""
    d = np.asarray(scores, dtype=float) - np.asarray(baseline, dtype=float)
    if d.ndim != 1:
        raise ValueError(f"scores and baseline must be 1-d per-unit arrays, got shape {d.shape}")
    sd = d.std(ddof=1) if d.size >= 2 else np.nan
    return float(one_sided_p_from_sums(d.size, d.mean() if d.size else np.nan, sd, margin))


def _adjust(p_values: ArrayLike, step: Callable[[np.ndarray, int], np.ndarray]) -> np.ndarray:
    """Apply ``step(sorted finite p-values, m) -> adjusted`` to the finite entries; NaNs stay NaN
    and do not count as tests. Adjusted values are capped at 1."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    flat, res = p.ravel(), out.ravel()
    idx = np.flatnonzero(np.isfinite(flat))
    if idx.size:
        order = idx[np.argsort(flat[idx], kind="mergesort")]
        res[order] = np.minimum(step(flat[order], idx.size), 1.0)
    return res.reshape(p.shape)


def holm(p_values: ArrayLike) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1). NaNs stay NaN and do
    not count as tests. Reject where adjusted p <= alpha: family-wise error rate <= alpha."""
    return _adjust(p_values, lambda p, m: np.maximum.accumulate((m - np.arange(m)) * p))


def bh(p_values: ArrayLike) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values; false discovery rate under independence or
    positive dependence). NaNs stay NaN."""
    return _adjust(p_values, lambda p, m: np.minimum.accumulate((p * m / np.arange(1, m + 1))[::-1])[::-1])


def bootstrap_ci(values: ArrayLike, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-unit values (in-memory reference
    implementation; the probe uses the streaming Poisson version in ``interp.reducers``)."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"need a non-empty 1-d array of per-unit values, got shape {x.shape}")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))
