"""Order blindness: attention without positional information is permutation-equivariant.

* ``layer_permutation``: one real attention layer fed its own input from a real run, permuted.
  Without positions and without a causal mask, attn(P x) = P attn(x) to fp32 round-off; the causal
  mask (and RoPE, when the model has it) breaks it.
* ``model_permutation``: the whole model with its positional information removed (learned /
  sinusoidal: ``hook_pos_embed`` set to zero; RoPE: ``hook_rot_q``/``hook_rot_k`` set back to
  ``hook_q``/``hook_k``). An encoder is then equivariant ("dog bites man" vs "man bites dog" give
  the same token vectors, permuted); with positions it is not. A causal model is not equivariant
  even without positions: the mask itself tells a token how many tokens precede it.
* ``causal_order_leak``: how much order a causal model without positions still sees: permute all
  tokens but the last and measure how much the last token's residual changes, layer by layer,
  relative to how much it changes when those tokens are replaced by other tokens. After layer 0 the
  change is exactly zero (the last token attends to a *set* of token-only vectors); from layer 1 on,
  each earlier token's vector depends on its own prefix, which the permutation changes.
* ``head_position_sensitivity``: per head, the mean total-variation distance between a pattern row
  and the same row after shuffling the tokens and undoing the shuffle on the pattern. TV = half the
  L1 distance = the attention mass that had to move; it is bounded in [0, 1], symmetric, and defined
  when a row puts zero weight on some key (KL and JS-with-log would need smoothing or are less
  directly readable). 0 means the head follows content only; a head that attends by position (to
  the previous token, to position 0) moves almost all of its mass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import contextmanager

import pandas as pd
import torch
from torch import Tensor

from analyses.invariance.common import (
    SAFETY,
    attention_inputs,
    different_tokens,
    double_copy,
    floor_at_least_u,
    generator,
    inverse_permutation,
    layer_call,
    make_row,
    model_tokens,
    random_permutation,
    relerr,
    special_positions,
    within_windows,
)
from interp.names import act_name
from interp.view import view

FLOOR_RULE = "SAFETY * floor, floor = relerr(fp32 run, fp64 run) of the same computation"


# -- positional information off -------------------------------------------------------------------


def no_position_hooks(model) -> list:
    """Forward hooks that remove all positional information from ``model``: zero position
    embeddings (learned / sinusoidal), and RoPE undone (rot_q/rot_k replaced by q/k, by q_normed/k_normed
    under QK-norm). ALiBi has no
    hook to undo it: asking is an error."""
    cfg = model.cfg
    if cfg.positional == "alibi":
        raise ValueError("ALiBi adds its bias inside the scores; there is no hook that removes it")
    hooks = [("hook_pos_embed", lambda t, hook: torch.zeros_like(t))]
    if cfg.positional == "rope":
        saved: dict = {}

        def save(t, hook):
            saved[hook.name] = t

        # what RoPE rotates: q and k, or with QK-norm (Gemma 3, Qwen3) q and k after the norm
        src = "_normed" if getattr(cfg, "qk_norm", "none") != "none" else ""

        def restore(t, hook):
            return saved[hook.name.replace("hook_rot_", "hook_") + src]

        for l in range(cfg.n_layers):
            hooks += [(act_name(l, f"attn.hook_q{src}"), save), (act_name(l, f"attn.hook_k{src}"), save)]
            hooks += [(act_name(l, "attn.hook_rot_q"), restore), (act_name(l, "attn.hook_rot_k"), restore)]
    return hooks


@contextmanager
def positions_removed(model, remove: bool = True):
    if not remove:
        yield model
        return
    with model.hooks(fwd_hooks=no_position_hooks(model)):
        yield model


def _hidden(model, tokens: Tensor, remove_positions: bool) -> Tensor:
    with torch.no_grad(), positions_removed(model, remove_positions):
        return model(tokens, return_type="hidden")


# -- single layer ---------------------------------------------------------------------------------


def layer_permutation(model, tokens: Tensor | None = None, seed: int = 0, model64=None) -> pd.DataFrame:
    """attn(P x) vs P attn(x) on every layer's real input, for: no mask + no positions (holds),
    causal mask (breaks), RoPE (breaks, RoPE models only). A sliding-window layer reads the first
    ``window`` positions of its input (without the causal mask it takes no more)."""
    name = view(model).name
    tokens = model_tokens(model) if tokens is None else tokens
    xs = attention_inputs(model, tokens)
    # a sliding-window layer runs without the causal mask only on an input within its window
    # (``layer_call``): it is fed the first ``window`` positions of its input, permuted on their own
    n = tokens.shape[1]
    lengths = [min(n, model.cfg.window(l) or n) for l in range(len(xs))]
    gen = generator(seed)
    perms = {n: random_permutation(n, gen)}  # drawn first: a model without windows permutes as it always has
    for k in sorted(set(lengths) - {n}):
        perms[k] = random_permutation(k, gen) if k >= 2 else None
    m64 = double_copy(model) if model64 is None else model64
    settings = [("no mask, no positions", False, False, "holds")]
    settings.append(("causal mask, no positions", True, False, "breaks"))
    if model.cfg.positional == "rope":
        settings.append(("no mask, RoPE", False, True, "breaks"))
    rows = []
    for label, causal, rope, expected in settings:
        errs, floors, bases = [], [], []
        with torch.no_grad():
            for l, x in enumerate(xs):
                perm = perms[lengths[l]]
                if perm is None:  # a window of one token: nothing to permute
                    continue
                x = x[:, : lengths[l]]
                out = layer_call(model, l, x, causal=causal, rope=rope)
                out_p = layer_call(model, l, x[:, perm], causal=causal, rope=rope)
                out64 = layer_call(m64, l, x.double(), causal=causal, rope=rope)
                errs.append(relerr(out_p, out[:, perm]))
                bases.append(relerr(out_p, out))  # permutation not undone
                floors.append(floor_at_least_u(relerr(out, out64), model))
        rows.append(
            make_row(
                name,
                "permutation: one attention layer",
                f"attn(Px) vs P attn(x), {label}; max over {len(xs)} layers",
                max(errs),
                SAFETY * max(floors),
                expected,
                baseline=min(bases) if expected == "holds" else math.nan,
                rule=FLOOR_RULE,
                detail=f"per-layer errors: {', '.join(f'{e:.1e}' for e in errs)}"
                + ("" if set(lengths) == {n} else f"; tokens per layer (sliding windows): {lengths}"),
            )
        )
    return pd.DataFrame(rows)


# -- whole model ----------------------------------------------------------------------------------


def find_permutation(a: Sequence[int], b: Sequence[int]) -> Tensor:
    """perm with b == a[perm], for sequences of the same tokens in another order."""
    a, b = list(a), list(b)
    if sorted(a) != sorted(b):
        raise ValueError("the two token sequences are not permutations of each other")
    used, perm = set(), []
    for t in b:
        i = next(i for i, s in enumerate(a) if s == t and i not in used)
        used.add(i)
        perm.append(i)
    return torch.tensor(perm)


def sentence_pair(model, first: str = "dog bites man", second: str = "man bites dog"):
    """Token ids of two sentences that are permutations of each other, and the permutation. If the
    tokenizer spells a word differently at the start (SmolLM2: 'dog' vs ' dog'), the second is
    built by permuting the first's ids, which is what the claim is about."""
    if getattr(model, "tokenizer", None) is None:
        raise ValueError("sentence_pair needs a model with a tokenizer")
    t1 = model_tokens(model, first, n_tokens=64)
    t2 = model_tokens(model, second, n_tokens=64)
    try:
        perm = find_permutation(t1[0].tolist(), t2[0].tolist())
    except ValueError:
        # one token per word besides special tokens, which stay where they are (Gemma 3's <bos>)
        w1, w2 = first.split(), second.split()
        perm_w = find_permutation(range(len(w1)), [w1.index(w) for w in w2])
        fixed = set(special_positions(model, t1))
        words = torch.tensor([i for i in range(t1.shape[1]) if i not in fixed])
        if len(words) != len(w1):
            raise
        perm = torch.arange(t1.shape[1])
        perm[words] = words[perm_w]
        t2 = t1[:, perm]
    return t1, t2, perm


