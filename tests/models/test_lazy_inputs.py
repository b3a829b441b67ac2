"""The reader inputs (``hook_attn_in``, ``hook_q/k/v_input``, ``hook_mlp_in``) and the norms'
``hook_scale`` in ``run_with_cache`` are computed on read from tensors the cache holds anyway
(``Transformer.lazy_cache_entries``, ``interp.hooks.LazyCacheDict``): the same bits and the same
keys in the same order as when the forward pass materialises them (a read-only hook on each makes
it do so, through the split path and beside the fused norm), on tiny models of every norm
placement and on MiniLM and SmolLM2; and the ordinary path whenever a hook could edit them: an
edit by a hook on a reader input, on ``hook_attn_in`` or on ``hook_scale`` still takes effect,
backward hooks still fire."""

from __future__ import annotations

import pytest
import torch

from interp.hooks import _Pending
from models.split_inputs import READER_HOOKS, split_inputs
from tests.factories import TINY, randomized, tiny_config

SANDWICH = dict(norm_placement="sandwich", norm="rmsnorm", norm_offset=1.0, positional="rope", qk_norm="head")
REORDERED = dict(norm_placement="reordered", norm="rmsnorm", positional="rope", qk_norm="full", n_kv_heads=2)
CONFIGS = {
    key: TINY[key] for key in ("gpt2_like", "bert_like", "llama_like", "qwen_like", "alibi_bidir_gqa", "none_post_rms")
}
CONFIGS |= {"sandwich": SANDWICH, "reordered": REORDERED}
LAZY_KINDS = (*READER_HOOKS, "hook_scale", "hook_result")  # what the cache may compute on read


def _lazy_kind(name: str) -> bool:
    return name.endswith(LAZY_KINDS)


def _watch(tensor, hook):  # read-only: the forward pass materialises the value and carries on
    return None


def _materialised(model, *args, **kwargs):
    """The cache as it was before: a read-only hook on every hook point the cache may compute on
    read makes the forward pass compute them (and takes them out of the lazy plan)."""
    names = [name for name in model.hook_dict if _lazy_kind(name)]
    with model.hooks(fwd_hooks=[(name, _watch) for name in names]):
        return model.run_with_cache(*args, **kwargs)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.contiguous().view(-1), b.contiguous().view(-1))


def _pending(cache) -> set[str]:
    return {name for name, value in dict.items(cache.cache_dict) if isinstance(value, _Pending)}


def _assert_same_cache(lazy, eager, where: str) -> None:
    assert list(lazy.keys()) == list(eager.keys()), where  # same names, same (forward) order
    for name in eager.keys():
        # bitwise: compare the raw bits, so -0.0 vs 0.0 or a NaN payload would show
        a, b = lazy[name], eager[name]
        bits = {4: torch.int32, 2: torch.int16}[a.element_size()]
        assert _same_bits(a.view(bits), b.view(bits)), f"{where}: {name}"


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def model_and_tokens(request):
    model = randomized(tiny_config(**CONFIGS[request.param]), seed=11)
    tokens = torch.randint(0, model.cfg.d_vocab, (3, 10), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, 7:] = 0  # right padding
    return request.param, model, tokens, mask


def test_lazy_inputs_and_scales_equal_the_materialised_ones_bitwise(model_and_tokens):
    key, model, tokens, mask = model_and_tokens
    logits, lazy = model.run_with_cache(tokens, attention_mask=mask)
    ref_logits, eager = _materialised(model, tokens, attention_mask=mask)
    pending = _pending(lazy)
    placement, n = model.cfg.norm_placement, model.cfg.n_layers
    expected = {f"blocks.{layer}.{hook}" for layer in range(n) for hook in READER_HOOKS}
    if placement != "reordered":  # ln1 and ln2 exist; the sandwich's ln1_post/ln2_post compute as before
        expected |= {f"blocks.{layer}.ln{i}.hook_scale" for layer in range(n) for i in (1, 2)}
    expected |= {name for name in ("ln_embed.hook_scale", "ln_final.hook_scale") if name in eager}
    assert expected <= pending, f"{key}: not lazy: {sorted(expected - pending)}"
    assert torch.equal(logits, ref_logits)
    _assert_same_cache(lazy, eager, key)


