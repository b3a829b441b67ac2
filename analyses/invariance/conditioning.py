"""Conditioning of the W_Q/W_K change of basis: W_Q -> W_Q A, W_K -> W_K A^-T with cond(A) = c
leaves the scores unchanged in exact arithmetic, and in floating point moves them by an error that
grows linearly in cond(A) (``conditioning_sweep``: the sweep over c, its a-priori bound, the rows
of the invariance table, the negative control W_K A instead of A^-T, and the figure).

The rotations themselves (``transform_heads``, the whole-model checks) live in
``analyses.invariance.rotation``; what the invariance means for reading a head's weights in
``analyses.invariance.interpretation``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from analyses.invariance.common import (
    U32,
    U64,
    attention_inputs,
    gamma,
    generator,
    make_row,
    model_tokens,
    random_invertible,
    relerr,
    unit_roundoff,
)
from analyses.invariance.rotation import group_of
from interp.view import view

__all__ = [
    "score_bound_constant",
    "conditioning_sweep",
    "conditioning_rows",
    "conditioning_negative",
    "conditioning_figure",
]


def score_bound_constant(d_model: int, d_head: int, u: float) -> float:
    """gamma for the normalised score error of W_Q A, W_K A^-T (see ``conditioning_sweep``)."""
    return 2 * gamma(d_model + 1, u) + 2 * u + gamma(d_head, u)


def conditioning_sweep(
    model,
    tokens: Tensor | None = None,
    conds=(1.0, 1e2, 1e4, 1e6),
    layers=None,
    seed: int = 0,
    dtypes=(torch.float32, torch.float64),
) -> pd.DataFrame:
    """Pre-position (no RoPE) bilinear scores s = (x W_Q + b_Q)(x W_K + b_K)^T of every head, after
    W_Q -> W_Q A, W_K -> W_K A^-T with cond(A) = c, against the original in fp64.

    Tolerance derivation (Higham's model, |delta| <= u per operation). With x~ = [x, 1] and
    W~ = [W; b], the transformed weights are computed in fp64 and rounded once: |dW| <= u |W~A|. The
    projection q' = fl(x~ fl(W~A)) has |q' - x~W~A| <= (gamma_{m+1} + u) |x~| |W~A| elementwise, so
    ||dq'|| <= (gamma_{m+1} + u) ||x~|| ||W~A||_F (Cauchy-Schwarz), and the same for k'. The dot
    product adds gamma_d ||q'|| ||k'||. Hence

        |s'_ij - s_ij| <= (2 gamma_{m+1} + 2u + gamma_d) ||x~_i|| ||x~_j|| ||W~_Q A||_F ||W~_K A^-T||_F

    to first order, and ``||W~_Q A||_F ||W~_K A^-T||_F <= ||W~_Q||_F ||W~_K||_F cond_2(A)``: the
    error bound grows linearly in cond(A). The fp64 reference carries the same bound with u64 and A = I,
    added to the denominator. ``value`` is max_ij |s'-s| / N_ij with N_ij the norm product;
    ``tolerance`` is the constant in front (m = d_model, d = d_head).
    """
    name = view(model).name
    cfg = model.cfg
    tokens = model_tokens(model) if tokens is None else tokens
    xs = attention_inputs(model, tokens)
    layers = range(cfg.n_layers) if layers is None else layers
    gen = generator(seed)
    prepared = [_ScoreInputs.of(model, xs, l) for l in layers]
    rows = []
    for c in conds:
        a = random_invertible(cfg.d_head, c, gen)
        a_it = torch.linalg.inv(a).T
        cond_measured = torch.linalg.cond(a).item()
        for dtype in dtypes:
            u = unit_roundoff(dtype)
            worst_norm, worst_rel = 0.0, 0.0
            for p in prepared:
                norm_err, rel_err = p.errors(a, a_it, dtype, u)
                worst_norm = max(worst_norm, norm_err)
                worst_rel = max(worst_rel, rel_err)
            rows.append(
                dict(
                    model=name,
                    cond=c,
                    cond_measured=cond_measured,
                    dtype=str(dtype).replace("torch.", ""),
                    normalized_error=worst_norm,
                    relative_error=worst_rel,
                    relative_error_over_u_cond=worst_rel / (u * cond_measured),
                    bound=score_bound_constant(cfg.d_model, cfg.d_head, u),
                )
            )
    return pd.DataFrame(rows)


def _norm_product(xn: Tensor, wq: Tensor, wk: Tensor) -> Tensor:
    """N_ij = ||x~_i|| ||x~_j|| ||W~_Q||_F ||W~_K||_F per head: [head, pos, pos]."""
    return xn[None, :, None] * xn[None, None, :] * (wq.norm(dim=(1, 2)) * wk.norm(dim=(1, 2)))[:, None, None]


@dataclass(frozen=True)
class _ScoreInputs:
    """One layer's pre-position scores in float64: x~ [pos, m+1], W~_Q [head, m+1, d], W~_K per query
    head, the reference scores [head, pos, pos], ||x~_i|| and the norm product N (``_norm_product``)."""

    x: Tensor
    wq: Tensor
    wk: Tensor
    s_ref: Tensor
    xn: Tensor
    n_0: Tensor

    @classmethod
    def of(cls, model, xs: list[Tensor], layer: int) -> _ScoreInputs:
        attn = model.blocks[layer].attn
        x = torch.cat([xs[layer][0].double(), torch.ones(xs[layer].shape[1], 1, dtype=torch.float64)], 1)
        wq, wk = _augment(attn.W_Q, attn.b_Q), _augment(attn.W_K, attn.b_K)[group_of(model.cfg)]
        s_ref = (x @ wq) @ (x @ wk).transpose(-1, -2)
        xn = x.norm(dim=1)
        return cls(x, wq, wk, s_ref, xn, _norm_product(xn, wq, wk))

    def errors(self, a: Tensor, a_it: Tensor, dtype: torch.dtype, u: float) -> tuple[float, float]:
        """(max normalised error, relative error) of the scores after W_Q A, W_K A^-T, computed in
        ``dtype`` (weights transformed in fp64, rounded once); the fp64 reference's own bound
        (u64, A = I) is added to the denominator."""
        wq_a64, wk_a64 = self.wq @ a, self.wk @ a_it
        xd = self.x.to(dtype)
        s = ((xd @ wq_a64.to(dtype)) @ (xd @ wk_a64.to(dtype)).transpose(-1, -2)).double()
        denom = _norm_product(self.xn, wq_a64, wk_a64) + (U64 / u) * self.n_0
        return ((s - self.s_ref).abs() / denom).max().item(), relerr(s, self.s_ref)


def _augment(w: Tensor, b: Tensor | None) -> Tensor:
    """[head, m, d] weights and [head, d] bias -> [head, m+1, d] in float64 (bias as the last row)."""
    w = w.detach().double()
    b = torch.zeros(w.shape[0], w.shape[2], dtype=torch.float64) if b is None else b.detach().double()
    return torch.cat([w, b[:, None, :]], dim=1)


def conditioning_rows(model, sweep: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in sweep.itertuples():
        rows.append(
            make_row(
                view(model).name,
                "rotation: W_Q A, W_K A^-T (conditioning)",
                f"normalised score error, cond(A) = {r.cond:.0e}",
                r.normalized_error,
                r.bound,
                "holds",
                dtype=r.dtype,
                rule="(2 gamma_{d_model+1} + 2u + gamma_{d_head}), a-priori bound (see conditioning_sweep)",
                detail=(
                    f"relative score error {r.relative_error:.1e} = {r.relative_error_over_u_cond:.2f} * u * cond(A), "
                    f"cond(A) = {r.cond_measured:.3g}"
                ),
            )
        )
    return pd.DataFrame(rows)


def conditioning_negative(model, tokens: Tensor | None = None, seed: int = 0) -> pd.DataFrame:
    """Negative control for the sweep's metric: W_K A instead of A^-T, cond 10, fp32."""
    cfg = model.cfg
    tokens = model_tokens(model) if tokens is None else tokens
    gen = generator(seed)
    a = random_invertible(cfg.d_head, 10.0, gen)
    p = _ScoreInputs.of(model, attention_inputs(model, tokens), 0)
    s = (p.x @ (p.wq @ a)) @ (p.x @ (p.wk @ a)).transpose(-1, -2)
    value = ((s - p.s_ref).abs() / _norm_product(p.xn, p.wq @ a, p.wk @ a)).max().item()
    return pd.DataFrame(
        [
            make_row(
                view(model).name,
                "rotation: W_Q A, W_K A^-T (conditioning)",
                "normalised score error, W_K A instead of A^-T (layer 0, negative control)",
                value,
                score_bound_constant(cfg.d_model, cfg.d_head, U32),
                "breaks",
                rule="(2 gamma_{d_model+1} + 2u + gamma_{d_head}), a-priori bound",
            )
        ]
    )


def conditioning_figure(sweep: pd.DataFrame, ax=None):
    import matplotlib.pyplot as plt
    import seaborn as sns

    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.8))
    sns.lineplot(data=sweep, x="cond", y="relative_error", hue="dtype", marker="o", ax=ax)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="cond(A)",
        ylabel="max relative score error",
        title=f"{sweep.model.iloc[0]}: W_Q A, W_K A^-T",
    )
    return ax
