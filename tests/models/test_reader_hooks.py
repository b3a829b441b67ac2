"""Reader-input hooks (``hook_attn_in``, ``hook_q_input``, ``hook_k_input``, ``hook_v_input``,
``hook_mlp_in``; models/split_inputs.py): they cost nothing unless asked for, reading them keeps the
output bitwise, the split path is the same function (fp32, within 1e-5 of the largest logit), and
an edit reaches exactly the reader it was made for."""

from __future__ import annotations

import pytest
import torch

from models.split_inputs import READER_HOOKS, split_inputs
from tests.factories import TINY, randomized, tiny_config

PRE = sorted(k for k, v in TINY.items() if v.get("norm_placement", "pre") == "pre")


def _model(key: str):
    return randomized(tiny_config(name=key, **TINY[key]), seed=3)


def _tokens(model, n: int = 7, batch: int = 2):
    return torch.randint(0, model.cfg.d_vocab, (batch, n), generator=torch.Generator().manual_seed(5))


def _out(model, tokens, **kw):
    return model(tokens, return_type="hidden" if not model.cfg.lm_head else "logits", **kw)


@pytest.mark.parametrize("key", sorted(TINY))
def test_caching_the_reader_inputs_keeps_the_output_bitwise(key):
    model = _model(key)
    tokens = _tokens(model)
    plain = _out(model, tokens)
    names = lambda n: n.rsplit(".", 1)[-1] in READER_HOOKS  # noqa: E731
    out, cache = model.run_with_cache(
        tokens, names_filter=names, return_type="hidden" if not model.cfg.lm_head else "logits"
    )
    assert torch.equal(out, plain)
    cfg = model.cfg
    b, p = tokens.shape
    assert cache["blocks.1.hook_q_input"].shape == (b, p, cfg.n_heads, cfg.d_model)
    assert cache["blocks.1.hook_k_input"].shape == (b, p, cfg.kv_heads, cfg.d_model)
    assert cache["blocks.1.hook_v_input"].shape == (b, p, cfg.kv_heads, cfg.d_model)
    # the copies hold the residual the reader reads (pre-norm: before the norm)
    _, full = model.run_with_cache(tokens, names_filter=lambda n: "resid" in n, return_type=None)
    assert torch.equal(cache["blocks.1.hook_attn_in"], full["blocks.1.hook_resid_pre"])
    assert torch.equal(cache["blocks.1.hook_mlp_in"], full["blocks.1.hook_resid_mid"])
    for h in range(cfg.kv_heads):
        assert torch.equal(cache["blocks.1.hook_k_input"][:, :, h], full["blocks.1.hook_resid_pre"])


@pytest.mark.parametrize("key", sorted(TINY))
def test_the_split_path_is_the_same_function(key):
    """Bound: fp32, max |split - plain| <= 1e-5 * max |plain| (other kernels, not bitwise)."""
    model = _model(key)
    tokens = _tokens(model)
    plain = _out(model, tokens)
    with split_inputs(model):
        split = _out(model, tokens)
    assert not model.blocks[0].__dict__.get("_split_inputs")  # restored
    err = (split - plain).abs().max().item()
    assert err <= 1e-5 * plain.abs().max().item(), err


@pytest.mark.parametrize("key", ["llama_like", "gpt2_like", "bert_like"])
def test_editing_one_query_heads_input_changes_only_that_heads_queries(key):
    model = _model(key)
    tokens = _tokens(model)
    names = ("blocks.1.attn.hook_q", "blocks.1.attn.hook_k", "blocks.1.attn.hook_v")
    with split_inputs(model):
        _, base = model.run_with_cache(tokens, names_filter=lambda n: n in names, return_type=None)

        def edit(x, hook):
            x = x.clone()
            x[:, :, 2] = x[:, :, 2] * 3.0 + 0.5
            return x

        store = {}
        hooks = [("blocks.1.hook_q_input", edit)]
        hooks += [(n, lambda x, hook: store.__setitem__(hook.name, x.detach().clone())) for n in names]
        model.run_with_hooks(tokens, return_type=None, fwd_hooks=hooks)
    q, q0 = store["blocks.1.attn.hook_q"], base["blocks.1.attn.hook_q"]
    changed = [h for h in range(model.cfg.n_heads) if not torch.equal(q[:, :, h], q0[:, :, h])]
    assert changed == [2]
    assert torch.equal(store["blocks.1.attn.hook_k"], base["blocks.1.attn.hook_k"])
    assert torch.equal(store["blocks.1.attn.hook_v"], base["blocks.1.attn.hook_v"])


def test_a_kv_heads_input_is_shared_by_its_query_heads():
    """GQA (4 query heads, 2 kv heads): editing kv head 1's k input changes kv head 1's keys only,
    so the scores of query heads 2 and 3 (its group) change and those of heads 0 and 1 do not."""
    model = _model("llama_like")
    assert (model.cfg.n_heads, model.cfg.kv_heads) == (4, 2)
    tokens = _tokens(model)
    names = ("blocks.1.attn.hook_k", "blocks.1.attn.hook_attn_scores")
    _, base = model.run_with_cache(tokens, names_filter=lambda n: n in names, return_type=None)

    def edit(x, hook):
        x[:, :, 1] = x[:, :, 1].flip(1)  # in place: detected, the split path runs
        return x

    store = {}
    hooks = [("blocks.1.hook_k_input", edit)]
    hooks += [(n, lambda x, hook: store.__setitem__(hook.name, x.detach().clone())) for n in names]
    model.run_with_hooks(tokens, return_type=None, fwd_hooks=hooks)
    k, k0 = store["blocks.1.attn.hook_k"], base["blocks.1.attn.hook_k"]
    assert torch.allclose(k[:, :, 0], k0[:, :, 0], atol=1e-6) and not torch.allclose(k[:, :, 1], k0[:, :, 1])
    s, s0 = store["blocks.1.attn.hook_attn_scores"], base["blocks.1.attn.hook_attn_scores"]
    finite = s0.isfinite()
    diff = (s - s0).where(finite, 0).abs().amax(dim=(0, 2, 3))
    assert (diff[:2] < 1e-5).all() and (diff[2:] > 1e-3).all(), diff


@pytest.mark.parametrize("key", PRE)
def test_the_reader_gradients_add_up_to_the_attention_inputs(key):
    """hook_q/k/v_input are copies of hook_attn_in: the gradient at attn_in is the sum of the
    gradients at every head's copy (fp32, relative 1e-5). Backward hooks force the split path."""
    model = _model(key)
    tokens = _tokens(model)
    grads = {}

    def keep(g, hook):
        grads[hook.name] = g.detach().clone()

    names = [f"blocks.1.{n}" for n in ("hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input")]
    with model.hooks(bwd_hooks=[(n, keep) for n in names]):
        out = _out(model, tokens)
        out[:, -1].pow(2).sum().backward()
    model.zero_grad(set_to_none=True)
    total = sum(grads[n].sum(2) for n in names[1:])
    attn_in = grads["blocks.1.hook_attn_in"]
    assert attn_in.abs().max() > 0
    assert (total - attn_in).abs().max() <= 1e-5 * attn_in.abs().max(), key
