"""Intervals for the natural-text models of the positional study: a bootstrap over
seeds and held-out windows.

A model's loss at a position varies from window to window (some text is easy) and from seed to
seed (initialisation and batch order). Tokens are clustered in windows, so the unit resampled is
the window, and the seeds are resampled beside it: each bootstrap draw picks ``k`` seeds with
replacement and ``n`` windows with replacement, and averages. Seeds and windows are crossed, not
nested: every seed is scored on the same held-out windows, so a window's difficulty is shared by
all seeds, and one draw applies the same window weights to every picked seed (resampling windows
anew for each seed would average that shared difficulty over k independent draws and make the
interval about sqrt(k) too narrow; a test checks it). Every scheme is scored on those windows too,
so the same draws are applied to every scheme (``draws`` is made once and shared): differences
between schemes are then paired, and the window-to-window jitter that all schemes share cancels.

>>> d = draws(n_seeds=3, n_windows=512, n_boot=2000, seed=0)
>>> lo, hi = interval(boot_means(gains_rope, d))  # gains_rope: [3 seeds, 512 windows]
>>> lo, hi = interval(boot_means(late_rope - late_none, d))  # paired difference
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
N_BOOT = 2000


@dataclass(frozen=True)
class Draws:
    """One set of bootstrap draws: ``seeds[b, i]`` is the seed picked for slot i of draw b and
    ``weights[b, i, w]`` how often window w was picked for it (each row sums to n_windows)."""

    seeds: np.ndarray  # [n_boot, n_seeds] int
    weights: np.ndarray  # [n_boot, n_seeds, n_windows] int

    @property
    def shape(self) -> tuple[int, int]:
        return self.weights.shape[1], self.weights.shape[2]


def draws(n_seeds: int, n_windows: int, n_boot: int = N_BOOT, seed: int = 0) -> Draws:
    """Bootstrap draws for data of shape [n_seeds, n_windows] (seeded: reproducible): seeds and
    windows resampled independently, the same window weights for every seed of a draw (crossed)."""
    for name, v in (("n_seeds", n_seeds), ("n_windows", n_windows), ("n_boot", n_boot)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}={v!r}; expected a positive integer")
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, n_seeds, size=(n_boot, n_seeds))
    windows = resample_counts(n_windows, n_boot, rng)
    return Draws(seeds, np.repeat(windows[:, None, :], n_seeds, axis=1))


def resample_counts(n_units: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """[n_boot, n_units]: how often each unit (a window, a passage) is drawn in each of ``n_boot``
    resamples of ``n_units`` draws with replacement. A statistic that is a sum (or a ratio of sums)
    over units is then one matrix product per resample set, every bin on the same resamples."""
    return rng.multinomial(n_units, np.full(n_units, 1 / n_units), size=n_boot)


def boot_means(values: np.ndarray, d: Draws) -> np.ndarray:
    """The bootstrap distribution of the grand mean of ``values`` [n_seeds, n_windows, *rest]
    (mean over seeds of the mean over windows), one per draw: [n_boot, *rest]."""
    x = np.asarray(values, dtype=float)
    k, n = d.shape
    if x.ndim < 2 or x.shape[:2] != (k, n):
        raise ValueError(f"values have shape {x.shape}; the draws need [n_seeds={k}, n_windows={n}, ...]")
    rest = x.shape[2:]
    flat = x.reshape(k, n, -1)
    out = np.zeros((d.seeds.shape[0], flat.shape[2]))
    for slot in range(k):
        for s in range(k):
            pick = d.seeds[:, slot] == s
            if pick.any():
                out[pick] += d.weights[pick, slot, :] @ flat[s]
    return (out / (k * n)).reshape(-1, *rest)


def interval(boot: np.ndarray, level: float = LEVEL) -> tuple:
    """Percentile interval of a bootstrap distribution (along axis 0; resamples where a ratio is
    undefined, NaN, are left out)."""
    if not 0 < level < 1:
        raise ValueError(f"level={level!r}; expected a probability in (0, 1), e.g. 0.95")
    lo, hi = np.nanquantile(np.asarray(boot, dtype=float), [(1 - level) / 2, (1 + level) / 2], axis=0)
    return (float(lo), float(hi)) if np.ndim(lo) == 0 else (lo, hi)


def estimate(values: np.ndarray, d: Draws, level: float = LEVEL) -> dict:
    """Point estimate (the grand mean) and interval: {"mean", "lo", "hi"}."""
    x = np.asarray(values, dtype=float)
    lo, hi = interval(boot_means(x, d), level)
    return {"mean": float(x.mean()), "lo": lo, "hi": hi}


def verdict(lo: float, hi: float, threshold: float, above: bool = True) -> str:
    """ "met" when the whole interval is on the right side of ``threshold`` (>= it when ``above``,
    <= it otherwise), "not met" when the whole interval is on the wrong side, else "undecided"."""
    if above:
        return "met" if lo >= threshold else "not met" if hi < threshold else "undecided"
    return "met" if hi <= threshold else "not met" if lo > threshold else "undecided"


def fmt(e: dict, digits: int = 3) -> str:
    """ "mean [lo, hi]"."""
    return f"{e['mean']:.{digits}f} [{e['lo']:.{digits}f}, {e['hi']:.{digits}f}]"
