"""Non-identifiability of the attention factors: rotations of W_Q/W_K and W_V/W_O.

The score of head h is ``(x W_Q + b_Q)(y W_K + b_K)^T``: replacing W_Q, b_Q by ``W_Q A``, ``b_Q A``
and W_K, b_K by ``W_K A^-T``, ``b_K A^-T`` leaves it unchanged for any invertible A (orthogonal R:
``A^-T = R``). The output ``softmax(.) (x W_V + b_V) W_O`` is unchanged by ``W_V R``, ``b_V R``,
``R^T W_O`` when R is orthogonal (``R R^T = I``). With grouped-query attention one key/value head
serves several query heads, so one rotation per *key/value* head, shared by its whole group. With
RoPE, q and k are rotated by position-dependent plane rotations after the projection, so only
matrices that commute with every one of them keep the scores: rotations inside each rotary plane.

QK-norm (Qwen3, Gemma 3, OLMo-2: ``cfg.qk_norm``) puts an RMSNorm with an elementwise scale g
between the projection and RoPE: ``q = rms(x W_Q) * g`` (g = offset + w). Of a change W_Q -> W_Q M
(and W_K -> W_K M'), the scores keep what satisfies all three of: M orthogonal (only then is
rms(v M) = rms(v) for every v), M commutes with diag(g) (a rotation mixing dimensions i and j
multiplies v_i by g_j: only where g_i = g_j), and M commutes with RoPE (inside each rotary plane).
So on a model whose learned g differs between the two dimensions of a plane, the rotation inside
that plane breaks the scores (``qk_norm_commuting``'s negative control), and what is left is a
sign per rotary plane (``plane_signs``: -1 on both dimensions of a plane is -I there, which commutes
with any rotation and any diagonal), plus free rotations in the planes whose two g entries are
equal in the query and the key norm. QK-norm adds one symmetry the plain bilinear form lacks: the
norm divides by the rms, so W_Q -> c W_Q (c > 0, any head) leaves q unchanged with no compensation
on W_K, up to the norm's eps: rms is sqrt(mean(v^2) + eps), so each normalised query moves by the
relative factor sqrt((m + eps) / (m + eps / c^2)) - 1 <= (1 - c^-2) eps / (2 m), m = mean(v^2) of
that pre-norm query (``qk_scale``; its negative control scales the dimensions unevenly).

All edits happen on ``copy.deepcopy(model)`` through ``transform_heads``; the model passed in is
never changed. Matrices are built and multiplied in float64 and rounded once to the model's dtype.
The conditioning of W_Q A, W_K A^-T is measured in ``analyses.invariance.conditioning``, what the
invariances mean for reading one head's weights in ``analyses.invariance.interpretation``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from analyses.architecture import setting
from analyses.invariance.common import (
    SAFETY,
    U32,
    U64,
    different_tokens,
    double_copy,
    floor_at_least_u,
    generator,
    make_row,
    model_tokens,
    random_invertible,
    random_orthogonal,
    relerr,
)
from interp.names import act_name
from interp.view import view

FLOOR_RULE = "SAFETY * floor, floor = relerr(original fp32, original fp64) per quantity"

# A transform gives, per layer, a stack of [d_head, d_head] float64 matrices (or None = unchanged):
# q: [head, d, d]   W_Q[h] -> W_Q[h] @ q[h],  b_Q[h] -> b_Q[h] @ q[h]
# k: [kv_head, d, d] W_K[g] -> W_K[g] @ k[g], b_K likewise
# v: [kv_head, d, d] W_V[g] -> W_V[g] @ v[g], b_V likewise
# o: [head, d, d]   W_O[h] -> o[h] @ W_O[h]
Spec = dict  # {"q": list[Tensor] | None, "k": ..., "v": ..., "o": ...}, one entry per layer


def transform_heads(model, spec: Spec):
    """A deep copy of ``model`` with the per-head transforms of ``spec`` applied (see above)."""
    new = copy.deepcopy(model)
    apply_spec(new, model, spec)
    return new


_PARTS = (
    ("q", "W_Q", "b_Q", "right"),
    ("k", "W_K", "b_K", "right"),
    ("v", "W_V", "b_V", "right"),
    ("o", "W_O", None, "left"),
)


def apply_spec(target, source, spec: Spec) -> None:
    """Set every attention weight of ``target`` (a copy of ``source``, same architecture) to the
    transformed weight of ``source``; parts that ``spec`` does not mention are reset to the source's,
    so one working copy can serve many checks in turn. ``source`` is only read."""
    if target is source:
        raise ValueError("apply_spec edits target in place: pass a copy, never the model itself")
    with torch.no_grad():
        for l, (block, src) in enumerate(zip(target.blocks, source.blocks)):
            attn, sattn = block.attn, src.attn
            for key, w_name, b_name, side in _PARTS:
                w = getattr(sattn, w_name)
                mats = spec.get(key)
                if mats is None:
                    setattr(attn, w_name, w.detach())
                    if b_name is not None and getattr(sattn, b_name) is not None:
                        setattr(attn, b_name, getattr(sattn, b_name).detach())
                    continue
                m = mats[l].to(torch.float64)
                if m.shape[0] != w.shape[0]:
                    raise ValueError(f"{key}: {m.shape[0]} matrices for {w.shape[0]} heads of {w_name} in layer {l}")
                w64 = w.detach().to(torch.float64)
                setattr(attn, w_name, (w64 @ m if side == "right" else m @ w64).to(w.dtype))
                if b_name is not None and getattr(sattn, b_name) is not None:
                    b = getattr(sattn, b_name)
                    setattr(attn, b_name, torch.einsum("hd,hde->he", b.detach().to(torch.float64), m).to(b.dtype))


def per_layer(cfg, make: Callable[[int], Tensor]) -> list[Tensor]:
    return [make(l) for l in range(cfg.n_layers)]


def group_of(cfg) -> Tensor:
    """kv head of each query head (repeat_interleave order)."""
    return torch.arange(cfg.n_heads) // cfg.group_size


def rope_plane_rotation(cfg, gen: torch.Generator) -> Tensor:
    """An orthogonal [d_head, d_head] that commutes with every rotary matrix: a rotation by a random
    angle inside each rotary plane (``rope_planes``), any orthogonal block on dimensions RoPE leaves
    alone (partial rotary)."""
    from models import rope_planes

    d = cfg.d_head
    r = torch.zeros(d, d, dtype=torch.float64)
    planes = rope_planes(cfg)
    angles = torch.rand(len(planes), generator=gen, dtype=torch.float64) * 2 * math.pi
    for (i, j), a in zip(planes, angles):
        c, s = math.cos(a), math.sin(a)
        r[i, i], r[i, j], r[j, i], r[j, j] = c, -s, s, c
    rest = sorted(set(range(d)) - {x for p in planes for x in p})
    if rest:
        idx = torch.tensor(rest)
        r[idx[:, None], idx[None, :]] = random_orthogonal(len(rest), gen)
    return r


def has_qk_norm(cfg) -> bool:
    """Whether queries and keys pass through an RMSNorm before RoPE (``cfg.qk_norm``)."""
    return getattr(cfg, "qk_norm", "none") != "none"


def qk_norm_scales(model, layer: int) -> tuple[Tensor, Tensor]:
    """The QK-norm's elementwise scales g = offset + w of ``layer`` in float64: queries [head, d_head],
    keys [kv_head, d_head] (one weight shared by the heads is repeated per head)."""
    cfg, attn = model.cfg, model.blocks[layer].attn
    offset = float(getattr(cfg, "norm_offset", 0.0))

    def per_head(w: Tensor, n: int) -> Tensor:
        w = w.detach().double() + offset
        return w.view(n, cfg.d_head) if w.numel() == n * cfg.d_head else w.expand(n, cfg.d_head)

    return per_head(attn.q_norm_w, cfg.n_heads), per_head(attn.k_norm_w, cfg.kv_heads)


def plane_signs(cfg, gen: torch.Generator) -> Tensor:
    """A diagonal [d_head, d_head] of +-1 with one random sign per rotary plane (both dimensions of
    a plane share it), +-1 per dimension outside the planes: orthogonal, commutes with RoPE and with
    any diagonal (a QK-norm's scale)."""
    from models import rope_planes

    d = cfg.d_head
    signs = torch.where(torch.rand(d, generator=gen, dtype=torch.float64) < 0.5, -1.0, 1.0).double()
    for i, j in rope_planes(cfg):
        signs[j] = signs[i]
    return torch.diag(signs)


def norm_commuting_rotation(cfg, gen: torch.Generator, free: set[tuple[int, int]]) -> Tensor:
    """``plane_signs``, with a random rotation instead inside each rotary plane of ``free`` (the
    planes whose two QK-norm scale entries are equal, where a rotation commutes with the norm)."""
    r = plane_signs(cfg, gen)
    from models import rope_planes

    for i, j in rope_planes(cfg):
        if (i, j) in free:
            a = float(torch.rand(1, generator=gen, dtype=torch.float64)) * 2 * math.pi
            r[i, i], r[i, j], r[j, i], r[j, j] = math.cos(a), -math.sin(a), math.sin(a), math.cos(a)
    return r


def norm_free_planes(model, layer: int, group: int) -> set[tuple[int, int]]:
    """Rotary planes (i, j) whose scale entries are equal (g_i == g_j) in the key norm of kv head
    ``group`` and the query norm of every query head of that group: there a plane rotation commutes
    with both norms."""
    from models import rope_planes

    gq, gk = qk_norm_scales(model, layer)
    heads = (group_of(model.cfg) == group).nonzero().flatten()
    return {
        (i, j)
        for i, j in rope_planes(model.cfg)
        if bool(gk[group, i] == gk[group, j]) and bool((gq[heads, i] == gq[heads, j]).all())
    }


def qk_norm_commuting(model, gen: torch.Generator) -> tuple[Spec, int]:
    """W_Q M, W_K M with M = ``norm_commuting_rotation`` per kv head (shared by its query heads), and
    how many (layer, kv head, plane) triples got a free rotation rather than a sign."""
    cfg = model.cfg
    g = group_of(cfg)
    ks, n_free = [], 0
    for l in range(cfg.n_layers):
        mats = []
        for kv in range(cfg.kv_heads):
            free = norm_free_planes(model, l, kv)
            n_free += len(free)
            mats.append(norm_commuting_rotation(cfg, gen, free))
        ks.append(torch.stack(mats))
    return {"q": [k[g] for k in ks], "k": ks}, n_free


def qk_scale(cfg, gen: torch.Generator, uneven: bool = False) -> Spec:
    """W_Q c with a random c in [2, 4], W_K unchanged (QK-norm divides it out up to eps): one c per
    query head where the norm is per head (``qk_norm="head"``), one per layer where it spans the whole
    projection (``"full"``, OLMo-2: heads scaled differently would change each other's rms).
    ``uneven``: a diagonal with entries in [0.5, 2] per dimension instead (negative control: the norm
    does not divide out an uneven scaling)."""

    def c() -> float:
        return 2.0 + 2.0 * float(torch.rand(1, generator=gen, dtype=torch.float64))

    def layer(_: int) -> Tensor:
        if uneven:
            return torch.stack(
                [
                    torch.diag(0.5 * 4.0 ** torch.rand(cfg.d_head, generator=gen, dtype=torch.float64))
                    for _ in range(cfg.n_heads)
                ]
            )
        shared = c() if cfg.qk_norm == "full" else None
        eye = torch.eye(cfg.d_head, dtype=torch.float64)
        return torch.stack([(shared if shared is not None else c()) * eye for _ in range(cfg.n_heads)])

    return {"q": per_layer(cfg, layer)}


def qk_scale_eps_bound(model, tokens: Tensor, c_min: float = 2.0) -> float:
    """The largest relative change of a normalised query under W_Q -> c W_Q (c >= ``c_min``) caused
    by the norm's eps: max over layers, heads and positions of (1 - c^-2) eps / (2 m), m the mean
    square of the pre-norm query (``hook_q``); first order in eps / m. c <= 4 in ``qk_scale``:
    (1 - c^-2) < 1, so the bound uses 1."""
    names = [act_name(l, "attn.hook_q") for l in range(model.cfg.n_layers)]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=names, return_type=None)
    m = min(float(cache[n].double().pow(2).mean(-1).min()) for n in names)
    return float(model.cfg.eps) / (2 * m)


