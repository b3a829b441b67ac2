"""The 1/sqrt(d) scale: without it the softmax saturates as d grows and gradients vanish.

For a dimension d, queries and keys q, k in R^d give scores s = q.k (unscaled) or q.k / sqrt(d)
(scaled). For independent entries of variance 1, Var(q.k) = d: unscaled scores spread like sqrt(d),
so softmax rows approach one-hot; scaled scores keep unit variance. Measured per d:

* ``entropy``: mean entropy of the softmax rows, reported as a fraction of log(n_keys);
* ``grad_scores``: median (over query rows) norm of the gradient of y = u . (softmax(s) V) w.r.t. the scores of a row
  (u, V random unit-variance); it equals ||(diag p - p p^T) V u|| and vanishes as p -> one-hot;
* ``grad_queries``: the same gradient w.r.t. the query vector (chain rule through s = c q.K).

The median, not the mean, is the typical row: for random keys a few queries have two nearly tied
top scores and keep a large gradient at any d, so the mean decays only like 1/sqrt(d) while the
typical row's gradient decays exponentially (``grad_scores_mean`` is reported too).

Two sources of q and k:

* ``random``: Gaussian N(0, 1) entries, n_queries x n_keys, for d = 4 ... 1024;
* ``real``: ``hook_rot_q``/``hook_rot_k`` (the vectors the scores actually see, after RoPE) of one
  layer of a real model on real text. A dimension d is obtained by concatenating the heads of the
  layer (each query head with the key head it reads, so that q.k of the concatenation is the sum of
  the heads' own scores) and taking the first d coordinates of that concatenation; d runs from 4 to
  n_heads * d_head. All query positions attend to all key positions here (no causal mask), so every
  row has the same number of keys.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import torch
from torch import Tensor

from analyses.invariance.common import generator, make_row, model_tokens
from interp.names import act_name
from interp.view import view

MIN_D_FOR_CLAIMS = 256  # sources with fewer dimensions are measured and plotted, not judged
RANDOM_DIMS = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def softmax_stats(q: Tensor, k: Tensor, scaled: bool, gen: torch.Generator) -> dict:
    """q [n_q, d], k [n_k, d] -> mean entropy fraction, mean max weight, mean gradient norms."""
    d = q.shape[-1]
    n_k = k.shape[0]
    c = d**-0.5 if scaled else 1.0
    q = q.detach().double().clone().requires_grad_(True)
    k = k.detach().double()
    v = torch.randn(n_k, 8, generator=gen, dtype=torch.float64)
    u = torch.randn(8, generator=gen, dtype=torch.float64)
    s = (c * q @ k.T).detach().requires_grad_(True)
    p = torch.softmax(s, dim=-1)
    y = (p @ v) @ u  # one scalar output per query row
    (g_s,) = torch.autograd.grad(y.sum(), s)
    s_q = c * q @ k.T
    y_q = (torch.softmax(s_q, dim=-1) @ v) @ u
    (g_q,) = torch.autograd.grad(y_q.sum(), q)
    ent = -(p * torch.log(p.clamp_min(1e-300))).sum(-1)
    return dict(
        entropy=(ent / math.log(n_k)).mean().item(),
        max_weight=p.max(-1).values.mean().item(),
        grad_scores=g_s.norm(dim=-1).median().item(),
        grad_queries=g_q.norm(dim=-1).median().item(),
        grad_scores_mean=g_s.norm(dim=-1).mean().item(),
    )


def random_sweep(
    dims: Sequence[int] = RANDOM_DIMS, n_queries: int = 64, n_keys: int = 64, seed: int = 0
) -> pd.DataFrame:
    gen = generator(seed)
    rows = []
    for d in dims:
        q = torch.randn(n_queries, d, generator=gen, dtype=torch.float64)
        k = torch.randn(n_keys, d, generator=gen, dtype=torch.float64)
        for scaled in (True, False):
            rows.append(dict(source="random", d=d, scaled=scaled, n_keys=n_keys, **softmax_stats(q, k, scaled, gen)))
    return pd.DataFrame(rows)


def real_qk(model, tokens: Tensor | None = None, layer: int | None = None) -> tuple[Tensor, Tensor]:
    """Concatenated [pos, n_heads * d_head] queries and matching keys of one layer (after RoPE)."""
    cfg = model.cfg
    layer = cfg.n_layers // 2 if layer is None else layer
    tokens = model_tokens(model, n_tokens=48) if tokens is None else tokens
    names = [act_name(layer, "attn.hook_rot_q"), act_name(layer, "attn.hook_rot_k")]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=names, return_type=None)
    q, k = cache[names[0]][0], cache[names[1]][0]  # [pos, head, d], [pos, kv_head, d]
    k = k[:, torch.arange(cfg.n_heads) // cfg.group_size]
    return q.reshape(q.shape[0], -1), k.reshape(k.shape[0], -1)


def real_sweep(model, tokens: Tensor | None = None, layer: int | None = None, seed: int = 0) -> pd.DataFrame:
    q, k = real_qk(model, tokens, layer)
    total = q.shape[1]
    dims = sorted({d for d in (2**i for i in range(2, 20)) if d < total} | {total})
    gen = generator(seed)
    rows = []
    for d in dims:
        for scaled in (True, False):
            rows.append(
                dict(
                    source=f"real ({view(model).name})",
                    d=d,
                    scaled=scaled,
                    n_keys=k.shape[0],
                    **softmax_stats(q[:, :d], k[:, :d], scaled, gen),
                )
            )
    return pd.DataFrame(rows)


def scale_sweep(model=None, tokens: Tensor | None = None, seed: int = 0) -> pd.DataFrame:
    parts = [random_sweep(seed=seed)]
    if model is not None:
        parts.append(real_sweep(model, tokens, seed=seed))
    return pd.concat(parts, ignore_index=True)


def scale_rows(model_label: str, sweep: pd.DataFrame) -> pd.DataFrame:
    """Claims checked at the largest d of each source. Thresholds are design choices, not round-off:
    'usable' = entropy at least half of log(n_keys) (random, i.i.d. q and k, where the variance
    argument applies); 'saturates' = unscaled entropy below 1/10 of the scaled one; 'vanish' =
    median gradient w.r.t. the scores below 1/10 of the scaled one. Real heads are sharp by training,
    and concatenated heads' scores add coherently (their coordinates are not independent), so the
    scaled entropy of real q/k is reported, not judged."""
    rows = []
    for source, sub in sweep.groupby("source"):
        dmax = sub.d.max()
        if dmax < MIN_D_FOR_CLAIMS:
            continue  # the claims are asymptotic in d; a small model's few dimensions cannot test them
        top = sub[sub.d == dmax].set_index("scaled")
        if source == "random":
            rows.append(
                make_row(
                    model_label,
                    "sqrt(d) scale",
                    f"{source}: 1 - entropy/log(n) at d={dmax}, scaled (usable if <= 0.5)",
                    1 - top.loc[True, "entropy"],
                    0.5,
                    "holds",
                    dtype="float64",
                    rule="design threshold",
                    detail=f"mean max weight {top.loc[True, 'max_weight']:.3f}",
                )
            )
        rows.append(
            make_row(
                model_label,
                "sqrt(d) scale",
                f"{source}: entropy unscaled / scaled at d={dmax} (saturates if <= 0.1)",
                top.loc[False, "entropy"] / top.loc[True, "entropy"],
                0.1,
                "holds",
                dtype="float64",
                rule="design threshold",
                detail=(
                    f"entropy/log(n): scaled {top.loc[True, 'entropy']:.3g}, unscaled {top.loc[False, 'entropy']:.3g}; "
                    f"mean max weight unscaled {top.loc[False, 'max_weight']:.3f}"
                ),
            )
        )
        ratio = top.loc[False, "grad_scores"] / top.loc[True, "grad_scores"]
        rows.append(
            make_row(
                model_label,
                "sqrt(d) scale",
                f"{source}: median |grad wrt scores| unscaled / scaled at d={dmax} (vanishes if <= 0.1)",
                ratio,
                0.1,
                "holds",
                dtype="float64",
                rule="design threshold",
                detail=(
                    f"scaled {top.loc[True, 'grad_scores']:.3g}, unscaled {top.loc[False, 'grad_scores']:.3g} "
                    f"(means {top.loc[True, 'grad_scores_mean']:.3g} vs {top.loc[False, 'grad_scores_mean']:.3g})"
                ),
            )
        )
    return pd.DataFrame(rows)


def scale_figure(sweep: pd.DataFrame):
    """Entropy and gradient norm against d, scaled vs unscaled (seaborn, two panels)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    data = sweep.assign(scaling=sweep.scaled.map({True: "q.k / sqrt(d)", False: "q.k"}))
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for ax, y, label in zip(
        axes, ("entropy", "grad_scores", "grad_queries"), ("entropy / log(n_keys)", "|d y / d scores|", "|d y / d q|")
    ):
        sns.lineplot(data=data, x="d", y=y, hue="scaling", style="source", marker="o", ax=ax)
        ax.set(xscale="log", xlabel="d (dimensions of q and k)", ylabel=label)
        if y != "entropy":
            ax.set_yscale("log")
    axes[0].set_title("softmax saturates without 1/sqrt(d)")
    axes[1].set_title("gradients vanish with it")
    fig.tight_layout()
    return fig