def model_permutation(
    model, tokens: Tensor | None = None, seed: int = 0, model64=None, pair: bool = True
) -> pd.DataFrame:
    """The whole model, with and without positional information: hidden(P t) vs P hidden(t)."""
    name = view(model).name
    cfg = model.cfg
    m64 = double_copy(model) if model64 is None else model64
    cases = []
    if tokens is None:
        tokens = model_tokens(model)
    cases.append(
        (
            "random shuffle",
            tokens,
            random_permutation(tokens.shape[1], generator(seed), special_positions(model, tokens)),
        )
    )
    if pair and getattr(model, "tokenizer", None) is not None:
        t1, t2, perm = sentence_pair(model)
        cases.append(("'dog bites man' -> 'man bites dog'", t1, perm))
    rows = []
    for label, t, perm in cases:
        tp = t[:, perm]
        for remove in (True, False):
            if remove and cfg.positional == "alibi":
                continue
            h = _hidden(model, t, remove)
            hp = _hidden(model, tp, remove)
            h64 = _hidden(m64, t, remove)
            err, floor, base = relerr(hp, h[:, perm]), floor_at_least_u(relerr(h, h64), model), relerr(hp, h)
            expected = "holds" if (remove and not cfg.is_causal) else "breaks"
            what = "positions removed" if remove else "with positions"
            cos = torch.nn.functional.cosine_similarity(hp, h[:, perm], dim=-1)[0]
            rows.append(
                make_row(
                    name,
                    "permutation: whole model",
                    f"hidden(Pt) vs P hidden(t), {what}, {label}",
                    err,
                    SAFETY * floor,
                    expected,
                    baseline=base if expected == "holds" else math.nan,
                    rule=FLOOR_RULE,
                    detail=f"min cosine of matched token vectors {cos.min().item():.6f}",
                )
            )
    return pd.DataFrame(rows)