def qk_orthogonal(cfg, gen, kind: str = "general") -> Spec:
    """One rotation per kv head, shared by its query heads. kind: 'general' (Haar) or 'rope_planes'."""
    g = group_of(cfg)

    def one():
        return random_orthogonal(cfg.d_head, gen) if kind == "general" else rope_plane_rotation(cfg, gen)

    ks = per_layer(cfg, lambda l: torch.stack([one() for _ in range(cfg.kv_heads)]))
    return {"q": [k[g] for k in ks], "k": ks}


def qk_split_group(cfg, gen, kind: str = "general") -> Spec:
    """Negative control (GQA): each query head gets its own rotation; its kv head gets the first
    query head's. Only the first head of each group stays consistent. kind: 'general',
    'rope_planes' or 'plane_signs' (QK-norm models)."""

    def one():
        if kind == "plane_signs":
            return plane_signs(cfg, gen)
        return random_orthogonal(cfg.d_head, gen) if kind == "general" else rope_plane_rotation(cfg, gen)

    qs = per_layer(cfg, lambda l: torch.stack([one() for _ in range(cfg.n_heads)]))
    first = torch.arange(cfg.kv_heads) * cfg.group_size
    return {"q": qs, "k": [q[first] for q in qs]}


def q_only(cfg, gen) -> Spec:
    """Negative control: rotate W_Q (and b_Q) alone."""
    return {
        "q": per_layer(cfg, lambda l: torch.stack([random_orthogonal(cfg.d_head, gen) for _ in range(cfg.n_heads)]))
    }


