"""The fused attention path (issue 16, part 1): a layer whose ``hook_attn_scores`` and
``hook_pattern`` nobody hooks runs ``scaled_dot_product_attention``; any hook there, or
``exact=True``, runs the eager path.

Claims tested here: the two paths agree within 1e-5 on every tiny config (padding, GQA, RoPE,
ALiBi, causal and bidirectional, KV cache, gradients); the path is chosen per layer; the other
attention hooks fire and edit on the fused path; and comparisons between runs (ablation, patching,
the validation sweep) run both passes on one path, so an edit that changes nothing has exactly zero
effect. Bitwise parity with Hugging Face's SDPA and eager attention is in test_parity_hf.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from interp import interventions as iv
from tests.factories import TINY, tiny_batch, tiny_model

TOL = 1e-5


def _not_attention(name):
    return not name.endswith(("hook_pattern", "hook_attn_scores"))


@pytest.fixture
def sdpa_calls(monkeypatch):
    """Counts the calls of ``F.scaled_dot_product_attention`` (which the model calls through ``F``)."""
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    return calls


def _real(out, mask):
    return out[mask.bool()]


@pytest.mark.parametrize("key", list(TINY))
@pytest.mark.parametrize("padded", [False, True])
def test_fused_matches_eager_on_every_tiny_config(key, padded, sdpa_calls):
    """Every hook but the scores and the pattern, and the output, on real positions. In fp64 the
    paths compute the same function: within 1e-10 (measured <= 1e-14; a wrong mask, bias or head
    grouping moves values by 1e-2 or more). In fp32 within 1e-5 relative to each tensor's largest
    value (measured <= 1e-6): the randomised tiny models' residual stream reaches ~30, where one fp32
    ulp is 2e-6, so an absolute 1e-5 would ask two summation orders to agree within 1-5 ulps."""
    model = tiny_model(key)
    tokens, mask = tiny_batch(model.cfg)
    if not padded:
        mask = torch.ones_like(mask)
    for dtype, bound, relative in ((torch.float64, 1e-10, False), (torch.float32, TOL, True)):
        model = model.to(dtype)
        sdpa_calls.clear()
        with torch.no_grad():
            eager, ecache = model.run_with_cache(tokens, attention_mask=mask, exact=True, names_filter=_not_attention)
            assert not sdpa_calls
            fused, fcache = model.run_with_cache(tokens, attention_mask=mask, names_filter=_not_attention)
        assert len(sdpa_calls) == model.cfg.n_layers, "every layer must take the fused path"
        assert set(fcache) == set(ecache) and any(n.endswith("hook_z") for n in fcache)
        assert fused.dtype == dtype and torch.isfinite(fused).all(), "padded rows must not turn into NaN"
        pairs = {n: (_real(fcache[n], mask), _real(ecache[n], mask)) for n in fcache}
        pairs["output"] = (_real(fused, mask), _real(eager, mask))
        worst = {}
        for n, (a, b) in pairs.items():
            scale = b.abs().max().item() if relative else 1.0
            worst[n] = (a - b).abs().max().item() / max(scale, 1e-30)
        name = max(worst, key=worst.get)
        assert worst[name] <= bound, f"{key} {dtype}: fused vs eager differ by {worst[name]:.3g} at {name}"


@pytest.mark.parametrize("key", ["llama_like", "alibi_bidir_gqa", "bert_like"])
def test_gradients_of_both_paths_agree(key):
    """Training runs the fused path: its gradients are the eager path's."""
    tokens, mask = tiny_batch(tiny_model(key).cfg)
    grads = {}
    for exact in (False, True):
        model = tiny_model(key)
        out = model(tokens, attention_mask=mask, exact=exact, return_type="hidden" if key == "bert_like" else "default")
        (out[mask.bool()] ** 2).mean().backward()
        grads[exact] = {n: p.grad for n, p in model.named_parameters()}
    for n in grads[True]:
        torch.testing.assert_close(grads[False][n], grads[True][n], atol=TOL, rtol=1e-4, msg=n)


