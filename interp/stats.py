"""Statistics for head labels: paired one-sided tests, bootstrap intervals, multiple comparisons.

The choice, and why
-------------------
* **Unit**: the sentence (or random token sequence). Scores of one sentence are correlated across
  its words, so resampling words would understate the uncertainty.
* **Cluster**: sentences are not independent either where they share a source: sonnet windows
  overlap within a sonnet, WinoBias comes in templated pro/anti pairs, XSum sentences share
  documents, minimal pairs share everything but the cue. Such items carry a cluster id
  (``analyses.data.Item.cluster``), and both the test and the interval run over clusters:
  ``ClusterSums`` gives a cluster-robust (Liang-Zeger) standard error of the mean difference, the
  t statistic then has (clusters - 1) degrees of freedom (``one_sided_p_clustered``); the
  bootstrap draws one Poisson weight per cluster (``cluster_bootstrap_ci`` in memory, the probe's
  streaming version seeds ``interp.reducers.PoissonBootstrap`` by cluster). An item without a
  cluster is its own cluster, and then everything reduces to the per-item statistics.
* **Small n**: a percentile bootstrap collapses to [1, 1] when every unit scores 1 (n=27 sentences
  of a user's CoNLL-U file, all right, is not certainty). Accuracy intervals are therefore the
  union of the cluster bootstrap's and the **Wilson score interval** at the number of clusters
  (``wilson_interval``): never narrower than either, never empty at 0 or 1 (at 27 of 27 the lower
  end is 0.875).
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
* **Interval**: 95% percentile bootstrap over clusters (streaming Poisson bootstrap, see
  ``interp.reducers``; accuracy rows widened to the Wilson interval, above). It is a per-head
  interval, reported beside the score; a label needs the Holm-adjusted p below alpha *and* the
  interval's lower end above the baseline (and above the score of the same head in a randomly
  initialised model).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as _st

__all__ = [
    "paired_p_value",
    "holm",
    "bh",
    "bootstrap_ci",
    "one_sided_p_from_sums",
    "wilson_interval",
    "cluster_bootstrap_ci",
    "cluster_p_value",
    "one_sided_p_clustered",
    "ClusterSums",
    "cluster_index",
]


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


def wilson_interval(successes: ArrayLike, n: ArrayLike, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a proportion (vectorised; NaN where n < 1). Unlike a percentile
    bootstrap it does not collapse at 0 or n successes: at 27 of 27 it is [0.875, 1]."""
    k = np.asarray(successes, dtype=float)
    n = np.asarray(n, dtype=float)
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    z = _st.norm.ppf(1 - (1 - level) / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.clip(k / n, 0.0, 1.0)
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        lo, hi = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    bad = ~(n >= 1)
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def cluster_index(keys: Sequence) -> np.ndarray:
    """Integer cluster ids 0 .. G-1 (in order of first appearance) from any hashable per-unit keys."""
    seen: dict = {}
    return np.array([seen.setdefault(k, len(seen)) for k in keys], dtype=np.int64)


def _check_clusters(values: np.ndarray, clusters: ArrayLike) -> np.ndarray:
    c = np.asarray(clusters)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"need a non-empty 1-d array of per-unit values, got shape {values.shape}")
    if c.shape != values.shape:
        raise ValueError(f"clusters must give one id per unit: {c.shape} ids for {values.shape} values")
    return cluster_index(c.tolist())