def qk_invertible(cfg, gen, cond: float, inverse_transpose: bool = True) -> Spec:
    """W_Q A, W_K A^-T (A shared by a kv group); with ``inverse_transpose=False``, W_K A (a negative
    control)."""
    g = group_of(cfg)
    a = per_layer(cfg, lambda l: torch.stack([random_invertible(cfg.d_head, cond, gen) for _ in range(cfg.kv_heads)]))
    k = [torch.linalg.inv(x).transpose(-1, -2) if inverse_transpose else x for x in a]
    return {"q": [x[g] for x in a], "k": k}


def vo_orthogonal(cfg, gen, orthogonal: bool = True, split_group: bool = False, cond: float = 10.0) -> Spec:
    """W_V R_g, R_g^T W_O[h] for h in group g. ``orthogonal=False``: R has condition number ``cond``
    (negative control); ``split_group``: each query head gets its own R^T (negative control)."""
    g = group_of(cfg)

    def one():
        return random_orthogonal(cfg.d_head, gen) if orthogonal else random_invertible(cfg.d_head, cond, gen)

    vs = per_layer(cfg, lambda l: torch.stack([one() for _ in range(cfg.kv_heads)]))
    if split_group:
        os_ = per_layer(cfg, lambda l: torch.stack([one().T for _ in range(cfg.n_heads)]))
        first = torch.arange(cfg.kv_heads) * cfg.group_size
        for l in range(cfg.n_layers):
            vs[l] = os_[l][first].transpose(-1, -2)
        return {"v": vs, "o": os_}
    return {"v": vs, "o": [v[g].transpose(-1, -2) for v in vs]}