def test_the_plain_dict_has_them_computed(model_and_tokens):
    key, model, tokens, mask = model_and_tokens
    _, plain = model.run_with_cache(tokens, attention_mask=mask, return_cache_object=False)
    _, eager = _materialised(model, tokens, attention_mask=mask)
    assert type(plain) is dict and not any(isinstance(v, _Pending) for v in plain.values())
    for name in ("blocks.1.hook_q_input", "blocks.1.hook_k_input", "blocks.0.hook_mlp_in", "blocks.1.ln2.hook_scale"):
        if name in eager:
            assert _same_bits(plain[name], eager[name]), f"{key}: {name}"


def test_an_input_asked_for_alone_comes_from_the_uncached_residual():
    model = randomized(tiny_config(**TINY["llama_like"]), seed=12)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 8), generator=torch.Generator().manual_seed(1))
    wanted = ["blocks.1.hook_v_input", "blocks.1.ln1.hook_scale", "blocks.1.hook_mlp_in"]
    _, lazy = model.run_with_cache(tokens, names_filter=wanted)
    _, eager = _materialised(model, tokens, names_filter=wanted)
    # the scale's source (resid_pre) is not cached: it is computed in the forward pass, not held
    # as a residual for a [batch, pos, 1] value; the copies are made on read from the residual
    assert _pending(lazy) == {"blocks.1.hook_v_input", "blocks.1.hook_mlp_in"}
    assert list(lazy.keys()) == wanted == list(eager.keys())
    _assert_same_cache(lazy, eager, "names_filter")


def test_batch_dim_removed_like_the_other_entries():
    model = randomized(tiny_config(**TINY["bert_like"]), seed=13)
    tokens = torch.randint(0, model.cfg.d_vocab, (1, 7), generator=torch.Generator().manual_seed(2))
    _, lazy = model.run_with_cache(tokens, remove_batch_dim=True)
    _, eager = _materialised(model, tokens, remove_batch_dim=True)
    assert lazy["blocks.0.hook_q_input"].shape == (7, model.cfg.n_heads, model.cfg.d_model)
    assert lazy["blocks.0.ln1.hook_scale"].shape == (7, 1)
    _assert_same_cache(lazy, eager, "remove_batch_dim")


def test_an_edit_by_a_q_input_hook_still_takes_effect_and_is_cached():
    model = randomized(tiny_config(**TINY["llama_like"]), seed=14)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=torch.Generator().manual_seed(3))
    clean = model(tokens)
    name = "blocks.1.hook_q_input"

    def zero_head(q_input, hook):
        q_input[:, :, 2] = 0.0
        return q_input

    with model.hooks(fwd_hooks=[(name, zero_head)]):
        logits, cache = model.run_with_cache(tokens)
    assert not torch.equal(logits, clean)
    assert name not in _pending(cache)  # the hook's value, from the forward pass
    assert torch.count_nonzero(cache[name][:, :, 2]) == 0 and torch.count_nonzero(cache[name][:, :, 1]) > 0
    # the split path ran (ln1's hooks do not fire there), so the cache has no ln1 entries, as before
    assert "blocks.1.ln1.hook_scale" not in cache and "blocks.0.ln1.hook_scale" in cache


def test_an_edit_by_an_attn_in_hook_reaches_the_cached_q_inputs_and_scale():
    """The q/k/v inputs copy ``hook_attn_in``'s value and pre-norm ``ln1`` reads it: a hook there
    makes them materialise, with the edit in them."""
    model = randomized(tiny_config(**TINY["gpt2_like"]), seed=15)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=torch.Generator().manual_seed(4))
    clean = model(tokens)

    def shift(attn_in, hook):
        return attn_in + 1.0

    with model.hooks(fwd_hooks=[("blocks.1.hook_attn_in", shift)]):
        logits, cache = model.run_with_cache(tokens)
    assert not torch.equal(logits, clean)
    assert {"blocks.1.hook_q_input", "blocks.1.hook_v_input", "blocks.1.ln1.hook_scale"}.isdisjoint(_pending(cache))
    shifted = cache["blocks.1.hook_resid_pre"] + 1.0
    assert torch.equal(cache["blocks.1.hook_q_input"][:, :, 3], shifted)
    assert torch.equal(cache["blocks.1.ln1.hook_scale"], model.blocks[1].ln1.scale_of(shifted))
    assert "blocks.0.hook_q_input" in _pending(cache)  # the other layer is untouched: lazy


