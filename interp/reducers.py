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

Sharded runs (``merge``): every sum that is not a count is kept in **compensated fp64**, a pair
``hi + lo`` (TwoSum, Knuth; Ogita, Rump & Oishi 2005), so its error is about n x 2^-106 of the sum of
magnitudes instead of n x 2^-53, and partial sums from N workers merge through the same TwoSum. The
merged sums therefore round to the same double as the single-process ones (exactly, unless the true
sum lies within that tiny error of a rounding boundary), and the guarantee the tests state is: counts
and bootstrap weight sums bitwise (integers in fp64), means equal to 1e-12 relative whatever N is
(in practice bitwise). Bootstrap weights are drawn per unit (``PoissonBootstrap.weights_for``: seeded
by the unit's index, not by the worker or the batch), so a sharded run draws the same weights.

Query blocks (``RowBlocks``): at long context a layer's pattern arrives in blocks of query rows
(``models.blockwise.pattern_blocks``; ``hook.query_rows`` says which). A per-unit score that is a
sum over query rows is then the sum of the blocks' partial sums: ``RowBlocks`` adds them up per
layer and hands back the totals once the last block is in, so a hook reduces each block as it comes
and the reducers above see one per-unit score per layer, as without blocks. Memory: the partial
sums (per unit, like the scores), never a [query_pos, key_pos] pattern.

Nothing here knows about models or roles: cells are just a tensor shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from interp.distributed import World
from interp.hooks import QueryRows

__all__ = ["PoissonBootstrap", "PairedReducer", "PairedSummary", "RowBlocks"]


class PoissonBootstrap:
    """Draws the per-unit bootstrap weights, deterministically from a seed and the order of units."""

    def __init__(self, n_boot: int = 200, seed: int = 0) -> None:
        if n_boot < 0:
            raise ValueError(f"n_boot must be >= 0, got {n_boot}")
        self.n_boot = n_boot
        self._gen = torch.Generator().manual_seed(seed)
        self.seed = seed

    def weights(self, n_units: int) -> Tensor:
        """[n_units, n_boot] float64 Poisson(1) weights for the next ``n_units`` units (a stream: the
        weights depend on the order in which units arrive)."""
        return torch.poisson(torch.ones(n_units, self.n_boot, dtype=torch.float64), generator=self._gen)

    def weights_for(self, units: Sequence[int]) -> Tensor:
        """[len(units), n_boot] float64 Poisson(1) weights, each row seeded by (seed, unit index)
        alone: the same unit gets the same weights whichever batch or worker it lands in."""
        out = np.empty((len(units), self.n_boot), dtype=np.float64)
        for row, unit in enumerate(units):
            if int(unit) < 0:
                raise ValueError(f"unit indices must be >= 0, got {unit}")
            out[row] = np.random.default_rng([self.seed, int(unit)]).poisson(1.0, self.n_boot)
        return torch.from_numpy(out)


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
                # nan only where a replicate drew no unit for a cell (tiny n, or a cell with no unit at
                # all); nanquantile is slow (a Python loop over cells), so it runs on those cells only
                boot = self.boot_means.reshape(self.boot_means.shape[0], -1)
                lo, hi = np.full(boot.shape[1], np.nan), np.full(boot.shape[1], np.nan)
                has_nan = np.isnan(boot).any(0)
                whole = ~has_nan
                if whole.any():
                    lo[whole], hi[whole] = np.quantile(boot[:, whole], [a, 1 - a], axis=0)
                some = has_nan & ~np.isnan(boot).all(0)
                if some.any():
                    lo[some], hi[some] = np.nanquantile(boot[:, some], [a, 1 - a], axis=0)
        shape = self.boot_means.shape[1:]
        return lo.reshape(shape), hi.reshape(shape)


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
        # the low parts of the compensated sums (n and boot_w sum integers: exact in fp64 alone)
        self._lo = {key: torch.zeros_like(hi) for key, hi in self._compensated().items()}

    def _compensated(self) -> dict[str, Tensor]:
        return {"s": self.s, "b": self.b, "d": self.d, "d2": self.d2, "boot_s": self.boot_s} | {
            f"extra.{k}": v for k, v in self.extra.items()
        }

    def _add(self, key: str, index: tuple, x: Tensor) -> None:
        """hi[index] + lo[index] += x, with TwoSum: hi keeps the rounded sum, lo the rounding errors.
        In place on views, two temporaries: this runs on [n_boot, *cells] once per batch."""
        hi, lo = self._compensated()[key][index], self._lo[key][index]
        t = hi + x
        bb = t - hi
        err = t - bb
        torch.sub(hi, err, out=err)  # hi - (t - bb)
        torch.sub(x, bb, out=bb)  # x - bb
        err += bb
        lo += err
        hi.copy_(t)

    def _total(self, key: str) -> np.ndarray:
        return (self._compensated()[key] + self._lo[key]).numpy()

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
        idx = _as_tuple(index)
        self.n[idx] += v.sum(0)
        self._add("s", idx, s.sum(0))
        self._add("b", idx, b.sum(0))
        self._add("d", idx, d.sum(0))
        self._add("d2", idx, (d * d).sum(0))
        if self.n_boot:
            w = boot_weights.to(torch.float64)
            flat_s, flat_v = s.reshape(s.shape[0], -1), v.reshape(v.shape[0], -1)
            shape = (self.n_boot,) + tuple(s.shape[1:])
            self._add("boot_s", (slice(None),) + idx, (w.T @ flat_s).reshape(shape))
            self.boot_w[(slice(None),) + idx] += (w.T @ flat_v).reshape(shape)
        for name, value in (extra or {}).items():
            x = value.detach().to(torch.float64)
            self._add(f"extra.{name}", idx, torch.where(v > 0, x, torch.zeros_like(x)).sum(0))

    def merge(self, world: World) -> None:
        """Sum this reducer over the workers of ``world`` (``interp.distributed``), in place on every
        rank: counts added, compensated sums merged with TwoSum in rank order. Every worker must have
        reduced a disjoint share of the units with the same cells and ``n_boot``."""
        if world.size == 1:
            return
        keys = list(self._compensated())
        exact = [self.n, self.boot_w]
        his = [self._compensated()[k] for k in keys]
        los = [self._lo[k] for k in keys]
        k = len(keys)

        def add(acc: list[Tensor], other: list[Tensor]) -> None:
            for a, b in zip(acc[:2], other[:2]):
                a += b
            for j in range(k):
                hi, lo, hi_b, lo_b = acc[2 + j], acc[2 + k + j], other[2 + j], other[2 + k + j]
                t, err = _two_sum(hi, hi_b)
                hi.copy_(t)
                lo += lo_b + err

        world.sum_(exact + his + los, add=add)

    def summary(self) -> PairedSummary:
        n = self.n.numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            score = self._total("s") / n
            baseline = self._total("b") / n
            mean_diff = self._total("d") / n
            var = (self._total("d2") - n * mean_diff**2) / (n - 1)
            sd = np.sqrt(np.clip(var, 0.0, None))
            boot_w = self.boot_w.numpy()
            boot = np.where(boot_w > 0, self._total("boot_s") / boot_w, np.nan)
            extra = {k: self._total(f"extra.{k}") / n for k in self.extra}
        return PairedSummary(
            n=n, score=score, baseline=baseline, mean_diff=mean_diff, sd_diff=sd, boot_means=boot, extra=extra
        )

    def nbytes(self) -> int:
        tensors = [self.n, self.boot_w, *self._compensated().values(), *self._lo.values()]
        return sum(t.numel() * t.element_size() for t in tensors)


class RowBlocks:
    """Partial per-unit sums over query blocks, added up per key (e.g. a layer) until the block that
    completes the rows arrives. ``add(key, rows, parts)``: ``parts`` name -> tensor (each the sum
    over this block's query rows; the same names and shapes every block), ``rows`` the block's
    ``interp.hooks.QueryRows`` (None: the whole set of rows at once). Returns the totals when the
    rows are complete, else None. Blocks of one key must come in order, without gaps or overlaps
    (as ``pattern_blocks`` hands them): anything else is an error, since a missing block would
    silently bias every score."""

    def __init__(self) -> None:
        self._open: dict = {}  # key -> (next start, n, sums)

    def add(self, key: object, rows: QueryRows | None, parts: dict[str, Tensor]) -> dict[str, Tensor] | None:
        if rows is None:
            if key in self._open:
                raise RuntimeError(f"{key}: a whole set of rows arrived while blocks of it were still open")
            return dict(parts)
        start, n, sums = self._open.pop(key, (0, rows.n, None))
        if rows.start != start or rows.n != n or not start < rows.stop <= n:
            raise RuntimeError(
                f"{key}: query rows {rows.start}:{rows.stop} of {rows.n} arrived; expected rows from {start} of {n}"
            )
        if sums is None:
            sums = {name: t.clone() for name, t in parts.items()}
        else:
            if parts.keys() != sums.keys():
                raise RuntimeError(f"{key}: the blocks' parts differ ({sorted(parts)} vs {sorted(sums)})")
            for name, t in parts.items():
                sums[name] += t
        if rows.stop == n:
            return sums
        self._open[key] = (rows.stop, n, sums)
        return None

    @property
    def pending(self) -> list:
        """The keys with blocks still open (a forward that ended here lost rows)."""
        return sorted(self._open)

    def clear(self) -> None:
        self._open.clear()


def _two_sum(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """(a + b rounded, its exact rounding error): Knuth's TwoSum, no branch on magnitudes."""
    t = a + b
    bb = t - a
    return t, (a - (t - bb)) + (b - bb)


def _as_tuple(index: int | slice | tuple) -> tuple:
    return index if isinstance(index, tuple) else (index,)
