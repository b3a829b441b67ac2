"""The bootstrap of the natural-text models (seeds and windows, crossed) on synthetic data with
known structure, and the report's interval verdicts built on it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analyses.positional import text_report as TR
from analyses.positional import text_stats as T


def _width(values, d):
    lo, hi = T.interval(T.boot_means(values, d))
    return hi - lo


def test_boot_means_match_a_direct_resample():
    """Each draw is the mean over the picked seeds of the weighted mean over the picked windows."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 7, 2))
    d = T.draws(3, 7, n_boot=25, seed=4)
    got = T.boot_means(x, d)
    for b in range(25):
        picked = [np.repeat(x[d.seeds[b, i]], d.weights[b, i], axis=0) for i in range(3)]
        assert all(p.shape == (7, 2) for p in picked)  # n windows drawn per picked seed
        np.testing.assert_allclose(got[b], np.mean([p.mean(axis=0) for p in picked], axis=0))
    assert T.estimate(x[..., 0], d)["mean"] == pytest.approx(x[..., 0].mean())


def test_windows_are_crossed_with_seeds_not_nested():
    """Every seed is scored on the same windows: a window's difficulty shared by all seeds is as
    uncertain with three seeds as with one (drawing windows anew per seed would shrink the interval
    by about sqrt(3), as if each seed had read other text)."""
    rng = np.random.default_rng(2)
    shared = rng.normal(0, 1, size=512)
    three = np.tile(shared, (3, 1))  # three seeds that agree exactly, on windows of varying difficulty
    crossed = _width(three, T.draws(3, 512, seed=0))
    one = _width(shared[None], T.draws(1, 512, seed=0))
    assert 0.85 < crossed / one < 1.15
    d = T.draws(3, 512, n_boot=50, seed=0)
    assert (d.weights == d.weights[:, :1]).all()  # the same window weights for every seed of a draw
    r = np.random.default_rng(1)  # windows drawn anew for each seed: what a nested scheme would claim
    nested = T.Draws(r.integers(0, 3, size=(2000, 3)), r.multinomial(512, np.full(512, 1 / 512), size=(2000, 3)))
    assert _width(three, nested) < 0.7 * one


def test_draws_are_seeded_and_bad_shapes_are_refused():
    a, b = T.draws(3, 50, 100, seed=0), T.draws(3, 50, 100, seed=0)
    assert np.array_equal(a.seeds, b.seeds) and np.array_equal(a.weights, b.weights)
    assert not np.array_equal(a.weights, T.draws(3, 50, 100, seed=1).weights)
    assert (a.weights.sum(axis=2) == 50).all()
    with pytest.raises(ValueError, match=r"n_seeds=3, n_windows=50"):
        T.boot_means(np.zeros((2, 50)), a)
    with pytest.raises(ValueError, match="n_boot"):
        T.draws(3, 50, 0)
    with pytest.raises(ValueError, match="level"):
        T.interval(np.zeros(10), level=95)


def test_the_interval_widens_with_the_spread_between_seeds():
    rng = np.random.default_rng(0)
    windows = rng.normal(0, 1, size=(3, 512))
    d = T.draws(3, 512, seed=0)
    same = _width(windows, d)
    spread = _width(windows + np.array([-1.0, 0.0, 1.0])[:, None], d)  # seeds disagree by a nat
    assert spread > 5 * same
    # and with no spread at all (one value everywhere) there is nothing to be unsure of
    lo, hi = T.interval(T.boot_means(np.full((3, 512), 2.5), d))
    assert lo == pytest.approx(2.5) and hi == pytest.approx(2.5)


def test_a_paired_difference_cancels_the_shared_window_jitter():
    """Two schemes scored on the same windows share each window's difficulty (large jitter); their
    difference (0.1) is far better known paired (same drawn windows) than from independent draws."""
    rng = np.random.default_rng(0)
    jitter = rng.normal(0, 0.5, size=(3, 512))  # shared: the same text is hard for both
    a = 4.1 + jitter + rng.normal(0, 0.05, size=(3, 512))
    b = 4.0 + jitter + rng.normal(0, 0.05, size=(3, 512))
    d = T.draws(3, 512, seed=0)
    paired = T.interval(T.boot_means(a - b, d))
    unpaired_boot = T.boot_means(a, T.draws(3, 512, seed=1)) - T.boot_means(b, T.draws(3, 512, seed=2))
    unpaired = T.interval(unpaired_boot)
    assert paired[1] - paired[0] < 0.2 * (unpaired[1] - unpaired[0])
    assert paired[0] > 0.05 and paired[1] < 0.15  # the true 0.1 is inside, zero is not


def test_verdicts_need_the_whole_interval():
    assert T.verdict(0.31, 0.5, 0.3) == "met"
    assert T.verdict(0.1, 0.29, 0.3) == "not met"
    assert T.verdict(0.2, 0.4, 0.3) == "undecided"
    assert T.verdict(-0.3, -0.06, -0.05, above=False) == "met"
    assert T.verdict(-0.04, 0.1, -0.05, above=False) == "not met"
    assert T.verdict(-0.1, 0.0, -0.05, above=False) == "undecided"


# --------------------------------------------------------------------------------------------------
# The report's criteria on hand-made per-window losses


