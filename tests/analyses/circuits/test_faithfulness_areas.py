"""Beside MIB's CPR: the mean faithfulness of the small circuits (``small_area``, p <= 0.1) and on a
log axis (``log_area``), both areas divided by their range's width so they are in f's units, and the
bootstrap intervals over pairs of all four summaries (``summarise_curve(..., per_pair=...)``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analyses.circuits.faithfulness import (
    MIB_PROPORTIONS,
    bootstrap_summary,
    cpr,
    log_area,
    small_area,
    summarise_curve,
)

X = np.array(MIB_PROPORTIONS)
LN10 = np.log(10.0)


def test_small_area_by_hand():
    # [0.05, 0.1]: one trapezoid, 0.05 * (0.2 + 0.6) / 2 = 0.02, over a width of 0.05
    assert small_area([0.05, 0.1, 0.5, 1.0], [0.2, 0.6, 0.9, 1.0]) == pytest.approx(0.4, abs=1e-12)
    # 0.1 between 0.05 and 0.2: f there is interpolated, 0.3 + (0.9 - 0.3) / 3 = 0.5;
    # area 0.03 * 0.3 / 2 + 0.05 * (0.3 + 0.5) / 2 = 0.0245 over [0.02, 0.1], a width of 0.08
    assert small_area([0.02, 0.05, 0.2, 1.0], [0.0, 0.3, 0.9, 1.0]) == pytest.approx(0.0245 / 0.08, abs=1e-12)
    # f = p is linear, so the trapezoids are exact: the mean of p over [0.001, 0.1]
    assert small_area(X, X) == pytest.approx((0.001 + 0.1) / 2, abs=1e-12)
    # only the small sizes count: changing f above 0.1 changes nothing
    f = np.linspace(0, 1, len(X))
    g = np.where(X > 0.1, -5.0, f)
    assert small_area(X, f) == small_area(X, g) and cpr(X, f) != cpr(X, g)
    with pytest.raises(ValueError, match="p_max"):
        small_area(X, f, p_max=0.001)


def test_log_area_by_hand():
    # equal steps of ln 10: ln10 * (0 + 0.5) / 2 + ln10 * (0.5 + 1) / 2 = ln10, over a width of 2 ln10
    assert log_area([0.01, 0.1, 1.0], [0.0, 0.5, 1.0]) == pytest.approx(0.5, abs=1e-12)
    # unequal steps: ln10 * 0.3 + 2 ln10 * 0.7 = 1.7 ln10 over 3 ln10
    assert log_area([0.001, 0.01, 1.0], [0.2, 0.4, 1.0]) == pytest.approx(1.7 / 3, abs=1e-12)
    # the unnormalised log-axis CPR (kept as it was) is that area times the axis's width
    f = np.linspace(0.1, 0.9, len(X)) ** 2
    assert cpr(X, f, log_scale=True) == pytest.approx(log_area(X, f) * np.log(1000.0), rel=1e-12)


@pytest.mark.parametrize("c", [0.0, 0.37, 1.0, -0.2, 1.6])
def test_a_constant_curve_averages_to_its_constant(c):
    f = np.full(len(X), c)
    assert log_area(X, f) == pytest.approx(c, abs=1e-12)
    assert small_area(X, f) == pytest.approx(c, abs=1e-12)
    assert cpr(X, f) == pytest.approx(c * (1 - 0.001), abs=1e-12)  # CPR is not a mean: MIB's, unchanged


def _synthetic(n: int, seed: int, truth: float = 0.6, n_nodes: int = 200):
    """A curve of one method over MIB's proportions on ``n`` pairs with per-pair values as
    ``faithfulness_curve(..., per_pair=True)`` gives them: each pair's gap g_i > 0 (clean -
    corrupted), a circuit of k nodes recovers truth * s(p) of it plus noise; the empty circuit 0 and the
    full one its whole gap, exactly. Returns (curve, per_pair [row, pair], the true curve)."""
    rng = np.random.default_rng(seed)
    gap = rng.gamma(4.0, 0.5, n)
    shape = np.clip(truth * (X / 0.1) ** 0.3, 0, 1)
    rows, numerators, true = [], [], []
    for p, s in zip(X, shape):
        k = int(p * n_nodes)
        share = 0.0 if k == 0 else 1.0 if k == n_nodes else s
        noise = 0.0 if k in (0, n_nodes) else rng.normal(0, 0.5, n)
        numerators.append(share * gap + noise)
        rows.append(dict(method="eap", proportion=p, k=k, draw=0))
        true.append(share)
    per_pair = np.array(numerators) / gap.mean()
    curve = pd.DataFrame(rows).assign(faithfulness=per_pair.mean(axis=1))
    curve.attrs.update(n_nodes=n_nodes)
    return curve, per_pair, np.array(true)


STATS = ("cpr", "cmd", "mean_f_p_le_0.1", "mean_f_log_p")


def test_the_interval_contains_the_point_and_shrinks_with_more_pairs():
    widths = {}
    for n in (20, 320):
        curve, per_pair, _ = _synthetic(n, seed=1)
        plain = summarise_curve(curve).iloc[0]
        row = summarise_curve(curve, per_pair=per_pair, seed=0).iloc[0]
        assert row["ci_pairs"] == n and np.isnan(plain["cpr_ci95_lo"]) and plain["ci_pairs"] == 0
        for s in STATS:
            assert row[s] == plain[s]  # the point estimate does not depend on the intervals
            assert row[f"{s}_ci95_lo"] <= row[s] <= row[f"{s}_ci95_hi"], (n, s)
            widths[n, s] = row[f"{s}_ci95_hi"] - row[f"{s}_ci95_lo"]
    for s in STATS:  # 16x the pairs: about 1/4 of the width (1/sqrt(16))
        assert 0 < widths[320, s] < 0.5 * widths[20, s], (s, widths[20, s], widths[320, s])


def test_each_resample_is_renormalised_by_its_own_gap():
    """Every circuit that recovers each pair's whole gap is f = 1 on every resample, so the
    intervals collapse onto the point; with the whole set's gap kept fixed they would not."""
    curve, per_pair, _ = _synthetic(30, seed=2)
    full = per_pair[curve["k"].to_numpy() == curve.attrs["n_nodes"]][0]  # each pair's gap over the mean gap
    per_pair = np.where((curve["k"] > 0).to_numpy()[:, None], full[None, :], 0.0)
    curve = curve.assign(faithfulness=per_pair.mean(axis=1))
    row = summarise_curve(curve, per_pair=per_pair).iloc[0]
    assert row["cpr"] == pytest.approx(cpr(X, (X * 200 >= 1).astype(float)), abs=1e-12)
    for s in STATS:
        assert row[f"{s}_ci95_lo"] == pytest.approx(row[s], abs=1e-12)
        assert row[f"{s}_ci95_hi"] == pytest.approx(row[s], abs=1e-12)


