"""Identities that must hold between the hook values of any model (issue 2).

Run on the two real models and on tiny seeded configs that together cover pre/post norm,
LayerNorm/RMSNorm, grouped-query attention, every positional scheme, gated and standard MLPs, and
biases on and off (biases and norm weights are randomised so that forgetting one shows).

Exact identities (same operation, same inputs) are checked with ``torch.equal``; identities that
recompute a value in a different operation order use ``torch.testing.assert_close`` at its default
fp32 tolerance (rtol 1.3e-6, atol 1e-5).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.factories import TINY, tiny_batch, tiny_model

SENTENCES = ["The cat sleeps on the mat.", "He said that the keys to the old cabinet were lost."]


def real_batch(model):
    b = model.to_words(SENTENCES)
    assert (b.attention_mask == 0).any(), "the batch must contain padding"
    return b.input_ids, b.attention_mask, b.token_type_ids


def ln(model_norm, x):
    """Independent recomputation of a Norm's output from its weights."""
    if model_norm.kind == "layernorm":
        return F.layer_norm(x, (x.shape[-1],), model_norm.w, model_norm.b, model_norm.eps)
    return model_norm.w * (x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + model_norm.eps))


@pytest.fixture(scope="module", params=["minilm", "smollm2", *TINY])
def cached(request):
    """(model, cache, mask [batch, pos] bool) for a padded batch, every hook cached (once per
    model: tests only read it)."""
    if request.param in ("minilm", "smollm2"):
        model = request.getfixturevalue(request.param)
        tokens, mask, types = real_batch(model)
    else:
        model = tiny_model(request.param)
        tokens, mask = tiny_batch(model.cfg)
        types = torch.randint(0, 2, tokens.shape) if model.cfg.n_token_types else None
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, attention_mask=mask, token_type_ids=types)
    return model, cache, mask.bool()


def _layers(model):
    return range(model.cfg.n_layers)


def test_head_results_sum_to_attn_out(cached):
    model, cache, mask = cached
    for l in _layers(model):
        attn = model.blocks[l].attn
        total = cache[f"blocks.{l}.attn.hook_result"].sum(dim=2)
        if attn.b_O is not None:
            total = total + attn.b_O
        torch.testing.assert_close(total, cache[f"blocks.{l}.hook_attn_out"])
        # and each head's result is its own z through its own slice of W_O
        z = cache[f"blocks.{l}.attn.hook_z"]
        torch.testing.assert_close(
            cache[f"blocks.{l}.attn.hook_result"], torch.einsum("bphd,hdm->bphm", z, attn.W_O.detach())
        )


def test_residual_identities(cached):
    model, cache, mask = cached
    post = model.cfg.norm_placement == "post"
    for l in _layers(model):
        c = lambda name: cache[f"blocks.{l}.{name}"]  # noqa: E731
        block = model.blocks[l]
        with torch.no_grad():
            if post:  # resid_mid = ln1(resid_pre + attn_out); resid_post = ln2(resid_mid + mlp_out)
                torch.testing.assert_close(c("hook_resid_mid"), ln(block.ln1, c("hook_attn_out") + c("hook_resid_pre")))
                torch.testing.assert_close(c("hook_resid_post"), ln(block.ln2, c("hook_mlp_out") + c("hook_resid_mid")))
                assert torch.equal(c("ln1.hook_normalized"), c("hook_resid_mid"))
            else:  # the adds are the model's own operations: exact
                assert torch.equal(c("hook_resid_mid"), c("hook_resid_pre") + c("hook_attn_out"))
                assert torch.equal(c("hook_resid_post"), c("hook_resid_mid") + c("hook_mlp_out"))
                torch.testing.assert_close(c("ln1.hook_normalized"), ln(block.ln1, c("hook_resid_pre")))
                torch.testing.assert_close(c("ln2.hook_normalized"), ln(block.ln2, c("hook_resid_mid")))
        if l + 1 < model.cfg.n_layers:
            assert torch.equal(cache[f"blocks.{l + 1}.hook_resid_pre"], c("hook_resid_post"))
    last = cache[f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"]
    if model.ln_final is not None:
        with torch.no_grad():
            torch.testing.assert_close(cache["ln_final.hook_normalized"], ln(model.ln_final, last))
    # the embedding sum feeds block 0
    emb = cache["hook_embed"] + cache["hook_token_type_embed"] + cache["hook_pos_embed"]
    if model.ln_embed is not None:
        with torch.no_grad():
            emb = ln(model.ln_embed, cache["hook_embed"] + cache["hook_token_type_embed"] + cache["hook_pos_embed"])
    torch.testing.assert_close(cache["blocks.0.hook_resid_pre"], emb)


def test_scale_hook_is_the_norm_divisor(cached):
    model, cache, mask = cached
    block = model.blocks[0]
    x = cache["blocks.0.hook_resid_pre"]
    if model.cfg.norm_placement == "post":
        x = cache["blocks.0.hook_attn_out"] + x
    if block.ln1.kind == "layernorm":
        x = x - x.mean(-1, keepdim=True)
    expected = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + block.ln1.eps)
    torch.testing.assert_close(cache["blocks.0.ln1.hook_scale"], expected)


