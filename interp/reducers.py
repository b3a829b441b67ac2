"""Streaming reducers: statistics accumulated batch by batch inside hooks, so no activation cache is
ever kept and memory does not grow with the number of sentences.

The unit of resampling is a *unit* (a sentence, a random token sequence). Each reducer keeps, per
cell (e.g. per test x layer x head), running sums of a per-unit score ``s``, of a paired per-unit
baseline ``b`` and of their difference ``d = s - b`` (with sums of squares, for a paired test), and a
**Poisson bootstrap** (Chamandy et al., 2012; Hanley & MacGibbon, 2006): every unit gets ``n_boot``
independent Poisson(1) weights, drawn once per batch and shared by every cell and every hook, and each
replicate keeps its own weighted sums. That is the streaming equivalent of resampling units with
replacement: replicate means are what an ordinary bootstrap over units would give, without storing
per-unit values. Memory: ``O(n_boot x cells)``, constant in the number of units.

Nothing here knows about models or roles: cells are just a tensor shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = ["PoissonBootstrap", "PairedReducer", "PairedSummary"]


class PoissonBootstrap:
    """Draws the per-unit bootstrap weights, deterministically from a seed and the order of units."""

    def __init__(self, n_boot: int = 200, seed: int = 0) -> None:
        if n_boot < 0:
            raise ValueError(f"n_boot must be >= 0, got {n_boot}")
        self.n_boot = n_boot
        self._gen = torch.Generator().manual_seed(seed)

    def weights(self, n_units: int) -> Tensor:
        """[n_units, n_boot] float64 Poisson(1) weights for the next ``n_units`` units."""
        return torch.poisson(torch.ones(n_units, self.n_boot, dtype=torch.float64), generator=self._gen)


@dataclass
class PairedSummary:
    """Per-cell results (numpy arrays of the cell shape; ``boot_means`` has a leading replicate axis)."""

    n: np.ndarray  # units that contributed
    score: np.ndarray  # mean s
    baseline: np.ndarray  # mean b
    mean_diff: np.ndarray  # mean (s - b)
    sd_diff: np.ndarray  # sample standard deviation of (s - b), ddof=1
    boot_means: np.ndarray  # [n_boot, *cells] replicate means of s (nan where a replicate drew no unit)
    extra: dict  # name -> mean of each extra quantity

    def ci(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Percentile bootstrap interval of the mean score."""
        if self.boot_means.shape[0] == 0:
            nan = np.full(self.score.shape, np.nan)
            return nan, nan
        a = (1 - level) / 2
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                # nan only where a replicate drew no unit for a cell (tiny n); nanquantile is slow
                q = np.nanquantile if np.isnan(self.boot_means).any() else np.quantile
                lo = q(self.boot_means, a, axis=0)
                hi = q(self.boot_means, 1 - a, axis=0)
        return lo, hi


class PairedReducer:
    """Running paired statistics over units for a grid of cells.

    ``cells``: shape of the grid, e.g. ``(n_tests, n_layers, n_heads)``. Updates write a slice of it
    (``index``), e.g. one layer from inside that layer's hook.
    """

    def __init__(self, cells: Sequence[int], n_boot: int = 200, extras: Sequence[str] = ()) -> None:
        self.cells = tuple(cells)
        self.n_boot = n_boot
        z = lambda *lead: torch.zeros(*lead, *self.cells, dtype=torch.float64)  # noqa: E731
        self.n, self.s, self.b, self.d, self.d2 = z(), z(), z(), z(), z()
        self.boot_s, self.boot_w = z(n_boot), z(n_boot)
        self.extra = {name: z() for name in extras}

    def update(
        self,
        index: int | slice | tuple,
        scores: Tensor,  # [unit, *slice_cells]
        baseline: Tensor,  # broadcastable to scores
        valid: Tensor,  # [unit, ...] bool, broadcastable to scores: which units count for which cell
        boot_weights: Tensor,  # [unit, n_boot]
        extra: dict | None = None,  # name -> tensor like scores
    ) -> None:
        s = scores.detach().to(torch.float64)
        v = torch.broadcast_to(valid.detach().to(torch.float64), s.shape)
        s = torch.where(v > 0, s, torch.zeros_like(s))  # nan/garbage in invalid cells never leaks in
        b = torch.where(v > 0, torch.broadcast_to(baseline.detach().to(torch.float64), s.shape), torch.zeros_like(s))
        d = s - b
        self.n[index] += v.sum(0)
        self.s[index] += s.sum(0)
        self.b[index] += b.sum(0)
        self.d[index] += d.sum(0)
        self.d2[index] += (d * d).sum(0)
        if self.n_boot:
            w = boot_weights.to(torch.float64)
            flat_s, flat_v = s.reshape(s.shape[0], -1), v.reshape(v.shape[0], -1)
            shape = (self.n_boot,) + tuple(s.shape[1:])
            self.boot_s[(slice(None),) + _as_tuple(index)] += (w.T @ flat_s).reshape(shape)
            self.boot_w[(slice(None),) + _as_tuple(index)] += (w.T @ flat_v).reshape(shape)
        for name, value in (extra or {}).items():
            x = value.detach().to(torch.float64)
            self.extra[name][index] += torch.where(v > 0, x, torch.zeros_like(x)).sum(0)

    def summary(self) -> PairedSummary:
        n = self.n.numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            score = self.s.numpy() / n
            baseline = self.b.numpy() / n
            mean_diff = self.d.numpy() / n
            var = (self.d2.numpy() - n * mean_diff**2) / (n - 1)
            sd = np.sqrt(np.clip(var, 0.0, None))
            boot = np.where(self.boot_w.numpy() > 0, self.boot_s.numpy() / self.boot_w.numpy(), np.nan)
            extra = {k: v.numpy() / n for k, v in self.extra.items()}
        return PairedSummary(
            n=n, score=score, baseline=baseline, mean_diff=mean_diff, sd_diff=sd, boot_means=boot, extra=extra
        )

    def nbytes(self) -> int:
        tensors = [self.n, self.s, self.b, self.d, self.d2, self.boot_s, self.boot_w, *self.extra.values()]
        return sum(t.numel() * t.element_size() for t in tensors)


def _as_tuple(index: int | slice | tuple) -> tuple:
    return index if isinstance(index, tuple) else (index,)
