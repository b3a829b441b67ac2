"""Hooks on the toolkit's transformer: temporary, effective, and complete (issue 2)."""

from __future__ import annotations

import pytest
import torch

from interp.hooks import UnknownHookError
from tests.factories import TINY, randomized, tiny_batch, tiny_config, tiny_model

# The documented per-layer hook list (docs and /tmp preamble); "ln2.*" = hook_scale, hook_normalized.
BLOCK_HOOKS = [
    "hook_resid_pre",
    "ln1.hook_scale",
    "ln1.hook_normalized",
    "attn.hook_q",
    "attn.hook_k",
    "attn.hook_v",
    "attn.hook_rot_q",
    "attn.hook_rot_k",
    "attn.hook_attn_scores",
    "attn.hook_pattern",
    "attn.hook_z",
    "attn.hook_result",
    "hook_attn_out",
    "hook_resid_mid",
    "ln2.hook_scale",
    "ln2.hook_normalized",
    "mlp.hook_pre",
    "mlp.hook_post",
    "hook_mlp_out",
    "hook_resid_post",
]
MODEL_HOOKS = ["hook_embed", "hook_pos_embed", "hook_token_type_embed"]


def n_attached(model) -> int:
    return sum(len(hp._forward_hooks) + len(hp._backward_hooks) for hp in model.hook_dict.values())


class Boom(RuntimeError):
    pass


def _raise(value, hook):
    raise Boom("hook failed on purpose")


@pytest.fixture
def model():
    return tiny_model("llama_like")


@pytest.fixture
def batch(model):
    return tiny_batch(model.cfg)


# ---- hooks never outlive their call ---------------------------------------------------------------


def test_hooks_removed_after_each_kind_of_call(model, batch):
    tokens, mask = batch
    seen = []
    fwd = [("blocks.0.attn.hook_pattern", lambda v, hook: seen.append(hook.name))]
    with torch.no_grad():
        model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=fwd)
        assert n_attached(model) == 0
        with model.hooks(fwd_hooks=fwd):
            assert n_attached(model) == 1
            model(tokens, attention_mask=mask)
        assert n_attached(model) == 0
        model.run_with_cache(tokens, attention_mask=mask)
        assert n_attached(model) == 0
    assert seen == ["blocks.0.attn.hook_pattern"] * 2


def test_hooks_removed_when_a_hook_raises(model, batch):
    tokens, mask = batch
    bad = [("blocks.1.attn.hook_z", _raise)]
    with torch.no_grad():
        with pytest.raises(Boom):
            model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=bad)
        assert n_attached(model) == 0
        with pytest.raises(Boom):
            with model.hooks(fwd_hooks=bad):
                model(tokens, attention_mask=mask)
        assert n_attached(model) == 0
        # run_with_cache attaches caching hooks everywhere; one extra hook raises midway
        with pytest.raises(Boom):
            with model.hooks(fwd_hooks=bad):
                model.run_with_cache(tokens, attention_mask=mask)
        assert n_attached(model) == 0
        # and the model still computes what it did before
        clean = model(tokens, attention_mask=mask)
        assert torch.equal(clean, tiny_model("llama_like")(tokens, attention_mask=mask))


# ---- editing values changes the output ----------------------------------------------------------


def _zero_head(head):
    def hook(value, hook):
        value = value.clone()
        value[:, :, head] = 0  # hook_z / hook_result: [batch, pos, head, ...]
        return value

    return hook


def _zero_pattern_head(head):
    def hook(value, hook):
        value = value.clone()
        value[:, head] = 0  # [batch, head, query_pos, key_pos]
        return value

    return hook


@pytest.mark.parametrize("key", ["llama_like", "bert_like", "gpt2_like"])
def test_zeroing_a_head_changes_output_and_z_equals_result(key):
    model = tiny_model(key)
    tokens, mask = tiny_batch(model.cfg)
    with torch.no_grad():
        base = model(tokens, attention_mask=mask)
        via_z = model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[("blocks.0.attn.hook_z", _zero_head(2))])
        via_result = model.run_with_hooks(
            tokens, attention_mask=mask, fwd_hooks=[("blocks.0.attn.hook_result", _zero_head(2))]
        )
        via_pattern = model.run_with_hooks(
            tokens, attention_mask=mask, fwd_hooks=[("blocks.0.attn.hook_pattern", _zero_pattern_head(2))]
        )
    real = mask.bool()
    for edited in (via_z, via_result, via_pattern):
        assert (edited - base)[real].abs().max() > 1e-3
    torch.testing.assert_close(via_result, via_z)
    torch.testing.assert_close(via_pattern, via_z)  # a zero pattern row gives a zero z