def test_path_is_chosen_per_layer_and_by_backward_hooks(sdpa_calls):
    model = tiny_model("llama_like")
    tokens, mask = tiny_batch(model.cfg)
    with torch.no_grad():
        model.run_with_cache(tokens, attention_mask=mask, names_filter="blocks.0.attn.hook_pattern")
    assert len(sdpa_calls) == model.cfg.n_layers - 1  # layer 0 eager (its pattern is read), layer 1 fused
    sdpa_calls.clear()
    with torch.no_grad():
        model.run_with_hooks(
            tokens, attention_mask=mask, fwd_hooks=[("blocks.1.attn.hook_attn_scores", lambda s, hook: s)]
        )
    assert len(sdpa_calls) == model.cfg.n_layers - 1
    sdpa_calls.clear()
    seen = []
    out = model.run_with_hooks(
        tokens, attention_mask=mask, bwd_hooks=[("blocks.0.attn.hook_pattern", lambda g, hook: seen.append(g.shape))]
    )
    assert len(sdpa_calls) == model.cfg.n_layers - 1  # a backward hook needs the pattern too
    out.sum().backward()
    assert seen == [(3, model.cfg.n_heads, 9, 9)]


def test_exact_as_attribute_argument_and_bound_input(sdpa_calls):
    model = tiny_model("gpt2_like")
    tokens, mask = tiny_batch(model.cfg)
    with torch.no_grad():
        reference = model(tokens, attention_mask=mask, exact=True)
        model.exact = True
        try:
            assert torch.equal(model(tokens, attention_mask=mask), reference)
            assert not sdpa_calls
            fused = model(tokens, attention_mask=mask, exact=False)  # the argument wins over the attribute
            assert len(sdpa_calls) == model.cfg.n_layers
        finally:
            model.exact = False
        with model.inputs_bound(tokens, attention_mask=mask, exact=True):
            assert torch.equal(model(tokens), reference)
        assert torch.equal(model(tokens, attention_mask=mask), fused)
        assert not torch.equal(fused, reference), "the paths should differ in the last bits here (else test nothing)"
    with pytest.raises(TypeError, match="inputs_bound takes forward arguments"):
        with model.inputs_bound(tokens, exactly=True):
            pass


def test_hooks_on_q_k_v_z_result_fire_and_edit_on_the_fused_path(sdpa_calls):
    model = tiny_model("qwen_like")
    tokens, mask = tiny_batch(model.cfg)

    def halve_k(k, hook):
        return k / 2

    def zero_head(z, hook):
        z = z.clone()
        z[:, :, 1] = 0
        return z

    def drop_head(result, hook):
        result = result.clone()
        result[:, :, 2] = 0
        return result

    hooks = [
        ("blocks.0.attn.hook_k", halve_k),
        ("blocks.1.attn.hook_z", zero_head),
        ("blocks.1.attn.hook_result", drop_head),
    ]
    with torch.no_grad():
        plain = model(tokens, attention_mask=mask)
        outs = {e: model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=hooks, exact=e) for e in (False, True)}
    assert len(sdpa_calls) == 2 * model.cfg.n_layers  # the plain run and the fused edited run
    assert (outs[False] - plain).abs().max() > 1e-2, "the edits must change the output"
    assert (_real(outs[False], mask) - _real(outs[True], mask)).abs().max() <= TOL


@pytest.mark.parametrize("key", ["llama_like", "gpt2_like"])
def test_generation_with_kv_cache_on_both_paths(key):
    from models.transformer import KVCache

    model = tiny_model(key)
    tokens, mask = tiny_batch(model.cfg)
    mask = torch.ones_like(mask)
    with torch.no_grad():
        logits = {}
        for exact in (False, True):
            cache = KVCache(model.cfg.n_layers)
            first = model(tokens[:, :5], past_kv_cache=cache, exact=exact)
            second = model(tokens[:, 5:6], past_kv_cache=cache, exact=exact)  # one new token: no mask
            third = model(tokens[:, 6:], past_kv_cache=cache, exact=exact)  # three new tokens: causal mask
            logits[exact] = torch.cat([first, second, third], dim=1)
        whole = model(tokens, exact=True)
    torch.testing.assert_close(logits[False], logits[True], atol=TOL, rtol=0)
    torch.testing.assert_close(logits[False], whole, atol=TOL, rtol=0)


# ---- comparisons between runs: one path for both passes, so a null edit has exactly zero effect ----


def _identity_source(model, tokens, mask):
    _, z = iv.cache_z(model, tokens, range(model.cfg.n_layers), attention_mask=mask)
    return z


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("key", ["llama_like", "bert_like", "alibi"])
def test_null_edit_has_exactly_zero_effect(key, exact):
    model = tiny_model(key)
    tokens, mask = tiny_batch(model.cfg)
    model.exact = exact
    clean, z = iv.cache_z(model, tokens, range(model.cfg.n_layers), attention_mask=mask)
    # ablating heads with their own clean values (a patch from the same run) changes nothing
    edited = iv.run_ablated(model, tokens, [(0, 1), (1, 3)], attention_mask=mask, source=z)
    assert torch.equal(edited, clean)
    # the sweep (from cached layer inputs, and through transformer_lens.patching) with that source
    metric = {"first": lambda out: out[:, -1, 0] if out.ndim == 3 else out[:, 0]}
    expected = metric["first"](clean).numpy()
    for from_layer in (True, False):
        swept = iv.head_sweep(model, tokens, z, metric, attention_mask=mask, from_layer=from_layer)
        assert (swept["first"] == expected[None]).all(), f"from_layer={from_layer}: a null patch moved the metric"