def _result(kind, scheme, seed, early, late, n_layers=2):
    n = len(early)
    curve = np.repeat(np.asarray(early)[:, None], 31, axis=1)
    curve[:, 24:] = np.asarray(late)[:, None]
    pw = {"n": n, "pos_1_7": list(early), "last_quarter": list(late), "curve": curve.tolist()}
    return {
        "kind": kind,
        "scheme": scheme,
        "seed": seed,
        "n_layers": n_layers,
        "n_params": 1000 * n_layers,
        "per_window": {"stream": pw, "passage": pw},
    }


def _results(gains, late_offsets, kind="text", n_layers=2, seeds=(0, 1, 2), seed_spread=None):
    """Per-window losses with a shared window jitter: scheme s has late loss 4 + late_offsets[s] and
    gain gains[s]; ``seed_spread`` {scheme: offsets} adds one offset per seed to that scheme's gain."""
    rng = np.random.default_rng(0)
    jitter = rng.normal(0, 0.4, size=(len(seeds), 256))
    out = []
    for s, gain in gains.items():
        shift = np.asarray((seed_spread or {}).get(s, np.zeros(len(seeds))))
        for i, seed in enumerate(seeds):
            late = 4 + late_offsets[s] + jitter[i] + rng.normal(0, 0.02, 256)
            early = late + gain + shift[i] + rng.normal(0, 0.02, 256)
            out.append(_result(kind, s, seed, early, late, n_layers))
    return out


def test_text_criteria_decide_on_the_intervals():
    gains = {"learned": 0.3, "sinusoidal": 0.1, "rope": 0.6, "none": 0.2}
    late = {"learned": 0.0, "sinusoidal": 0.5, "rope": -0.2, "none": 0.0}
    results = _results(gains, late, seed_spread={"learned": [-0.4, 0.0, 0.4]})
    c = TR.text_criteria(results)
    stream = c[(c.windows == "stream")].set_index("condition")["met?"]
    verdicts = {k.split(":")[0]: v for k, v in stream.items()}
    assert verdicts["rope"] == "met" and verdicts["sinusoidal"] == "not met" and verdicts["none"] == "not met"
    assert verdicts["learned"] == "undecided"  # 0.3 on average, but the seeds disagree
    best = [v for k, v in stream.items() if k.startswith("best positional scheme (rope)")]
    assert best == ["met"]  # rope is 0.2 below none, paired
    sin = [v for k, v in stream.items() if k.startswith("sinusoidal within")]
    assert sin == ["not met"]  # 0.7 above rope
    with pytest.raises(TypeError, match="list of dicts"):
        TR.text_criteria(pd.DataFrame({"scheme": ["rope"]}))


def test_gain_by_size_and_paired_tables_cover_both_sizes():
    small = _results({"rope": 0.2, "none": 0.1}, {"rope": 0.0, "none": 0.1})
    large = _results({"rope": 0.4, "none": 0.1}, {"rope": -0.1, "none": 0.1}, kind="text_large", n_layers=4)
    est = TR.text_estimates(small + large, n_boot=300)
    table = TR.gain_by_size_table(small + large, est)
    assert list(table.columns) == [
        "windows",
        "scheme",
        "text (2 layers), 2,000 params",
        "text_large (4 layers), 4,000 params",
    ]
    row = table[(table.windows == "stream") & (table.scheme == "rope - none (paired)")].iloc[0]
    small_gain = float(row.iloc[2].split()[0])
    large_gain = float(row.iloc[3].split()[0])
    assert small_gain == pytest.approx(0.1, abs=0.01) and large_gain == pytest.approx(0.3, abs=0.01)
    paired = TR.text_paired_table(est)
    assert set(paired.kind) == {"text", "text_large"} and set(paired.scheme) == {"rope"}


def test_binned_bands_bracket_the_mean():
    rng = np.random.default_rng(0)
    curve = 4 + rng.normal(0, 0.3, size=(2, 64, 31))
    d = T.draws(2, 64, 300, seed=0)
    b = TR.binned_bands(curve, d, bin_width=8)
    assert list(b.position) == [3.5, 11.5, 19.5, 27.0]  # the last bin holds positions 24..30
    assert (b.lo < b.loss).all() and (b.loss < b.hi).all()
    np.testing.assert_allclose(b.loss.iloc[-1], curve[:, :, 24:].mean())


def test_the_band_figure_takes_an_extra_curve_and_refuses_results_without_windows(tmp_path):
    results = _results({"rope": 0.3, "none": 0.1}, {"rope": -0.1, "none": 0.0}, seeds=(0, 1))
    anchor = pd.DataFrame({"position": np.arange(31), "loss": np.linspace(5, 4, 31)})
    path = TR.plot_text_bands(results, tmp_path / "bands.png", extra_curves={"SmolLM2 (anchor)": anchor}, n_boot=100)
    assert path.exists() and path.stat().st_size > 0
    with pytest.raises(ValueError, match="per-window losses on 'stream'"):
        TR.plot_text_bands([{"kind": "text", "scheme": "rope", "seed": 0}], tmp_path / "none.png")
    with pytest.raises(ValueError, match="windows='tokens'"):
        TR.window_arrays(results, "text", "tokens")