def test_in_place_edit_of_result_is_honoured(model, batch):
    tokens, mask = batch

    def in_place(value, hook):
        value[:, :, 1] = 0  # edit in place, return nothing
        return None

    with torch.no_grad():
        base = model(tokens, attention_mask=mask)
        edited = model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[("blocks.1.attn.hook_result", in_place)])
        via_z = model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[("blocks.1.attn.hook_z", _zero_head(1))])
    assert (edited - base).abs().max() > 1e-3
    torch.testing.assert_close(edited, via_z)


@pytest.mark.parametrize("key", ["llama_like", "bert_like"])
def test_edit_of_scale_is_honoured_in_place_and_by_return(key):
    model = tiny_model(key)
    tokens, mask = tiny_batch(model.cfg)

    def in_place(value, hook):
        value.mul_(2.0)

    def returned(value, hook):
        return value * 2.0

    name = "blocks.1.ln1.hook_scale"
    with torch.no_grad():
        base = model(tokens, attention_mask=mask)
        a = model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[(name, in_place)])
        b = model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[(name, returned)])
        # doubling the divisor halves ln1's output: check that directly on the normalized hook
        _, cache = model.run_with_cache(tokens, attention_mask=mask, names_filter=["blocks.1.ln1.hook_normalized"])
        halved = {}
        model.run_with_hooks(
            tokens,
            attention_mask=mask,
            fwd_hooks=[(name, in_place), ("blocks.1.ln1.hook_normalized", lambda v, hook: halved.setdefault("v", v))],
        )
    assert (a - base).abs().max() > 1e-3
    torch.testing.assert_close(a, b)
    ln1 = model.blocks[1].ln1
    bias = 0 if ln1.b is None else ln1.b.detach()
    clean = cache["blocks.1.ln1.hook_normalized"]
    torch.testing.assert_close(halved["v"] - bias, (clean - bias) / 2)


def test_reading_result_and_scale_without_editing_keeps_output_bitwise(model, batch):
    tokens, mask = batch
    names = ["blocks.0.attn.hook_result", "blocks.0.ln1.hook_scale", "blocks.1.ln2.hook_scale"]
    with torch.no_grad():
        base = model(tokens, attention_mask=mask)
        out = model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[(n, lambda v, hook: v) for n in names])
    assert torch.equal(out, base)


@pytest.mark.parametrize("key", list(TINY))
def test_caching_every_hook_leaves_output_bitwise_unchanged(key):
    model = tiny_model(key)
    tokens, mask = tiny_batch(model.cfg)
    with torch.no_grad():
        base = model(tokens, attention_mask=mask, exact=True)  # caching the patterns runs the eager path
        out, cache = model.run_with_cache(tokens, attention_mask=mask)
    assert set(cache) == set(model.hook_names())
    assert torch.equal(out, base)


def test_caching_every_hook_leaves_minilm_bitwise_unchanged(minilm):
    b = minilm.to_words(["The cat sleeps.", "A longer sentence with more words in it."])
    with torch.no_grad():
        base = minilm(b.input_ids, attention_mask=b.attention_mask, exact=True)
        out, _ = minilm.run_with_cache(b.input_ids, attention_mask=b.attention_mask)
    assert torch.equal(out, base)


# ---- names filters as in TransformerLens -------------------------------------------------------


def test_names_filters(model, batch):
    tokens, mask = batch
    with torch.no_grad():
        # exact=True: layer 0 would otherwise run fused (its pattern is not read), moving layer 1's last bits
        _, c_str = model.run_with_cache(
            tokens, attention_mask=mask, names_filter="blocks.1.attn.hook_pattern", exact=True
        )
        _, c_list = model.run_with_cache(
            tokens, attention_mask=mask, names_filter=["blocks.0.hook_resid_pre", "blocks.1.attn.hook_q"]
        )
        _, c_call = model.run_with_cache(tokens, attention_mask=mask, names_filter=lambda n: n.endswith("hook_z"))
        _, c_all = model.run_with_cache(tokens, attention_mask=mask)
    assert set(c_str) == {"blocks.1.attn.hook_pattern"}
    assert set(c_list) == {"blocks.0.hook_resid_pre", "blocks.1.attn.hook_q"}
    assert set(c_call) == {f"blocks.{l}.attn.hook_z" for l in range(model.cfg.n_layers)}
    assert set(c_all) == set(model.hook_names())
    assert torch.equal(c_str["blocks.1.attn.hook_pattern"], c_all["blocks.1.attn.hook_pattern"])
    with pytest.raises(UnknownHookError, match="hook_pattern"):
        model.run_with_cache(tokens, attention_mask=mask, names_filter="blocks.1.attn.hook_patern")
    with pytest.raises(UnknownHookError, match="hook_q"):
        model.run_with_cache(tokens, attention_mask=mask, names_filter=["blocks.0.attn.hook_qq"])


