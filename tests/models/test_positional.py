"""Positional encodings: what each scheme promises, checked against independent formulas (issue 2)."""

from __future__ import annotations

import math

import pytest
import torch

import models
from tests.factories import randomized, tiny_config


def _cache(model, tokens, mask=None, names=None):
    with torch.no_grad():
        return model.run_with_cache(tokens, attention_mask=mask, names_filter=names)


@pytest.mark.parametrize(
    "overrides",
    [
        dict(positional="sinusoidal"),
        dict(positional="alibi"),
        dict(positional="rope"),
        dict(positional="rope", rope_interleaved=True),
        dict(positional="rope", rotary_dim=4),
        dict(positional="rope", rotary_dim=6, rope_interleaved=True),
        dict(positional="none"),
        dict(positional="learned"),
    ],
    ids=[
        "sinusoidal",
        "alibi",
        "rope",
        "rope_interleaved",
        "rope_partial",
        "rope_partial_interleaved",
        "none",
        "learned",
    ],
)
def test_each_scheme_runs_and_order_matters_unless_none(overrides):
    # bidirectional, so that only the positional scheme can tell token orders apart (a causal mask
    # itself leaks order)
    model = randomized(tiny_config(attention="bidirectional", **overrides), seed=1)
    tokens = torch.tensor([[3, 14, 15, 9, 26, 5]])
    swapped = tokens[:, [1, 0, 2, 3, 4, 5]]  # swap the first two tokens
    with torch.no_grad():
        out, swapped_out = model(tokens), model(swapped)
    assert out.shape == (1, 6, model.cfg.d_vocab) and torch.isfinite(out).all()
    # the last token sees the same multiset of tokens in both orders: only positions can tell them apart
    diff = (out[0, -1] - swapped_out[0, -1]).abs().max().item()
    if overrides["positional"] == "none":
        assert diff < 1e-5
    else:
        assert diff > 1e-4, f"{overrides}: the order of tokens makes no difference"


def test_alibi_slopes_match_press_et_al():
    # Press et al. (2022): for n heads a power of two, slopes 2^(-8/n * i), i = 1..n
    expected8 = torch.tensor([2.0**-i for i in range(1, 9)])
    torch.testing.assert_close(models.alibi_slopes(8), expected8, rtol=0, atol=0)
    torch.testing.assert_close(models.alibi_slopes(4), torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]))
    # not a power of two (their reference code): the 8 slopes for 8 heads, then every other slope
    # of the 16-head sequence 2^(-0.5 i): 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
    expected12 = [2.0**-i for i in range(1, 9)] + [2.0 ** -(0.5 + i) for i in range(4)]
    torch.testing.assert_close(models.alibi_slopes(12), torch.tensor(expected12))


def test_alibi_bias_in_scores():
    """scores = q.k / sqrt(d) - m_h |i - j| (causal, so j <= i), with m_h for 8 heads."""
    model = randomized(tiny_config(positional="alibi", n_heads=8, d_head=4), seed=2)
    tokens = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
    _, cache = _cache(model, tokens)
    q, k = cache["blocks.0.attn.hook_q"][0], cache["blocks.0.attn.hook_k"][0]  # [pos, head, d_head]
    dot = torch.einsum("qhd,khd->hqk", q, k) / 2.0
    scores = cache["blocks.0.attn.hook_attn_scores"][0]
    for h in range(8):
        for i in range(7):
            for j in range(i + 1):
                expected = dot[h, i, j] - 2.0 ** -(h + 1) * (i - j)
                assert abs(scores[h, i, j] - expected) < 1e-5, (h, i, j)


def test_sinusoidal_matches_the_formula():
    d = 32
    model = randomized(tiny_config(positional="sinusoidal", d_model=d), seed=0)
    _, cache = _cache(model, torch.arange(10)[None], names=["hook_pos_embed"])
    pe = cache["hook_pos_embed"][0]
    for p in range(10):
        for i in range(d // 2):
            angle = p / 10000 ** (2 * i / d)
            assert abs(pe[p, 2 * i] - math.sin(angle)) < 1e-5
            assert abs(pe[p, 2 * i + 1] - math.cos(angle)) < 1e-5


def _rotate(x, pos, theta, rot_dim, interleaved):
    """Reference RoPE written from the paper: each plane (a, b) of the first rot_dim dims turns by
    pos * theta^(-2i/rot_dim)."""
    out = x.clone()
    half = rot_dim // 2
    for i in range(half):
        a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + half)
        angle = pos * theta ** (-2 * i / rot_dim)
        c, s = math.cos(angle), math.sin(angle)
        out[..., a] = x[..., a] * c - x[..., b] * s
        out[..., b] = x[..., a] * s + x[..., b] * c
    return out


@pytest.mark.parametrize("interleaved,rot_dim", [(False, None), (True, None), (False, 4), (True, 6)])
def test_rope_matches_reference_rotation(interleaved, rot_dim):
    cfg = tiny_config(positional="rope", rope_interleaved=interleaved, rotary_dim=rot_dim, n_kv_heads=2)
    model = randomized(cfg, seed=4)
    _, cache = _cache(model, torch.tensor([[5, 9, 2, 7, 7, 1]]))
    r = cfg.rot_dim
    half = r // 2
    planes = [(2 * i, 2 * i + 1) for i in range(half)] if interleaved else [(i, i + half) for i in range(half)]
    assert models.rope_planes(cfg) == planes
    for kind in ("q", "k"):
        raw, rot = cache[f"blocks.0.attn.hook_{kind}"][0], cache[f"blocks.0.attn.hook_rot_{kind}"][0]
        for p in range(6):
            torch.testing.assert_close(rot[p], _rotate(raw[p], p, cfg.rope_theta, r, interleaved))
        assert torch.equal(rot[:, :, r:], raw[:, :, r:])  # dimensions past rotary_dim untouched
        assert not torch.allclose(rot[1:], raw[1:])