def test_an_edit_by_a_scale_hook_still_takes_effect_and_is_cached(model_and_tokens):
    key, model, tokens, mask = model_and_tokens
    reordered = model.cfg.norm_placement == "reordered"  # no ln2; ln2_post's scale is computed as before
    name = "blocks.0.ln2_post.hook_scale" if reordered else "blocks.0.ln2.hook_scale"
    clean = model(tokens, attention_mask=mask)

    def double(scale, hook):
        return scale * 2.0

    with model.hooks(fwd_hooks=[(name, double)]):
        logits, cache = model.run_with_cache(tokens, attention_mask=mask)
    _, lazy = model.run_with_cache(tokens, attention_mask=mask)
    assert not torch.equal(logits, clean), key
    assert name not in _pending(cache) and (name in _pending(lazy)) != reordered
    assert torch.equal(cache[name], lazy[name] * 2.0)


def test_an_edit_by_an_mlp_in_hook_reaches_the_cached_ln2_scale():
    model = randomized(tiny_config(**TINY["llama_like"]), seed=16)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=torch.Generator().manual_seed(5))

    def scale_up(mlp_in, hook):
        return mlp_in * 3.0

    with model.hooks(fwd_hooks=[("blocks.0.hook_mlp_in", scale_up)]):
        _, cache = model.run_with_cache(tokens)
    assert "blocks.0.ln2.hook_scale" not in _pending(cache)
    expected = model.blocks[0].ln2.scale_of(cache["blocks.0.hook_resid_mid"] * 3.0)
    assert torch.equal(cache["blocks.0.ln2.hook_scale"], expected)


def test_forced_split_inputs_keep_the_keys_of_the_materialised_cache():
    """Under ``split_inputs`` ln1's hooks do not fire: the cache has no ln1 entries, lazy or not."""
    model = randomized(tiny_config(**TINY["llama_like"]), seed=17)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=torch.Generator().manual_seed(6))
    with split_inputs(model):
        _, lazy = model.run_with_cache(tokens)
        _, eager = _materialised(model, tokens)
    assert "blocks.0.ln1.hook_scale" not in lazy and "blocks.0.hook_q_input" in _pending(lazy)
    _assert_same_cache(lazy, eager, "split_inputs")


def test_backward_hooks_on_inputs_and_scales_still_fire():
    model = randomized(tiny_config(**TINY["llama_like"]), seed=18)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=torch.Generator().manual_seed(7))
    _, cache = model.run_with_cache(tokens, return_type="loss", incl_bwd=True)
    assert not _pending(cache)
    # (ln1's hooks do not fire: a backward hook on the q/k/v inputs sends the block down the split path)
    for name in ("blocks.1.hook_q_input", "blocks.0.hook_k_input", "blocks.1.hook_mlp_in", "blocks.0.ln2.hook_scale"):
        grad = cache[name + "_grad"]
        assert grad.shape == cache[name].shape and torch.count_nonzero(grad) > 0, name


def test_tl_cache_methods_see_the_real_scales():
    model = randomized(tiny_config(**TINY["llama_like"]), seed=19)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=torch.Generator().manual_seed(8))
    _, lazy = model.run_with_cache(tokens)
    _, eager = _materialised(model, tokens)
    a, labels_a = lazy.accumulated_resid(layer=-1, apply_ln=True, return_labels=True)
    b, labels_b = eager.accumulated_resid(layer=-1, apply_ln=True, return_labels=True)
    assert labels_a == labels_b and torch.equal(a, b)
    stack = lazy.decompose_resid(layer=1)
    assert torch.equal(lazy.apply_ln_to_stack(stack, layer=1), eager.apply_ln_to_stack(stack, layer=1))
    assert torch.equal(lazy.apply_ln_to_stack(stack, layer=1, mlp_input=True), eager.apply_ln_to_stack(stack, 1, True))


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_real_models_lazy_equals_materialised_bitwise(request, name):
    model = request.getfixturevalue(name)
    batch = model.to_words(["The cat sleeps on the mat.", "Dogs bark."])
    kwargs = dict(attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids)
    with torch.no_grad():
        plain = model(batch.input_ids, **kwargs, exact=True)  # caching the patterns runs the eager path
        logits, lazy = model.run_with_cache(batch.input_ids, **kwargs)
        ref_logits, eager = _materialised(model, batch.input_ids, **kwargs)
    n = model.cfg.n_layers
    assert {f"blocks.{n - 1}.hook_q_input", f"blocks.{n - 1}.ln2.hook_scale"} <= _pending(lazy)
    assert torch.equal(logits, plain) and torch.equal(ref_logits, plain)  # read-only hooks change nothing
    _assert_same_cache(lazy, eager, name)