def cluster_bootstrap_ci(
    values: ArrayLike, clusters: ArrayLike, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile cluster bootstrap interval of the mean of per-unit values: each replicate draws
    whole clusters with replacement (as many as there are) and takes the mean of their units.
    Correlated units of one cluster move together, so the interval is wider than the per-unit
    bootstrap's wherever units within a cluster are alike."""
    x = np.asarray(values, dtype=float)
    c = _check_clusters(x, clusters)
    g = int(c.max()) + 1
    sums, counts = np.bincount(c, weights=x, minlength=g), np.bincount(c, minlength=g).astype(float)
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, g, size=(n_boot, g))
    means = sums[draw].sum(1) / counts[draw].sum(1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def one_sided_p_clustered(
    n_clusters: ArrayLike, mean_diff: ArrayLike, se: ArrayLike, margin: ArrayLike = 0.0
) -> np.ndarray:
    """P-value of ``H0: mean(d) <= margin`` from a cluster-robust standard error ``se`` of the mean:
    Student's t = (mean - margin) / se with (clusters - 1) degrees of freedom. Fewer than 2
    clusters: p = 1; no variation: 0 or 1 exactly (as ``one_sided_p_from_sums``)."""
    g = np.asarray(n_clusters, dtype=float)
    # one_sided_p_from_sums divides sd by sqrt(n): give it sd = se * sqrt(G) and n = G
    return one_sided_p_from_sums(g, mean_diff, np.asarray(se, dtype=float) * np.sqrt(np.maximum(g, 0.0)), margin)


def cluster_p_value(scores: ArrayLike, baseline: ArrayLike, clusters: ArrayLike, margin: float = 0.0) -> float:
    """One-sided paired test of ``mean(scores - baseline) > margin`` over clusters (in memory; the
    probe streams the same sums through ``ClusterSums``)."""
    d = np.asarray(scores, dtype=float) - np.asarray(baseline, dtype=float)
    c = _check_clusters(d, clusters)
    sums = ClusterSums(())
    sums.update(d, np.ones_like(d, dtype=bool), c)
    return float(sums.p_value(margin))


class ClusterSums:
    """Streaming cluster-robust variance of a mean over a grid of cells.

    Per cell it keeps N (units), G (clusters with a unit), and over clusters c the sums of D_c (the
    cluster's total of d), D_c^2, n_c D_c and n_c^2. The mean is sum(D_c) / N and its Liang-Zeger
    variance G / (G - 1) * sum_c (D_c - n_c mean)^2 / N^2, which expands into those sums. Every
    cluster must arrive whole in one ``update`` (the probe batches clusters together); with one unit
    per cluster the variance is the ordinary s^2 / N.
    """

    def __init__(self, cells: Sequence[int]) -> None:
        self.cells = tuple(cells)
        z = lambda: np.zeros(self.cells, dtype=np.float64)  # noqa: E731
        self.n, self.g = z(), z()  # counts: exact in float64
        # the four sums are compensated (value = hi + lo, TwoSum), so the result does not depend on the
        # order the batches arrive in: one process or several workers give the same bits
        self._hi = [z() for _ in range(4)]
        self._lo = [z() for _ in range(4)]

    def arrays(self) -> list[np.ndarray]:
        """The state, in the order ``add_parts`` reads it: counts, then the sums' high and low parts."""
        return [self.n, self.g, *self._hi, *self._lo]

    @staticmethod
    def add_parts(acc: list, other: list) -> None:
        """``acc += other`` on two ``arrays()`` lists (numpy arrays or torch tensors), the sums
        compensated: what ``interp.distributed.World.sum_`` calls to merge the workers' states."""
        for a, b in zip(acc[:2], other[:2]):
            a += b
        for hi, lo, hi_b, lo_b in zip(acc[2:6], acc[6:10], other[2:6], other[6:10]):
            t = hi + hi_b
            bb = t - hi
            err = (hi - (t - bb)) + (hi_b - bb)
            hi[...] = t
            lo += lo_b + err

    def _sum(self, i: int) -> np.ndarray:
        return self._hi[i] + self._lo[i]

    @property
    def s1(self) -> np.ndarray:
        return self._sum(0)

    @property
    def s2(self) -> np.ndarray:
        return self._sum(1)

    @property
    def s3(self) -> np.ndarray:
        return self._sum(2)

    @property
    def s4(self) -> np.ndarray:
        return self._sum(3)

    def update(self, d: ArrayLike, valid: ArrayLike, clusters: ArrayLike) -> None:
        """``d`` [units, *cells] differences, ``valid`` (broadcastable to it) which units count in
        which cell, ``clusters`` [units] integer ids; each cluster here is complete."""
        d = np.asarray(d, dtype=np.float64)
        v = np.broadcast_to(np.asarray(valid, dtype=bool), d.shape)
        c = np.asarray(clusters)
        if c.shape != d.shape[:1]:
            raise ValueError(f"clusters must give one id per unit: {c.shape} ids for {d.shape[0]} units")
        _, inv = np.unique(c, return_inverse=True)
        onehot = np.zeros((int(inv.max()) + 1 if inv.size else 0, d.shape[0]))
        onehot[inv, np.arange(d.shape[0])] = 1.0
        flat_d = np.where(v, d, 0.0).reshape(d.shape[0], -1)
        flat_n = v.reshape(d.shape[0], -1).astype(np.float64)
        dc, nc = onehot @ flat_d, onehot @ flat_n  # [clusters, cells]
        shape = self.cells
        self.n += flat_n.sum(0).reshape(shape)
        self.g += (nc > 0).sum(0).reshape(shape)
        z = np.zeros(shape)
        batch = [z, z, dc.sum(0), (dc * dc).sum(0), (nc * dc).sum(0), (nc * nc).sum(0)]
        self.add_parts(self.arrays(), [a.reshape(shape) for a in batch] + [z] * 4)

    def merge(self, other: ClusterSums) -> None:
        self.add_parts(self.arrays(), other.arrays())

    def mean(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.s1 / self.n

    def se(self) -> np.ndarray:
        """Cluster-robust standard error of the mean (NaN with fewer than 2 clusters)."""
        m = self.mean()
        with np.errstate(invalid="ignore", divide="ignore"):
            ss = np.clip(self.s2 - 2 * m * self.s3 + m * m * self.s4, 0.0, None)
            var = self.g / (self.g - 1) * ss / (self.n * self.n)
        return np.where(self.g >= 2, np.sqrt(var), np.nan)

    def p_value(self, margin: ArrayLike = 0.0) -> np.ndarray:
        """One-sided p of ``mean(d) > margin`` per cell, over clusters (``one_sided_p_clustered``)."""
        return one_sided_p_clustered(self.g, self.mean(), self.se(), margin)