def test_mixing_paths_would_not_give_zero(sdpa_calls):
    """Why the runs above must share a path: the clean run of a patterns cache (eager) and an edited
    run on hook_z alone (fused) differ even when the edit changes nothing."""
    model = tiny_model("llama_like")
    tokens, mask = tiny_batch(model.cfg)
    with torch.no_grad():
        eager_clean, _ = model.run_with_cache(tokens, attention_mask=mask, names_filter=lambda n: "pattern" in n)
        z = _identity_source(model, tokens, mask)
    fused_edit = iv.run_ablated(model, tokens, [(0, 1)], attention_mask=mask, source=z)
    gap = (_real(eager_clean, mask) - _real(fused_edit, mask)).abs().max().item()
    assert 0 < gap <= TOL


def test_validation_sweep_on_minilm_null_patch_is_zero(minilm):
    """The validation sweep's machinery on a real model: patching a head with its own clean values
    gives exactly the clean metric, on the default (fused) path."""
    b = minilm.to_words(["The cat sleeps on the mat.", "Dogs bark loudly."])
    kw = dict(attention_mask=b.attention_mask, token_type_ids=b.token_type_ids)
    clean, z = iv.cache_z(minilm, b.input_ids, [0, 5], **kw)
    metric = {"norm": lambda out: out[:, 0].norm(dim=-1)}
    swept = iv.head_sweep(
        minilm,
        b.input_ids,
        z,
        metric,
        heads=[(0, 3), (5, 7)],
        attention_mask=b.attention_mask,
        token_type_ids=b.token_type_ids,
    )
    assert (swept["norm"] == metric["norm"](clean).numpy()[None]).all()


@pytest.mark.parametrize("exact", [False, True])
def test_the_kv_cache_grows_geometrically_and_keeps_the_concatenated_bits(exact, monkeypatch):
    """Decoding token by token, the cache's buffers double when full (log2 n reallocations, not one
    per token) and every step's logits equal those of a cache that concatenates at each step, as
    Hugging Face's ``DynamicCache`` does (the reference, planted through ``_LayerKV.update``)."""
    from models import generate as g
    from models.transformer import KVCache

    model = tiny_model("llama_like")
    tokens, _ = tiny_batch(model.cfg)
    n = tokens.shape[1]

    def decode() -> tuple[torch.Tensor, KVCache]:
        cache = KVCache(model.cfg.n_layers)
        with torch.no_grad():
            steps = [model(tokens[:, :3], past_kv_cache=cache, exact=exact)]
            steps += [model(tokens[:, i : i + 1], past_kv_cache=cache, exact=exact) for i in range(3, n)]
        return torch.cat(steps, dim=1), cache

    grown, cache = decode()
    layer = cache.layers[0]
    assert layer.n == n and layer.capacity >= n and layer.capacity < 2 * n
    assert layer.k.shape[-2] == n and torch.equal(layer.k, cache.layers[0]._k[:, :, :n])

    def concatenate(self, k, v):
        if self._k is None:
            self.set(k, v)
        else:
            self.set(torch.cat([self.k, k], dim=-2), torch.cat([self.v, v], dim=-2))
        return self.k, self.v

    monkeypatch.setattr(g._LayerKV, "update", concatenate)
    concatenated, reference = decode()
    assert reference.layers[0].capacity == n
    assert torch.equal(grown, concatenated)


def test_the_kv_cache_reallocates_log2_times():
    from models.generate import _LayerKV

    kv, grown = _LayerKV(), 0
    kv.update(torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4))
    for i in range(200):
        before = kv._k
        kv.update(torch.full((1, 2, 1, 4), float(i)), torch.full((1, 2, 1, 4), float(i)))
        grown += kv._k is not before
    assert grown == 6  # 5 -> 10 -> 20 -> 40 -> 80 -> 160 -> 320 positions
    assert kv.k.shape == (1, 2, 205, 4) and torch.equal(kv.k[0, 0, 5:, 0], torch.arange(200.0))
