"""The 1/sqrt(d) scale: saturation and vanishing gradients without it."""

import math

import pytest
import torch

from analyses.invariance import scale as sc
from analyses.invariance.common import generator


def test_softmax_stats_match_closed_forms():
    gen = generator(0)
    q = torch.zeros(3, 5, dtype=torch.float64)  # all scores 0: uniform rows
    k = torch.randn(7, 5, generator=gen, dtype=torch.float64)
    s = sc.softmax_stats(q, k, scaled=True, gen=generator(1))
    assert s["entropy"] == pytest.approx(1.0)
    assert s["max_weight"] == pytest.approx(1 / 7)
    # gradient w.r.t. the scores of y = u.(p V): (diag p - p p^T) V u, recomputed independently
    v = torch.randn(7, 8, generator=(g := generator(1)), dtype=torch.float64)
    u = torch.randn(8, generator=g, dtype=torch.float64)
    p = torch.full((7,), 1 / 7, dtype=torch.float64)
    expected = ((torch.diag(p) - torch.outer(p, p)) @ v @ u).norm().item()
    assert s["grad_scores"] == pytest.approx(expected, rel=1e-10)


def test_one_hot_rows_have_zero_entropy_and_gradient():
    q = torch.tensor([[100.0, 0.0]], dtype=torch.float64)
    k = torch.tensor([[10.0, 0.0], [0.0, 0.0], [-10.0, 0.0]], dtype=torch.float64)
    s = sc.softmax_stats(q, k, scaled=False, gen=generator(0))
    assert s["entropy"] < 1e-100 and s["grad_scores"] < 1e-100


def test_random_sweep_unscaled_saturates_scaled_does_not():
    sw = sc.random_sweep(dims=(4, 64, 1024), n_queries=128, seed=0)
    un = sw[~sw.scaled].set_index("d")
    sc_ = sw[sw.scaled].set_index("d")
    assert un.entropy.is_monotonic_decreasing
    assert un.entropy[1024] < 0.1 and sc_.entropy[1024] > 0.7
    assert un.grad_scores[1024] < 0.01 * sc_.grad_scores[1024]
    # scaled: about the same entropy at every d (unit-variance scores)
    assert sc_.entropy.max() - sc_.entropy.min() < 0.05
    rows = sc.scale_rows("random", sw)
    assert rows.passed.all()


def test_real_sweep_uses_the_heads_of_the_model(minilm):
    q, k = sc.real_qk(minilm, layer=1)
    assert q.shape[1] == k.shape[1] == minilm.cfg.n_heads * minilm.cfg.d_head
    sw = sc.real_sweep(minilm, layer=1)
    assert sw.d.max() == 384
    un = sw[~sw.scaled].set_index("d")
    assert un.entropy[384] < 0.01
    assert math.isfinite(sw.grad_queries.max())
