"""Relative position: with RoPE and ALiBi the scores depend on the distance between positions only.

Shift every position by a constant s and compare every layer's scores with the unshifted ones, each
layer fed its own input from a real (unshifted) run, so that the check isolates the position
encoding of that layer:

* RoPE: the layer is called with the rotary angles of positions p + s (``layer_call``);
* ALiBi: the layer is called with positions p + s (the bias is -slope |p_q - p_k|);
* learned absolute / sinusoidal: positions enter through the embedding, so the whole model is run
  with ``hook_pos_embed`` replaced by the embedding of positions p + s; the scores of every layer
  change (a negative result: absolute encodings are not shift-invariant).

Metric: ``max_ij |s'_ij - s_ij| / D_ij`` with ``D_ij = scale ||q_i|| ||k_j|| (+ slope |i - j|)``,
over allowed (query, key) pairs, heads and layers (q, k before RoPE; their norms are what RoPE keeps).

Tolerance (RoPE). The angle p w is computed in fp32: w = 1/theta^(2i/d) carries a few ulps (<= 3u
relative), the product one more, so |d angle| <= 4 u p w <= 4 u p (w <= 1); cos and sin add about
u each and the rotation q cos + rot(q) sin another 2u, so ||d q_rot|| <= (4 p + 4) u ||q||; the dot
product adds gamma_d. Both runs carry such errors, with positions up to P (shifted) and P0:
|d s| <= (8 (P + P0) + 16 + 2 d) u scale ||q|| ||k||. The error grows with the shift, linearly.
Tolerance (ALiBi, absolute): the dot product and the bias subtraction only: (2 d + 8) u.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import torch
from torch import Tensor

from analyses.architecture import uses_rope
from analyses.invariance.common import U32, attention_inputs, make_row, model_tokens, tiny_model
from interp.names import act_name
from interp.view import view

DEFAULT_SHIFTS = (1, 100, 1000, 4000)


def _capture(model, layer: int, fn):
    """Run ``fn()`` and return (scores, q, k) of ``layer``, captured through its hooks."""
    got = {}

    def keep(t, hook):
        got[hook.name.rsplit(".", 1)[-1]] = t.detach()

    names = [act_name(layer, f"attn.hook_{w}") for w in ("attn_scores", "q", "k")]
    with torch.no_grad(), model.hooks(fwd_hooks=[(n, keep) for n in names]):
        fn()
    return got["hook_attn_scores"], got["hook_q"], got["hook_k"]


def _denominator(model, q: Tensor, k: Tensor, positions: Tensor) -> Tensor:
    """scale ||q_i|| ||k_j|| (+ slope_h |i - j| for ALiBi), [head, query, key]."""
    cfg = model.cfg
    g = torch.arange(cfg.n_heads) // cfg.group_size
    qn = q[0].double().norm(dim=-1).T  # [head, pos]
    kn = k[0].double().norm(dim=-1).T[g]
    d = cfg.scale * qn[:, :, None] * kn[:, None, :]
    if cfg.positional == "alibi":
        dist = (positions[0][:, None] - positions[0][None, :]).abs().double()
        d = d + model.blocks[0].attn.alibi_slopes.double()[:, None, None] * dist[None]
    return d


def _normalised(a: Tensor, b: Tensor, denom: Tensor) -> float:
    a, b = a[0].double(), b[0].double()
    ok = torch.isfinite(a) & torch.isfinite(b)
    if not torch.equal(torch.isfinite(a), torch.isfinite(b)):
        return math.inf
    return ((a - b).abs()[ok] / denom[ok]).max().item()


def _shift_row(model, shift: int, value: float, tolerance: float, baseline: float) -> dict:
    return dict(
        model=view(model).name,
        positional=model.cfg.positional,
        shift=shift,
        value=value,
        tolerance=tolerance,
        baseline=baseline,
    )


def shift_errors(model, tokens: Tensor | None = None, shifts: Sequence[int] = DEFAULT_SHIFTS) -> pd.DataFrame:
    """Per shift: the normalised score change (max over layers) and its tolerance. Also a guard
    (``baseline``): the same metric when only the query positions are shifted (so distances change;
    RoPE/ALiBi) or, for absolute encodings, the unshifted scores of a different input."""
    cfg = model.cfg
    tokens = model_tokens(model, n_tokens=16) if tokens is None else tokens
    n = tokens.shape[1]
    pos0 = torch.arange(n)[None]
    d = cfg.d_head
    rows = []
    if cfg.positional in ("rope", "alibi"):
        from analyses.invariance.common import layer_call

        xs = attention_inputs(model, tokens)
        rope = cfg.positional == "rope"
        for s in shifts:
            worst, guard = 0.0, math.inf
            for l, x in enumerate(xs):
                ref, q, k = _capture(
                    model, l, lambda: layer_call(model, l, x, causal=cfg.is_causal, rope=rope, positions=pos0)
                )
                new, _, _ = _capture(
                    model, l, lambda: layer_call(model, l, x, causal=cfg.is_causal, rope=rope, positions=pos0 + s)
                )
                denom = _denominator(model, q, k, pos0)
                worst = max(worst, _normalised(new, ref, denom))
                if not rope or uses_rope(cfg, l):  # a layer without RoPE (rope_layers) has no distance to change
                    guard = min(guard, _normalised(_query_shifted(model, l, q, k, pos0, s), ref, denom))
            p_max = n - 1 + s
            tol = (8 * (p_max + n - 1) + 16 + 2 * d) * U32 if rope else (2 * d + 8) * U32
            rows.append(_shift_row(model, s, worst, tol, guard))
    else:
        names = [act_name(l, f"attn.hook_{w}") for l in range(cfg.n_layers) for w in ("attn_scores", "q", "k")]

        def run(t, s):
            hooks = []
            if s:
                hooks = [("hook_pos_embed", lambda e, hook: _absolute_embedding(model, pos0 + s, e))]
            with torch.no_grad(), model.hooks(fwd_hooks=hooks):
                _, cache = model.run_with_cache(t, names_filter=names, return_type=None)
            return cache

        ref = run(tokens, 0)
        from analyses.invariance.common import different_tokens

        other = run(different_tokens(model, tokens), 0)
        for s in shifts:
            if cfg.positional == "learned" and n + s > cfg.n_ctx:
                continue  # no learned embedding that far out
            new = run(tokens, s)
            worst, guard = 0.0, math.inf
            for l in range(cfg.n_layers):
                q, k, scores = (act_name(l, f"attn.hook_{w}") for w in ("q", "k", "attn_scores"))
                denom = _denominator(model, ref[q], ref[k], pos0)
                worst = max(worst, _normalised(new[scores], ref[scores], denom))
                guard = min(guard, _normalised(other[scores], ref[scores], denom))
            rows.append(_shift_row(model, s, worst, (2 * d + 8) * U32, guard))
    return pd.DataFrame(rows)


def _absolute_embedding(model, positions: Tensor, like: Tensor) -> Tensor:
    return model.position_embedding(positions).to(like.dtype).expand_as(like)


def _query_shifted(model, layer: int, q: Tensor, k: Tensor, pos0: Tensor, s: int) -> Tensor:
    """Scores with only the queries' positions moved by s: distances change (the guard)."""
    cfg = model.cfg
    g = torch.arange(cfg.n_heads) // cfg.group_size
    qh, kh = q.transpose(1, 2), k.transpose(1, 2)[:, g]  # [batch, head, pos, d_head]
    qh, kh = model.rotate(qh, pos0 + s, layer=layer), model.rotate(kh, pos0, layer=layer)
    scores = (qh @ kh.transpose(-1, -2)) * cfg.scale
    if cfg.positional == "alibi":
        dist = ((pos0[0] + s)[:, None] - pos0[0][None, :]).abs().to(scores.dtype)
        scores = scores - model.blocks[layer].attn.alibi_slopes[None, :, None, None].to(scores.dtype) * dist
    if cfg.is_causal:
        n = scores.shape[-1]
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return scores