def test_pattern_is_softmax_of_scores_and_rows_sum_to_one(cached):
    model, cache, mask = cached
    for l in _layers(model):
        scores = cache[f"blocks.{l}.attn.hook_attn_scores"]
        pattern = cache[f"blocks.{l}.attn.hook_pattern"]
        real_q = mask[:, None, :, None].expand_as(pattern)
        if model.cfg.is_causal:  # a left-padded causal row sees no key at padded query positions
            real_q = real_q & (mask.long().cumsum(-1) > 0)[:, None, :, None]
        torch.testing.assert_close(pattern[real_q], F.softmax(scores, dim=-1)[real_q])
        rows = pattern.sum(-1)[real_q[..., 0]]
        torch.testing.assert_close(rows, torch.ones_like(rows))
        assert (pattern >= 0).all()


def test_masked_keys_get_exactly_zero(cached):
    model, cache, mask = cached
    n = mask.shape[1]
    pad_keys = ~mask[:, None, None, :]  # [batch, 1, 1, key_pos]
    assert pad_keys.any()
    for l in _layers(model):
        scores = cache[f"blocks.{l}.attn.hook_attn_scores"]
        pattern = cache[f"blocks.{l}.attn.hook_pattern"]
        blocked = pad_keys.expand_as(pattern)
        if model.cfg.is_causal:
            upper = torch.ones(n, n, dtype=torch.bool).triu(1)
            blocked = blocked | upper
            assert (pattern[..., upper] == 0).all(), "causal upper triangle must be exactly zero"
            assert torch.isneginf(scores[..., upper]).all()
        assert (pattern[blocked] == 0).all(), "masked keys must get exactly zero weight"
        assert torch.isneginf(scores[blocked]).all()
        assert torch.isfinite(scores[~blocked]).all()


def test_z_is_pattern_times_v(cached):
    model, cache, mask = cached
    g = model.cfg.group_size
    for l in _layers(model):
        v = cache[f"blocks.{l}.attn.hook_v"]  # [batch, pos, kv_head, d_head]
        assert v.shape[2] == model.cfg.kv_heads
        v = v.repeat_interleave(g, dim=2)  # kv head j serves query heads j*g .. (j+1)*g-1
        pattern = cache[f"blocks.{l}.attn.hook_pattern"]
        z = torch.einsum("bhqk,bkhd->bqhd", pattern, v)
        torch.testing.assert_close(cache[f"blocks.{l}.attn.hook_z"], z)


def test_q_k_v_are_linear_in_the_normalised_input(cached):
    model, cache, mask = cached
    for l in _layers(model):
        attn = model.blocks[l].attn
        # pre-norm: attention reads ln1's output; post-norm: it reads the residual itself
        key = f"blocks.{l}.ln1.hook_normalized" if model.cfg.norm_placement == "pre" else f"blocks.{l}.hook_resid_pre"
        x = cache[key]
        for hook, W, b in (("q", attn.W_Q, attn.b_Q), ("k", attn.W_K, attn.b_K), ("v", attn.W_V, attn.b_V)):
            expected = torch.einsum("bpm,hmd->bphd", x, W.detach())
            if b is not None:
                expected = expected + b.detach()
            torch.testing.assert_close(cache[f"blocks.{l}.attn.hook_{hook}"], expected)


def test_scores_are_scaled_dot_products_of_rotated_q_k(cached):
    model, cache, mask = cached
    cfg = model.cfg
    for l in _layers(model):
        q = cache[f"blocks.{l}.attn.hook_rot_q"]
        k = cache[f"blocks.{l}.attn.hook_rot_k"].repeat_interleave(cfg.group_size, dim=2)
        if cfg.positional != "rope":
            assert torch.equal(q, cache[f"blocks.{l}.attn.hook_q"])
        expected = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(cfg.d_head)
        if cfg.positional == "alibi":  # Press et al.: -m_h |i - j|, positions counted over real tokens
            pos = (mask.long().cumsum(-1) - 1).clamp(min=0).float()
            slopes = torch.tensor([2.0 ** (-8 * (h + 1) / cfg.n_heads) for h in range(cfg.n_heads)])
            expected = expected - slopes[None, :, None, None] * (pos[:, None, :, None] - pos[:, None, None, :]).abs()
        scores = cache[f"blocks.{l}.attn.hook_attn_scores"]
        finite = torch.isfinite(scores)
        torch.testing.assert_close(scores[finite], expected[finite])


def test_mlp_hooks(cached):
    model, cache, mask = cached
    tanh = lambda x: F.gelu(x, approximate="tanh")  # noqa: E731  (gelu_new is the same function, other bits)
    act = {"gelu": F.gelu, "gelu_new": tanh, "gelu_pytorch_tanh": tanh, "relu": F.relu, "silu": F.silu}[model.cfg.act]
    for l in _layers(model):
        mlp = model.blocks[l].mlp
        pre = cache[f"blocks.{l}.mlp.hook_pre"]
        post = act(pre)
        if model.cfg.mlp == "gated":
            post = post * cache[f"blocks.{l}.mlp.hook_pre_linear"]
        torch.testing.assert_close(cache[f"blocks.{l}.mlp.hook_post"], post)
        out = cache[f"blocks.{l}.mlp.hook_post"] @ mlp.W_out.detach()
        if mlp.b_out is not None:
            out = out + mlp.b_out.detach()
        torch.testing.assert_close(cache[f"blocks.{l}.hook_mlp_out"], out)