# -- running and comparing ---------------------------------------------------------------------------


def observe(model, tokens: Tensor) -> dict[str, list[Tensor]]:
    """Scores and patterns of every layer and the final hidden state."""
    cfg = model.cfg
    names = [act_name(l, f"attn.hook_{w}") for l in range(cfg.n_layers) for w in ("attn_scores", "pattern")]
    with torch.no_grad():
        out, cache = model.run_with_cache(tokens, names_filter=names, return_type="hidden")
    return {
        "scores": [cache[act_name(l, "attn.hook_attn_scores")] for l in range(cfg.n_layers)],
        "patterns": [cache[act_name(l, "attn.hook_pattern")] for l in range(cfg.n_layers)],
        "output": [out],
    }


def _compare(a: dict, b: dict) -> dict[str, float]:
    return {q: max(relerr(x, y) for x, y in zip(a[q], b[q])) for q in a}


@dataclass(frozen=True)
class _Check:
    """One whole-model edit: what it claims, and how it is measured."""

    label: str
    spec: Spec
    expected: str  # "holds" or "breaks"
    quantities: tuple[str, ...]
    fp64: bool  # measured in float64 too
    amplification: float = 1.0  # cond(A): round-off grows at most linearly in it
    # QK-norm's W_Q c: n_layers x the eps-induced relative change of a normalised query
    # (``qk_scale_eps_bound``; a score is linear in its query, and each layer adds its own change to
    # first order), added to the tolerance
    eps_bound: float = 0.0