def test_the_intervals_cover_the_truth_about_95_percent_of_the_time():
    """200 data sets of 40 pairs drawn around a known curve: each interval covers the statistic of the
    true curve in 88-99% of them (0.95 +- 4.5 binomial sd; seeded, so the count is fixed)."""
    covered = {s: 0 for s in STATS}
    reps = 200
    for rep in range(reps):
        curve, per_pair, true = _synthetic(40, seed=100 + rep)
        truth = dict(zip(STATS, (cpr(X, true), cpr(X, np.abs(1 - true)), small_area(X, true), log_area(X, true))))
        row = summarise_curve(curve, per_pair=per_pair, n_boot=400, seed=rep).iloc[0]
        for s in STATS:
            covered[s] += row[f"{s}_ci95_lo"] <= truth[s] <= row[f"{s}_ci95_hi"]
    rates = {s: c / reps for s, c in covered.items()}
    assert all(0.88 <= r <= 0.99 for r in rates.values()), rates


def test_random_draws_share_the_resample_and_bad_input_is_refused():
    curve, per_pair, _ = _synthetic(25, seed=3)
    two = pd.concat([curve.assign(method="random", draw=d) for d in (0, 1)], ignore_index=True)
    two.attrs.update(curve.attrs)
    doubled = np.vstack([per_pair, per_pair])
    one = bootstrap_summary(curve, per_pair, seed=4).iloc[0]
    both = bootstrap_summary(two, doubled, seed=4).iloc[0]  # two identical draws: their mean is either
    assert both["cpr_lo"] == pytest.approx(one["cpr_lo"], abs=1e-12) and both["method"] == "random"
    with pytest.raises(ValueError, match=r"per_pair must be \[curve row, pair\]"):
        bootstrap_summary(curve, per_pair[:-1])
    with pytest.raises(ValueError, match="proportion 1"):
        bootstrap_summary(curve[curve.proportion < 1], per_pair[:-1])
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_summary(curve, per_pair, n_boot=1)
    with pytest.raises(ValueError, match=">= 2 pairs"):
        bootstrap_summary(curve, per_pair[:, :1])