@pytest.mark.parametrize("attention", ["bidirectional", "causal"])
def test_rope_scores_depend_only_on_relative_distance(attention):
    """Shift every position by k (k real tokens in front): layer 0's q and k before rotation do not
    depend on position (no additive position embedding), so with RoPE the block of scores among
    the shifted tokens must equal the unshifted scores. With learned positions it must not."""
    seq = torch.tensor([[4, 17, 8, 8, 30, 2]])
    prefix = torch.tensor([[11, 12, 13]])
    shifted = torch.cat([prefix, seq], dim=1)
    k = prefix.shape[1]
    for positional, should_match in (("rope", True), ("learned", False)):
        model = randomized(tiny_config(attention=attention, positional=positional), seed=6)
        name = "blocks.0.attn.hook_attn_scores"
        _, c0 = _cache(model, seq, names=[name, "blocks.0.attn.hook_rot_q"])
        _, c1 = _cache(model, shifted, names=[name, "blocks.0.attn.hook_rot_q"])
        a, b = c0[name][0], c1[name][0, :, k:, k:]
        if should_match:
            torch.testing.assert_close(b, a)
            # ... although the rotated queries themselves did change with the shift
            assert (c1["blocks.0.attn.hook_rot_q"][0, k:] - c0["blocks.0.attn.hook_rot_q"][0]).abs().max() > 1e-3
        else:
            finite = torch.isfinite(a)
            assert (b - a)[finite].abs().max() > 1e-3


def test_rope_relative_under_padding_too():
    """Left padding does not shift positions (they follow the mask): scores of a left-padded row
    equal those of the row alone."""
    model = randomized(tiny_config(attention="bidirectional", positional="rope"), seed=7)
    seq = torch.tensor([[4, 17, 8, 8, 30, 2]])
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), seq], dim=1)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1]])
    name = "blocks.1.attn.hook_attn_scores"
    _, c0 = _cache(model, seq, names=[name])
    _, c1 = _cache(model, padded, mask, names=[name])
    torch.testing.assert_close(c1[name][0, :, 3:, 3:], c0[name][0])


def test_no_positions_bidirectional_is_permutation_equivariant():
    model = randomized(tiny_config(attention="bidirectional", positional="none", lm_head=False), seed=8)
    tokens = torch.tensor([[3, 14, 15, 9, 26, 5, 35]])
    perm = torch.tensor([4, 0, 6, 2, 1, 5, 3])
    with torch.no_grad():
        out, cache = model.run_with_cache(tokens, names_filter=["blocks.1.attn.hook_pattern"])
        out_p, cache_p = model.run_with_cache(tokens[:, perm], names_filter=["blocks.1.attn.hook_pattern"])
    torch.testing.assert_close(out_p, out[:, perm])
    pat = cache["blocks.1.attn.hook_pattern"]
    torch.testing.assert_close(cache_p["blocks.1.attn.hook_pattern"], pat[:, :, perm][:, :, :, perm])
    # the control: with learned positions the same permutation changes the answer
    learned = randomized(tiny_config(attention="bidirectional", positional="learned", lm_head=False), seed=8)
    with torch.no_grad():
        assert (learned(tokens[:, perm]) - learned(tokens)[:, perm]).abs().max() > 1e-3


def test_embed_scale_multiplies_the_token_embeddings_only(tmp_path):
    """Vaswani et al.'s sqrt(d_model) on the token embeddings (Config.embed_scale): the embedding
    hook carries exactly c * W_E[tokens], the position embedding is unchanged, the default is the
    unscaled model, and a checkpoint keeps the setting."""
    tokens = torch.tensor([[3, 14, 15, 9, 26, 5]])
    plain = randomized(tiny_config(positional="sinusoidal"), seed=2)
    scaled = models.Transformer(plain.cfg.replace(embed_scale=math.sqrt(32)), seed=0)
    scaled.load_state_dict(plain.state_dict())
    assert plain.cfg.embed_scale == 1.0
    names = ["hook_embed", "hook_pos_embed"]
    _, c0 = _cache(plain, tokens, names=names)
    _, c1 = _cache(scaled, tokens, names=names)
    torch.testing.assert_close(c0["hook_embed"], plain.W_E[tokens].detach(), rtol=0, atol=0)
    torch.testing.assert_close(c1["hook_embed"], plain.W_E[tokens].detach() * math.sqrt(32), rtol=0, atol=0)
    torch.testing.assert_close(c1["hook_pos_embed"], c0["hook_pos_embed"], rtol=0, atol=0)
    with torch.no_grad():
        assert (scaled(tokens) - plain(tokens)).abs().max() > 1e-3
    models.save_checkpoint(scaled, tmp_path / "ckpt")
    again = models.load(str(tmp_path / "ckpt"))
    assert again.cfg.embed_scale == pytest.approx(math.sqrt(32))
    with torch.no_grad():
        torch.testing.assert_close(again(tokens), scaled(tokens), rtol=0, atol=0)


@pytest.mark.parametrize("bad", [0.0, -2.0, float("nan"), float("inf"), "2", True])
def test_bad_embed_scale_is_refused(bad):
    with pytest.raises(ValueError, match="embed_scale"):
        tiny_config(embed_scale=bad)