def _whole_model_checks(model, gen: torch.Generator, fp64: bool, tokens: Tensor | None = None) -> list[_Check]:
    """The edits in the order their matrices are drawn from ``gen`` (the order fixes the numbers)."""
    cfg = model.cfg
    if has_qk_norm(cfg):
        return _qk_norm_checks(model, gen, fp64, tokens)
    rope = cfg.positional == "rope"
    gqa = cfg.group_size > 1
    shared = ", shared by each kv group" if gqa else ""
    qk_kind = "rope_planes" if rope else "general"
    sq = ("scores", "output")
    where = "R inside each rotary plane" if rope else "random orthogonal R"
    label = f"W_Q R, W_K R ({where}{shared})"
    checks = [_Check(label, qk_orthogonal(cfg, gen, qk_kind), "holds", ("scores", "patterns", "output"), fp64)]
    if rope:
        label = "W_Q R, W_K R with a general orthogonal R (does not commute with RoPE)"
        checks.append(_Check(label, qk_orthogonal(cfg, gen, "general"), "breaks", sq, False))
    checks += _vo_and_controls(cfg, gen, fp64, shared)
    if not rope:
        label = "W_Q A, W_K A^-T (invertible A, cond 100; tolerance x cond(A))"
        checks.append(_Check(label, qk_invertible(cfg, gen, 100.0), "holds", sq, False, 100.0))
        label = "W_Q A, W_K A instead of A^-T (A not orthogonal, negative control)"
        checks.append(_Check(label, qk_invertible(cfg, gen, 10.0, inverse_transpose=False), "breaks", sq, False))
    if gqa:
        checks += _group_controls(cfg, gen, qk_kind)
    return checks


def _vo_and_controls(cfg, gen: torch.Generator, fp64: bool, shared: str) -> list[_Check]:
    sq, so = ("scores", "output"), ("output",)
    checks = [_Check(f"W_V R, R^T W_O (random orthogonal R{shared})", vo_orthogonal(cfg, gen), "holds", so, fp64)]
    checks.append(_Check("W_Q R alone (negative control)", q_only(cfg, gen), "breaks", sq, False))
    label = "W_V A, A^T W_O with A not orthogonal, cond 10 (negative control)"
    checks.append(_Check(label, vo_orthogonal(cfg, gen, orthogonal=False), "breaks", so, False))
    return checks


def _group_controls(cfg, gen: torch.Generator, qk_kind: str) -> list[_Check]:
    sq, so = ("scores", "output"), ("output",)
    label = "W_Q R_h with a different R per query head of a kv group (negative control)"
    checks = [_Check(label, qk_split_group(cfg, gen, qk_kind), "breaks", sq, False)]
    label = "W_V R, R_h^T W_O with a different R per query head of a kv group (negative control)"
    checks.append(_Check(label, vo_orthogonal(cfg, gen, split_group=True), "breaks", so, False))
    return checks


