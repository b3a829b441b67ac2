"""Clustered statistics (issue 21 section 3): the cluster bootstrap and the test over clusters on data
with planted cluster correlation, the streaming sums, and the Wilson interval at small n."""

from __future__ import annotations

import numpy as np
import pytest

from interp import stats

Z = 1.959963984540054


def _clustered(rng, n_clusters=40, size=5, mu=0.0, sd_cluster=1.0, sd_item=0.3):
    """x = mu + u_cluster + e_item: units of one cluster are strongly correlated (ICC ~ 0.92)."""
    u = rng.normal(0, sd_cluster, n_clusters)
    x = mu + np.repeat(u, size) + rng.normal(0, sd_item, n_clusters * size)
    return x, np.repeat(np.arange(n_clusters), size)


def test_cluster_bootstrap_is_wider_than_the_item_bootstrap_on_correlated_clusters():
    x, c = _clustered(np.random.default_rng(0))
    lo_i, hi_i = stats.bootstrap_ci(x, n_boot=1000, seed=1)
    lo_c, hi_c = stats.cluster_bootstrap_ci(x, c, n_boot=1000, seed=1)
    # design effect 1 + (size - 1) * ICC ~ 4.7: the honest interval is about sqrt(4.7) ~ 2.2 times wider
    assert (hi_c - lo_c) > 1.6 * (hi_i - lo_i)
    assert lo_c <= x.mean() <= hi_c


def test_without_cluster_correlation_the_two_intervals_agree():
    x, c = _clustered(np.random.default_rng(2), sd_cluster=0.0, sd_item=1.0)
    lo_i, hi_i = stats.bootstrap_ci(x, n_boot=2000, seed=3)
    lo_c, hi_c = stats.cluster_bootstrap_ci(x, c, n_boot=2000, seed=3)
    assert (hi_c - lo_c) == pytest.approx(hi_i - lo_i, rel=0.25)


def test_cluster_bootstrap_coverage_is_near_nominal_where_the_item_bootstrap_undercovers():
    rng = np.random.default_rng(4)
    hits_c = hits_i = 0
    sims = 200
    for k in range(sims):
        x, c = _clustered(rng, mu=0.3)
        lo, hi = stats.cluster_bootstrap_ci(x, c, n_boot=400, seed=k)
        hits_c += lo <= 0.3 <= hi
        lo, hi = stats.bootstrap_ci(x, n_boot=400, seed=k)
        hits_i += lo <= 0.3 <= hi
    assert 0.88 <= hits_c / sims <= 0.99  # nominal 0.95; a percentile bootstrap over 40 clusters runs a little under
    assert hits_i / sims < 0.8  # the item bootstrap treats 200 correlated units as independent


def test_the_test_over_clusters_holds_its_level_where_the_item_test_does_not():
    rng = np.random.default_rng(5)
    sims, alpha = 400, 0.05
    rej_c = rej_i = 0
    for _ in range(sims):
        x, c = _clustered(rng, mu=0.0)
        b = np.zeros_like(x)
        rej_c += stats.cluster_p_value(x, b, c) <= alpha
        rej_i += stats.paired_p_value(x, b) <= alpha
    assert 0.02 <= rej_c / sims <= 0.09
    assert rej_i / sims > 0.2


def test_one_unit_per_cluster_is_the_item_test():
    rng = np.random.default_rng(6)
    s, b = rng.normal(0.4, 1, 50), rng.normal(0, 1, 50)
    assert stats.cluster_p_value(s, b, np.arange(50), margin=0.1) == pytest.approx(
        stats.paired_p_value(s, b, margin=0.1), rel=1e-9
    )


def test_streaming_cluster_sums_equal_one_pass_and_respect_validity():
    rng = np.random.default_rng(7)
    x, c = _clustered(rng, n_clusters=12, size=3)
    whole = stats.ClusterSums(())
    whole.update(x, np.ones_like(x, dtype=bool), c)
    parts = stats.ClusterSums(())
    for lo, hi in ((0, 9), (9, 21), (21, 36)):  # cut between clusters
        parts.update(x[lo:hi], np.ones(hi - lo, dtype=bool), c[lo:hi])
    assert parts.mean() == pytest.approx(whole.mean()) and parts.se() == pytest.approx(whole.se())
    # a grid of cells: cell 1 sees only the first two units of each cluster
    d = np.stack([x, x], axis=1)
    valid = np.stack([np.ones_like(x, dtype=bool), np.tile([True, True, False], 12)], axis=1)
    grid = stats.ClusterSums((2,))
    grid.update(d, valid, c)
    sub = stats.ClusterSums(())
    sub.update(x[valid[:, 1]], np.ones(int(valid[:, 1].sum()), dtype=bool), c[valid[:, 1]])
    assert grid.g.tolist() == [12, 12] and grid.n.tolist() == [36, 24]
    assert grid.se()[1] == pytest.approx(sub.se()) and grid.se()[0] == pytest.approx(whole.se())
    # the Liang-Zeger variance by hand
    dev = np.array([(x[c == j] - x.mean()).sum() for j in range(12)])
    assert whole.se() == pytest.approx(np.sqrt(12 / 11 * (dev**2).sum() / 36**2))


def test_wilson_interval_does_not_collapse_at_all_correct():
    lo, hi = stats.wilson_interval(27, 27)
    assert lo == pytest.approx(27 / (27 + Z**2)) and hi == pytest.approx(1.0)  # at k = n: lower end n / (n + z^2)
    lo, hi = stats.wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(Z**2 / (10 + Z**2))
    lo, hi = stats.wilson_interval(np.array([5, 50]), np.array([10, 100]))
    assert np.all(lo < 0.5) and np.all(hi > 0.5) and (hi - lo)[1] < (hi - lo)[0]
    assert np.isnan(stats.wilson_interval(0, 0)[0])


def test_clustered_inputs_are_checked():
    with pytest.raises(ValueError, match="one id per unit"):
        stats.cluster_bootstrap_ci([1.0, 2.0, 3.0], [0, 1])
    with pytest.raises(ValueError, match="level"):
        stats.wilson_interval(1, 2, level=1.5)
