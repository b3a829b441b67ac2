"""Streaming reducers equal their in-memory counterparts and keep constant memory."""

from __future__ import annotations

import numpy as np
import torch

from interp.reducers import PairedReducer, PoissonBootstrap


def _stream(scores, base, valid, n_boot=50, batch=7, seed=0):
    red = PairedReducer((2, 3), n_boot=n_boot, extras=("mass",))
    boot = PoissonBootstrap(n_boot, seed)
    weights = []
    for i in range(0, scores.shape[0], batch):
        w = boot.weights(scores[i : i + batch].shape[0])
        weights.append(w)
        red.update(
            slice(None),
            scores[i : i + batch],
            base[i : i + batch, None, None],
            valid[i : i + batch, :, None],
            w,
            extra={"mass": scores[i : i + batch] * 2},
        )
    return red, torch.cat(weights)


def test_streaming_equals_in_memory():
    g = torch.Generator().manual_seed(0)
    n = 40
    scores = torch.rand(n, 2, 3, generator=g)
    base = torch.rand(n, generator=g)
    valid = torch.rand(n, 2, generator=g) > 0.3
    red, w = _stream(scores, base, valid)
    out = red.summary()
    for t in range(2):
        keep = valid[:, t]
        s, b = scores[keep, t].double(), base[keep].double()
        d = s - b[:, None]
        np.testing.assert_allclose(out.n[t], keep.sum().item())
        np.testing.assert_allclose(out.score[t], s.mean(0).numpy(), rtol=1e-12)
        np.testing.assert_allclose(out.baseline[t], b.mean().item(), rtol=1e-12)
        np.testing.assert_allclose(out.sd_diff[t], d.std(0, unbiased=True).numpy(), rtol=1e-9)
        np.testing.assert_allclose(out.extra["mass"][t], 2 * s.mean(0).numpy(), rtol=1e-12)
        # replicate r's mean is the Poisson-weighted mean over the valid units
        wv = w[keep]
        ref = (wv.T @ s) / wv.sum(0)[:, None]
        np.testing.assert_allclose(out.boot_means[:, t], ref.numpy(), rtol=1e-10)


def test_batch_size_does_not_change_the_result():
    g = torch.Generator().manual_seed(1)
    scores, base = torch.rand(30, 2, 3, generator=g), torch.rand(30, generator=g)
    valid = torch.ones(30, 2, dtype=torch.bool)
    a = _stream(scores, base, valid, batch=30)[0].summary()
    b = _stream(scores, base, valid, batch=4)[0].summary()
    np.testing.assert_allclose(a.score, b.score, rtol=1e-12)
    # same weights per unit regardless of batching: same replicates
    np.testing.assert_allclose(a.boot_means, b.boot_means, rtol=1e-10)


def test_poisson_bootstrap_interval_covers():
    """400 simulated data sets side by side as cells (each its own units' values): the 95% interval
    holds the true mean about 95% of the time."""
    rng = np.random.default_rng(0)
    hits = 0
    for rep in range(2):
        x = torch.from_numpy(rng.beta(2, 5, (100, 200)))
        red = PairedReducer((200,), n_boot=300)
        w = PoissonBootstrap(300, seed=rep).weights(100)
        red.update(slice(None), x, torch.zeros(100, 1), torch.ones(100, 1, dtype=torch.bool), w)
        lo, hi = red.summary().ci(0.95)
        hits += ((lo <= 2 / 7) & (2 / 7 <= hi)).sum()
    assert 0.91 <= hits / 400 <= 0.98


def test_memory_is_constant_in_the_number_of_units():
    red = PairedReducer((4, 6, 12), n_boot=100)
    before = red.nbytes()
    boot = PoissonBootstrap(100, 0)
    for _ in range(20):
        red.update(
            slice(None),
            torch.rand(32, 4, 6, 12),
            torch.rand(32, 1, 1, 1),
            torch.ones(32, 4, 1, 1, dtype=torch.bool),
            boot.weights(32),
        )
    assert red.nbytes() == before
    assert red.summary().n.max() == 640


def test_invalid_units_leave_no_trace_even_if_nan():
    red = PairedReducer((1,), n_boot=5)
    s = torch.tensor([[0.5], [float("nan")]])
    red.update(
        slice(None), s, torch.zeros(2, 1), torch.tensor([[True], [False]]), torch.ones(2, 5, dtype=torch.float64)
    )
    out = red.summary()
    assert out.n[0] == 1 and out.score[0] == 0.5 and np.isfinite(out.boot_means).all()


def test_the_interval_is_nanquantile_per_cell_whatever_mix_of_nans():
    """Cells without a nan replicate, cells with some and cells with only nans (no unit at all) in one
    summary: each cell's interval is what np.nanquantile gives for that cell alone."""
    from interp.reducers import PairedSummary

    rng = np.random.default_rng(0)
    boot = rng.normal(size=(200, 3, 4))
    boot[rng.random(boot.shape) < 0.1] = np.nan  # some replicates drew no unit
    boot[:, 0, 0] = rng.normal(size=200)  # a clean cell
    boot[:, 2, 3] = np.nan  # a cell with no unit
    z = np.zeros((3, 4))
    summ = PairedSummary(n=z, score=z, baseline=z, mean_diff=z, sd_diff=z, boot_means=boot, extra={})
    lo, hi = summ.ci(0.95)
    for i in range(3):
        for j in range(4):
            if (i, j) == (2, 3):
                assert np.isnan(lo[i, j]) and np.isnan(hi[i, j])
                continue
            want = np.nanquantile(boot[:, i, j], [0.025, 0.975])
            np.testing.assert_allclose([lo[i, j], hi[i, j]], want, rtol=0, atol=1e-12)
