"""Statistics: p-values are calibrated, Holm controls the family-wise error rate, BH the FDR."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st

from interp import stats


def test_p_value_matches_scipy_paired_t():
    rng = np.random.default_rng(0)
    s, b = rng.normal(0.3, 0.2, 50), rng.normal(0.25, 0.2, 50)
    ours = stats.paired_p_value(s, b)
    ref = st.ttest_rel(s, b, alternative="greater").pvalue
    assert ours == pytest.approx(ref, rel=1e-10)
    # a margin shifts the null: same as testing s - margin against b
    assert stats.paired_p_value(s, b, margin=0.1) == pytest.approx(
        st.ttest_rel(s - 0.1, b, alternative="greater").pvalue
    )


def test_p_value_edge_cases():
    assert stats.paired_p_value(np.ones(10), np.zeros(10), margin=0.05) == 0.0  # no variation, clears margin
    assert stats.paired_p_value(np.ones(10) * 0.02, np.zeros(10), margin=0.05) == 1.0
    assert stats.paired_p_value(np.ones(1), np.zeros(1)) == 1.0  # one unit: no evidence
    assert np.isnan(stats.holm([np.nan, 0.01])[0])


def test_holm_and_bh_by_hand():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 -> 0.02, 0.03, 0.06, 0.06 (monotone)
    np.testing.assert_allclose(stats.holm(p), [0.03, 0.06, 0.06, 0.02])
    # BH: 0.005*4/1=0.02, 0.01*4/2=0.02, 0.03*4/3=0.04, 0.04*4/4=0.04
    np.testing.assert_allclose(stats.bh(p), [0.02, 0.04, 0.04, 0.02])


def _simulate_heads(rng, n_heads, n_units, effect=0.0, binary=True):
    """Per-unit scores and baselines of many heads with the given true mean difference."""
    if binary:  # accuracies: Bernoulli per sentence; baseline right 40% of the time
        base = (rng.random((n_units,)) < 0.4).astype(float)
        s = (rng.random((n_heads, n_units)) < 0.4 + effect).astype(float)
    else:  # attention masses in [0, 1] (no clipping, so the true mean difference is exactly `effect`)
        base = rng.uniform(0.2, 0.45, n_units)
        s = base + effect + rng.uniform(-0.15, 0.15, (n_heads, n_units)) * rng.uniform(0.2, 1.0, (n_heads, 1))
    return s, base


def _p_values(s, base, margin):
    d = s - base
    return stats.one_sided_p_from_sums(d.shape[1], d.mean(1), d.std(1, ddof=1), margin)


@pytest.mark.parametrize("binary", [True, False])
def test_single_test_false_positive_rate_at_the_boundary(binary):
    """Heads whose true effect equals the margin (the least favourable null) are rejected at most
    alpha of the time: the t approximation is calibrated for bounded per-sentence scores."""
    rng = np.random.default_rng(1)
    margin, alpha = 0.05, 0.05
    s, base = _simulate_heads(rng, 4000, 150, effect=margin, binary=binary)
    rate = (_p_values(s, base, margin) <= alpha).mean()
    assert rate <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / 4000)  # binomial noise allowance


def test_holm_controls_family_wise_error_over_many_simulated_heads():
    """Families of 144 null heads (a 12 x 12 model), 400 simulated models: the share of models
    with at least one false label is <= alpha (Holm), while without correction it is near 1."""
    rng = np.random.default_rng(2)
    alpha, margin, families = 0.05, 0.0, 400
    any_holm = any_raw = 0
    for _ in range(families):
        s, base = _simulate_heads(rng, 144, 120, effect=0.0, binary=bool(rng.random() < 0.5))
        p = _p_values(s, base, margin)
        any_holm += (stats.holm(p) <= alpha).any()
        any_raw += (p <= alpha).any()
    assert any_holm / families <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / families)
    assert any_raw / families > 0.5  # the problem Holm solves is real (heads share baselines, so < 1 - 0.95**144)


def test_holm_keeps_power_for_real_effects():
    rng = np.random.default_rng(3)
    s0, base = _simulate_heads(rng, 140, 200, effect=0.0)
    s1, _ = _simulate_heads(rng, 4, 200, effect=0.35)
    s1 = (rng.random((4, 200)) < 0.4 + 0.35).astype(float)
    p = _p_values(np.vstack([s0, s1]), base, 0.05)
    rejected = stats.holm(p) <= 0.05
    assert rejected[-4:].all() and not rejected[:-4].any()


def test_bh_controls_false_discovery_rate():
    rng = np.random.default_rng(4)
    fdp = []
    for _ in range(200):
        s0, base = _simulate_heads(rng, 90, 100, effect=0.0, binary=False)
        s1, _ = _simulate_heads(rng, 10, 100, effect=0.1, binary=False)
        p = _p_values(np.vstack([s0, s1]), base, 0.0)
        rej = stats.bh(p) <= 0.1
        fdp.append(rej[:90].sum() / max(rej.sum(), 1))
    assert np.mean(fdp) <= 0.1 + 0.03


def test_bootstrap_ci_covers_the_mean_at_the_promised_rate():
    rng = np.random.default_rng(5)
    hits = 0
    for i in range(300):
        x = rng.beta(2, 5, 80)
        lo, hi = stats.bootstrap_ci(x, n_boot=400, seed=i)
        hits += lo <= 2 / 7 <= hi
    assert 0.90 <= hits / 300 <= 0.99