def relative_position_checks(
    model, shifts: Sequence[int] = DEFAULT_SHIFTS, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """All three encodings: the model's own where it has it, a seeded tiny model for the others.
    Returns (per-shift table, rows)."""
    cfg = model.cfg
    name = view(model).name
    subjects = []
    for enc in ("rope", "alibi", "learned"):
        if cfg.positional == enc:
            subjects.append((enc, model, None))
        else:
            tiny = tiny_model(enc, attention="causal" if enc != "learned" else "bidirectional", seed=seed)
            subjects.append((enc, tiny, model_tokens(tiny, n_tokens=16, seed=seed)))
    tables, rows = [], []
    for enc, m, toks in subjects:
        table = shift_errors(m, toks, shifts)
        table["subject"] = view(m).name
        tables.append(table)
        expected = "breaks" if enc == "learned" else "holds"
        for r in table.itertuples():
            rows.append(
                make_row(
                    name,
                    "relative position: shift all positions",
                    f"{enc} ({view(m).name}): normalised score change, shift {r.shift}",
                    r.value,
                    r.tolerance,
                    expected,
                    baseline=r.baseline if expected == "holds" else math.nan,
                    rule="(8 (P + P0) + 16 + 2 d_head) u32 (RoPE angle error grows with position)"
                    if enc == "rope"
                    else "(2 d_head + 8) u32",
                    detail="guard: only the queries shifted"
                    if expected == "holds"
                    else "scores at every layer, positions via hook_pos_embed",
                )
            )
    return pd.concat(tables, ignore_index=True), pd.DataFrame(rows)