def test_hook_given_as_filter_function_fires_on_every_match(model, batch):
    tokens, mask = batch
    seen = []
    with torch.no_grad():
        model.run_with_hooks(
            tokens,
            attention_mask=mask,
            fwd_hooks=[(lambda n: n.endswith("attn.hook_pattern"), lambda v, hook: seen.append(hook.name))],
        )
    assert seen == [f"blocks.{l}.attn.hook_pattern" for l in range(model.cfg.n_layers)]
    assert n_attached(model) == 0


# ---- every documented hook exists, with its documented shape --------------------------------------


def _expected_shape(name, cfg, b, p):
    leaf = name.rsplit(".", 1)[-1]
    return {
        "hook_scale": (b, p, 1),
        "hook_q": (b, p, cfg.n_heads, cfg.d_head),
        "hook_rot_q": (b, p, cfg.n_heads, cfg.d_head),
        "hook_z": (b, p, cfg.n_heads, cfg.d_head),
        "hook_k": (b, p, cfg.kv_heads, cfg.d_head),
        "hook_v": (b, p, cfg.kv_heads, cfg.d_head),
        "hook_rot_k": (b, p, cfg.kv_heads, cfg.d_head),
        "hook_attn_scores": (b, cfg.n_heads, p, p),
        "hook_pattern": (b, cfg.n_heads, p, p),
        "hook_result": (b, p, cfg.n_heads, cfg.d_model),
        "hook_pre": (b, p, cfg.d_mlp),
        "hook_pre_linear": (b, p, cfg.d_mlp),
        "hook_post": (b, p, cfg.d_mlp),
    }.get(leaf, (b, p, cfg.d_model))


def _documented(model):
    cfg = model.cfg
    names = list(MODEL_HOOKS)
    for l in range(cfg.n_layers):
        names += [f"blocks.{l}.{h}" for h in BLOCK_HOOKS]
        if cfg.mlp == "gated":
            names.append(f"blocks.{l}.mlp.hook_pre_linear")
    if cfg.final_norm:
        names += ["ln_final.hook_scale", "ln_final.hook_normalized"]
    if cfg.embed_norm:
        names += ["ln_embed.hook_scale", "ln_embed.hook_normalized"]
    return names


def _check_documented_hooks(model, tokens, mask):
    names = _documented(model)
    missing = sorted(set(names) - set(model.hook_names()))
    assert not missing, f"documented hooks missing: {missing}"
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, attention_mask=mask)
    b, p = tokens.shape
    for name in names:
        assert tuple(cache[name].shape) == _expected_shape(name, model.cfg, b, p), name


@pytest.mark.parametrize("key", list(TINY))
def test_every_documented_hook_exists_at_every_layer_tiny(key):
    model = tiny_model(key)
    tokens, mask = tiny_batch(model.cfg)
    _check_documented_hooks(model, tokens, mask)


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_every_documented_hook_exists_at_every_layer_real(name, request):
    model = request.getfixturevalue(name)
    b = model.to_words(["The cat sleeps."])
    _check_documented_hooks(model, b.input_ids, b.attention_mask)
    assert (
        "ln_embed.hook_scale" in model.hook_names() if name == "minilm" else "ln_final.hook_scale" in model.hook_names()
    )


def test_pos_embed_hook_is_zero_without_additive_positions():
    for positional in ("rope", "alibi", "none"):
        model = randomized(tiny_config(positional=positional))
        tokens, mask = tiny_batch(model.cfg)
        with torch.no_grad():
            _, cache = model.run_with_cache(tokens, attention_mask=mask, names_filter="hook_pos_embed")
        assert (cache["hook_pos_embed"] == 0).all(), positional