def causal_order_leak(
    model, tokens: Tensor | None = None, seed: int = 0, model64=None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Causal model, positions removed: permute every token but the last; per layer, how much the
    last token's residual moves (``leak``) and how much it moves when the same tokens are replaced
    by other tokens (``content``). The input is cut to the shortest sliding window
    (``within_windows``). Returns (per-layer table, rows)."""
    name = view(model).name
    cfg = model.cfg
    tokens = within_windows(model, model_tokens(model) if tokens is None else tokens)
    n = tokens.shape[1]
    fixed = sorted(set(special_positions(model, tokens)) | {n - 1})
    perm = random_permutation(n, generator(seed), fixed)
    other = different_tokens(model, tokens, seed=seed + 1, keep=fixed)
    names = [act_name(l, "hook_resid_post") for l in range(cfg.n_layers)]

    def resid(t):
        with torch.no_grad(), positions_removed(model, cfg.positional != "alibi"):
            _, cache = model.run_with_cache(t, names_filter=names, return_type=None)
        return [cache[nm][0, -1] for nm in names]

    base, shuffled, changed = resid(tokens), resid(tokens[:, perm]), resid(other)
    m64 = double_copy(model) if model64 is None else model64
    with torch.no_grad(), positions_removed(m64, cfg.positional != "alibi"):
        _, c64 = m64.run_with_cache(tokens, names_filter=names, return_type=None)
    per_layer = pd.DataFrame(
        dict(
            model=name,
            layer=range(cfg.n_layers),
            leak=[relerr(s, b) for s, b in zip(shuffled, base)],
            content=[relerr(c, b) for c, b in zip(changed, base)],
            floor=[floor_at_least_u(relerr(b, c64[nm][0, -1]), model) for b, nm in zip(base, names)],
        )
    )
    per_layer["leak_over_content"] = per_layer.leak / per_layer.content
    mask = "causal mask" if cfg.is_causal else "no mask"
    rows = [
        make_row(
            name,
            "permutation: order leak through the mask",
            f"last token after layer 0, prefix shuffled ({mask}, no positions)",
            per_layer.leak[0],
            SAFETY * per_layer.floor[0],
            "holds",
            baseline=per_layer.content[0],
            rule=FLOOR_RULE,
            detail="layer 0: the last token attends to a set of token-only vectors",
        )
    ]
    last = cfg.n_layers - 1
    if cfg.is_causal:
        rows.append(
            make_row(
                name,
                "permutation: order leak through the mask",
                f"last token after layer {last}, prefix shuffled (causal mask, no positions)",
                per_layer.leak[last],
                SAFETY * per_layer.floor[last],
                "breaks",
                rule=FLOOR_RULE,
                detail=(
                    f"order moves the last token {per_layer.leak_over_content[last]:.0%} as much as replacing the "
                    f"tokens does (max over layers {per_layer.leak_over_content.max():.0%})"
                ),
            )
        )
    return per_layer, pd.DataFrame(rows)


# -- per head -------------------------------------------------------------------------------------


def total_variation(p: Tensor, q: Tensor) -> Tensor:
    """Half the L1 distance between rows (last axis)."""
    return 0.5 * (p - q).abs().sum(-1)


def _common_keys(inv: Tensor) -> Tensor:
    """[query, key] bool: the key is visible to the query under the causal mask in the original order
    and in the shuffled one (``inv``: each original position's place in the shuffled order)."""
    idx = torch.arange(len(inv))
    return (idx[None, :] <= idx[:, None]) & (inv[None, :] <= inv[:, None])


def _common_key_tv(undone: Tensor, ref: Tensor, inv: Tensor, causal: bool) -> Tensor:
    """Mean row TV [layer, head]. Causal: each row is restricted to the keys visible in both orders
    and renormalised there (a head whose scores depend on content only gives the same restricted
    distribution whatever else is visible), rows with fewer than two common keys are skipped."""
    if not causal:
        return total_variation(undone, ref).mean(-1)
    common = _common_keys(inv)  # [query, key]
    keep = common.sum(-1) >= 2
    if not keep.any():
        raise ValueError("no query row shares two visible keys between the two orders; use a longer input")
    c = common.to(ref.dtype)

    def restrict(p):
        p = p * c
        return p / p.sum(-1, keepdim=True).clamp_min(1e-30)

    tv = total_variation(restrict(undone), restrict(ref))  # [layer, head, query]
    return tv[..., keep].mean(-1)


def head_position_sensitivity(
    model, tokens: Tensor | None = None, n_perms: int = 4, seed: int = 0, remove_positions: bool = False, model64=None
) -> pd.DataFrame:
    """Per (layer, head): mean TV distance between the pattern of the original tokens and the
    un-shuffled pattern of shuffled tokens (special tokens stay in place). Columns: layer, head,
    tv, tv_sd (over permutations), floor (TV between the fp32 and fp64 patterns). The input is cut
    to the shortest sliding window (``within_windows``)."""
    name = view(model).name
    cfg = model.cfg
    tokens = within_windows(model, model_tokens(model) if tokens is None else tokens)
    names = [act_name(l, "attn.hook_pattern") for l in range(cfg.n_layers)]
    gen = generator(seed)
    fixed = special_positions(model, tokens)

    def patterns(m, t):
        with torch.no_grad(), positions_removed(m, remove_positions):
            _, cache = m.run_with_cache(t, names_filter=names, return_type=None)
        return torch.stack([cache[nm][0] for nm in names])  # [layer, head, query_pos, key_pos]

    ref = patterns(model, tokens)
    tvs = []
    for _ in range(n_perms):
        perm = random_permutation(tokens.shape[1], gen, fixed)
        inv = inverse_permutation(perm)
        for _ in range(100):  # causal: a shuffle leaving no row two common keys (a short input's reversal) says nothing
            if not cfg.is_causal or bool((_common_keys(inv).sum(-1) >= 2).any()):
                break
            perm = random_permutation(tokens.shape[1], gen, fixed)
            inv = inverse_permutation(perm)
        shuffled = patterns(model, tokens[:, perm])
        undone = shuffled[:, :, inv][:, :, :, inv]  # row i, column j of the original order
        tvs.append(_common_key_tv(undone, ref, inv, cfg.is_causal))  # [layer, head]
    tv = torch.stack(tvs)
    floor = total_variation(ref.double(), patterns(double_copy(model) if model64 is None else model64, tokens)).amax(-1)
    if cfg.is_causal:  # restricted rows are renormalised: allow for the smallest visible mass
        floor = floor * 2
    floor = floor.clamp_min(floor_at_least_u(0.0, model))
    rows = []
    for l in range(cfg.n_layers):
        for h in range(cfg.n_heads):
            rows.append(
                dict(
                    model=name,
                    layer=l,
                    head=h,
                    tv=tv[:, l, h].mean().item(),
                    tv_sd=tv[:, l, h].std().item() if n_perms > 1 else math.nan,
                    floor=floor[l, h].item(),
                    positions_removed=remove_positions,
                )
            )
    return pd.DataFrame(rows)


def head_sensitivity_rows(model, per_head: pd.DataFrame, per_head_nopos: pd.DataFrame | None) -> pd.DataFrame:
    name = view(model).name
    top = per_head.sort_values("tv", ascending=False).head(3)
    desc = ", ".join(f"L{r.layer}H{r.head} {r.tv:.2f}" for r in top.itertuples())
    rows = []
    if per_head_nopos is not None:
        causal = model.cfg.is_causal
        sub = per_head_nopos[per_head_nopos.layer == 0] if causal else per_head_nopos
        ref = per_head[per_head.layer == 0] if causal else per_head
        where = "layer 0 heads" if causal else "all heads"
        rows.append(
            make_row(
                name,
                "permutation: per-head pattern",
                f"max over {where} of mean TV(pattern, unshuffled pattern), positions removed",
                sub.tv.max(),
                SAFETY * sub.floor.max(),
                "holds",
                baseline=ref.tv.max(),
                rule=FLOOR_RULE + " (floor: max row TV fp32 vs fp64)",
                detail=(
                    "layer-0 heads see token-only vectors: content only once positions are gone (later layers "
                    f"see prefix-dependent vectors; max TV there {per_head_nopos.tv.max():.2f})"
                    if causal
                    else "every head follows content only once positions are gone"
                ),
            )
        )
    rows.append(
        make_row(
            name,
            "permutation: per-head pattern",
            "max over heads of mean TV(pattern, unshuffled pattern), with positions",
            per_head.tv.max(),
            SAFETY * per_head.floor.max(),
            "breaks",
            rule=FLOOR_RULE + " (floor: max row TV fp32 vs fp64)",
            detail=f"most positional heads: {desc}; median head {per_head.tv.median():.2f}",
        )
    )
    return pd.DataFrame(rows)


def tv_heatmap(per_head: pd.DataFrame, ax=None):
    """Layer x head heatmap of the mean TV distance (seaborn)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    grid = per_head.pivot(index="layer", columns="head", values="tv")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.45 * grid.shape[1] + 2, 0.3 * grid.shape[0] + 1.5))
    sns.heatmap(
        grid,
        vmin=0,
        vmax=1,
        cmap="viridis",
        annot=grid.shape[0] <= 8,
        fmt=".2f",
        ax=ax,
        cbar_kws=dict(label="mean TV after un-shuffling"),
    )
    ax.set_title(f"{per_head.model.iloc[0]}: how positional is each head (0 = content only)")
    return ax