def _qk_norm_checks(model, gen: torch.Generator, fp64: bool, tokens: Tensor | None) -> list[_Check]:
    """The QK-norm model's checks (module docstring): what commutes with RoPE and the norm holds,
    the plane rotations that do not commute with its learned scale break, and W_Q c holds up to eps."""
    cfg = model.cfg
    gqa = cfg.group_size > 1
    shared = ", shared by each kv group" if gqa else ""
    sq, all3 = ("scores", "output"), ("scores", "patterns", "output")
    spec, n_free = qk_norm_commuting(model, gen)
    n_planes = cfg.n_layers * cfg.kv_heads * (cfg.rot_dim // 2)
    label = (
        f"W_Q M, W_K M (M: a sign per rotary plane, a rotation in the {n_free} of {n_planes} planes whose QK-norm "
        f"scales are equal{shared})"
    )
    # no fp64 run: the QK-norm computes in fp32 whatever the model's dtype (as Hugging Face's Gemma and
    # Qwen3 RMSNorm do), so an fp64 copy is not an fp64 computation and the u64 tolerance cannot apply
    checks = [_Check(label, spec, "holds", all3, False)]
    if n_free < n_planes:  # a rotation in a plane whose two scale entries differ must break the scores
        label = "W_Q R, W_K R with R inside each rotary plane (commutes with RoPE, not with the QK-norm's scale)"
        checks.append(_Check(label, qk_orthogonal(cfg, gen, "rope_planes"), "breaks", sq, False))
    else:  # every plane's scale entries are equal (an untrained norm): the plane rotations are free
        label = "W_Q R, W_K R with R inside each rotary plane (the QK-norm's scale is equal in every plane)"
        checks.append(_Check(label, qk_orthogonal(cfg, gen, "rope_planes"), "holds", all3, False))
    label = "W_Q R, W_K R with a general orthogonal R (commutes with neither)"
    checks.append(_Check(label, qk_orthogonal(cfg, gen, "general"), "breaks", sq, False))
    eps_bound = cfg.n_layers * qk_scale_eps_bound(model, model_tokens(model) if tokens is None else tokens)
    per = "head" if cfg.qk_norm == "head" else "layer (the norm spans every head)"
    label = f"W_Q c (c in [2, 4] per {per}, W_K unchanged: the QK-norm divides it out up to eps)"
    checks.append(_Check(label, qk_scale(cfg, gen), "holds", all3, False, eps_bound=eps_bound))
    label = "W_Q D with D an uneven positive diagonal in [0.5, 2] (negative control)"
    checks.append(_Check(label, qk_scale(cfg, gen, uneven=True), "breaks", sq, False))
    checks += _vo_and_controls(cfg, gen, fp64, shared)
    if gqa:
        checks += _group_controls(cfg, gen, "plane_signs")
    return checks


def model_rotation_checks(
    model, tokens: Tensor | None = None, seed: int = 0, model64=None, fp64: bool = True
) -> pd.DataFrame:
    """Whole-model checks: every head of every layer edited at once; scores, patterns (max relative
    error over layers) and the final hidden state compared with the original model in fp64."""
    name = view(model).name
    tokens = model_tokens(model) if tokens is None else tokens
    m64 = double_copy(model) if model64 is None else model64
    ref32, ref64 = observe(model, tokens), observe(m64, tokens)
    floor = {q: floor_at_least_u(v, model) for q, v in _compare(ref32, ref64).items()}
    base = _compare(observe(model, different_tokens(model, tokens)), ref64)
    # an fp64 copy runs in fp64 only where nothing casts to fp32 whatever the dtype: GPT-J's scores
    # are computed from q and k cast to fp32 (``scores_fp32``, as Hugging Face's are), so, as for the
    # QK-norm, no fp64 run and no u64 tolerance there
    fp64 = fp64 and not setting(model.cfg, "scores_fp32")
    checks = _whole_model_checks(model, generator(seed), fp64, tokens)
    rows = []
    work32 = copy.deepcopy(model)  # one working copy per dtype, re-derived from the originals per check
    work64 = copy.deepcopy(m64) if any(c.fp64 for c in checks) else None
    for c in checks:
        runs = [("float32", model, work32, 1.0)] + ([("float64", m64, work64, U64 / U32)] if c.fp64 else [])
        for dtype, m, work, ratio in runs:
            apply_spec(work, m, c.spec)
            got = _compare(observe(work, tokens), ref64)
            rows += [_check_row(name, c, q, got[q], floor[q], base[q], dtype, ratio) for q in c.quantities]
    return pd.DataFrame(rows)


def _check_row(name: str, c: _Check, q: str, value: float, floor: float, base: float, dtype: str, ratio: float):
    eps = f"; eps allowance {c.eps_bound:.1e}" if c.eps_bound else ""
    return make_row(
        name,
        "rotation: whole model",
        f"{q}: {c.label}",
        value,
        SAFETY * floor * ratio * c.amplification + c.eps_bound,
        c.expected,
        baseline=base if c.expected == "holds" else math.nan,
        dtype=dtype,
        rule=FLOOR_RULE
        + ("" if ratio == 1 else " * u64/u32")
        + ("" if c.amplification == 1 else " * cond(A)")
        + (" + n_layers * qk_scale_eps_bound (first order in eps / m)" if c.eps_bound else ""),
        detail=f"fp32 floor {floor:.1e}{eps}; baseline = same metric for other input tokens",
    )


_MOVED = {
    "score_bound_constant": "conditioning",
    "conditioning_sweep": "conditioning",
    "conditioning_rows": "conditioning",
    "conditioning_negative": "conditioning",
    "conditioning_figure": "conditioning",
    "interpretation_table": "interpretation",
    "interpretation_rows": "interpretation",
}


def __getattr__(name: str):
    """The conditioning sweep and the interpretation table moved to their own modules; their old
    names here still work, with a DeprecationWarning."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    import warnings

    where = f"analyses.invariance.{_MOVED[name]}"
    warnings.warn(f"analyses.invariance.rotation.{name} moved to {where}.{name}", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(where), name)
