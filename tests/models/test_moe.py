"""Mixture-of-experts layers (``models.mlp.MoE``: Mixtral, Qwen2-MoE, Qwen3-MoE, Granite-MoE, gpt-oss)
on tiny configs (``models/tiny.py``: top-2 or top-3 of 4 to 6 experts): the router hooks against Hugging Face's
own router outputs, planted router bugs that the parity matrix catches, and hooks that edit.

The forward pass itself against Hugging Face (eager experts), both paths, fp32 and bf16, padding and
generation, is the parity matrix's (tests/models/test_parity_matrix.py)."""

from __future__ import annotations

import pytest
import torch

import models
from models import parity
from models.mlp import MoE
from models.tiny import save_tiny, tiny_inputs

KEYS = ["mixtral", "qwen2_moe", "qwen3_moe", "granitemoe", "gpt_oss"]


@pytest.fixture(scope="module", params=KEYS)
def moe(request, tmp_path_factory):
    key = request.param
    folder, hf = save_tiny(key, tmp_path_factory.mktemp(key) / key)
    hf.set_attn_implementation("eager")
    return key, folder, models.load(str(folder)), hf


def _moe_layers(model):
    return [l for l in range(model.cfg.n_layers) if model.cfg.is_moe(l)]


def _hf_router(hf, l):
    """Hugging Face's router module of layer ``l`` (Mixtral and Qwen: ``mlp.gate``; gpt-oss:
    ``mlp.router``; Granite-MoE: ``block_sparse_moe.router``); each returns (logits, weights, indices)."""
    layer = hf.model.layers[l]
    moe = layer.block_sparse_moe if hasattr(layer, "block_sparse_moe") else layer.mlp
    return moe.router if hasattr(moe, "router") else moe.gate


def test_router_hooks_equal_hugging_faces_router_outputs(moe):
    """Per MoE layer: the logits (HF's ``output_router_logits``), and the chosen experts and their
    weights (HF's router module called on the same input), bitwise."""
    key, _, model, hf = moe
    tokens, mask = tiny_inputs("right")
    layers = _moe_layers(model)
    assert layers, key
    seen = {}
    handles = [
        _hf_router(hf, l).register_forward_hook(lambda mod, args, out, l=l: seen.__setitem__(l, (args[0].clone(), out)))
        for l in layers
    ]
    try:
        with torch.no_grad():
            ref = hf(input_ids=tokens, attention_mask=mask, output_router_logits=True, use_cache=False)
            _, cache = model.run_with_cache(tokens, attention_mask=mask, exact=True)
    finally:
        for h in handles:
            h.remove()
    assert len(ref.router_logits) == len(layers)
    real = mask.bool().reshape(-1)  # padded tokens are routed too; their hidden states are not claimed
    for i, l in enumerate(layers):
        at = f"blocks.{l}.mlp."
        logits = cache[at + "hook_router_logits"]
        assert logits.shape == (3, 13, model.cfg.n_experts)
        assert torch.equal(logits.reshape(-1, model.cfg.n_experts)[real], ref.router_logits[i][real]), (key, l)
        _, hf_weights, hf_chosen = seen[l][1]
        chosen, weights = cache[at + "hook_expert_indices"], cache[at + "hook_routing_weights"]
        assert torch.equal(chosen.reshape(hf_chosen.shape)[real], hf_chosen[real]), (key, l)
        assert torch.equal(weights.reshape(hf_weights.shape)[real], hf_weights[real]), (key, l)
        if model.cfg.router == "topk_softmax":  # a softmax over the k chosen logits: no all-expert softmax
            assert at + "hook_expert_weights" not in cache
            top = logits.topk(model.cfg.top_k, dim=-1)
            assert torch.equal(chosen, top.indices), (key, l)
            torch.testing.assert_close(weights.float(), top.values.float().softmax(-1))
            continue
        probs = cache[at + "hook_expert_weights"]
        assert probs.dtype == torch.float32 and torch.allclose(probs.sum(-1), torch.ones(3, 13))
        if model.cfg.norm_topk:  # renormalised: the chosen weights sum to 1
            assert torch.allclose(cache[at + "hook_routing_weights"].sum(-1), torch.ones(3, 13))


@pytest.mark.parametrize("bug", ["top_k - 1", "not renormalised"])
def test_a_planted_router_bug_fails_the_parity_matrix(moe, bug, monkeypatch):
    """The router with top-k off by one, or (where the family renormalises) its weights left as the
    softmax gave them: the matrix's eager and fused cells fail, naming the architecture and the numbers."""
    key, folder, _, _ = moe
    original = MoE.route

    def planted(self, flat, shape):
        cfg = self.cfg
        if bug == "top_k - 1":
            self.cfg = cfg.replace(top_k=cfg.top_k - 1)
        elif cfg.router == "softmax_topk":
            self.cfg = cfg.replace(norm_topk=not cfg.norm_topk)
        else:  # a softmax over the top k: planted as the softmax over every expert, read at the chosen k
            chosen, _ = original(self, flat, shape)
            logits = torch.nn.functional.linear(flat, self.router_weight, self.router_bias)
            return chosen, logits.float().softmax(-1).gather(1, chosen).to(flat.dtype)
        try:
            return original(self, flat, shape)
        finally:
            self.cfg = cfg

    monkeypatch.setattr(MoE, "route", planted)
    cells = parity.measure(key, folder, checks=("eager", "fused"))
    if key == "gpt_oss":  # Hugging Face has no SDPA path for learned sinks: the eager cell is the reference
        assert cells.pop("fused").status == parity.NO_REFERENCE
    for check, cell in cells.items():
        assert cell.status == parity.FAIL and cell.failed, (key, bug, check, cell)
        assert cell.value > 1e-3 and cell.where, (key, bug, check, cell.value)


def test_expert_hooks_edit_what_the_layer_computes(moe):
    """``hook_expert_out`` read only keeps the output's bits, and the weighted sum of its slots is
    ``hook_mlp_out`` (minus the shared expert); forcing every token onto expert 0 through
    ``hook_expert_indices`` changes the output; zero routing weights leave only the shared expert."""
    key, _, model, _ = moe
    tokens, mask = tiny_inputs("none")
    l = _moe_layers(model)[-1]
    at = f"blocks.{l}.mlp."
    with torch.no_grad():
        base, cache = model.run_with_cache(
            tokens, names_filter=lambda n: n.startswith(at) or n.endswith("hook_mlp_out")
        )
        read = model.run_with_hooks(tokens, fwd_hooks=[(at + "hook_expert_out", lambda t, hook: None)])
        assert torch.equal(read, base), key
        slots = {}
        model.run_with_hooks(
            tokens, fwd_hooks=[(at + "hook_expert_out", lambda t, hook: slots.setdefault("v", t.clone()))]
        )
        weights = cache[at + "hook_routing_weights"]
        routed = (slots["v"] * weights[..., None]).sum(2) * model.cfg.residual_multiplier  # Granite's
        mlp_out = cache[f"blocks.{l}.hook_mlp_out"]
        if model.cfg.d_shared_expert:  # routed = mlp_out - the gated shared expert's part
            assert not torch.allclose(routed, mlp_out, atol=1e-4)
        else:
            torch.testing.assert_close(routed, mlp_out, rtol=1e-5, atol=1e-6)

        def force(t, hook):
            return torch.zeros_like(t)

        forced = model.run_with_hooks(tokens, fwd_hooks=[(at + "hook_expert_indices", force)])
        assert not torch.allclose(forced, base, atol=1e-4), key
        silent = {}
        model.run_with_hooks(
            tokens,
            fwd_hooks=[
                (at + "hook_routing_weights", lambda t, hook: t * 0),
                (f"blocks.{l}.hook_mlp_out", lambda t, hook: silent.setdefault("v", t.clone())),
            ],
        )
    if model.cfg.d_shared_expert:
        assert silent["v"].abs().max() > 0
    else:
        assert torch.equal(silent["v"], torch.zeros_like(silent["v"]))


def test_config_refuses_a_top_k_that_does_not_fit():
    base = dict(d_model=16, n_layers=2, n_heads=2, d_head=8, d_mlp=32, d_vocab=11, n_ctx=16, mlp="gated")
    for fields, message in [
        (dict(n_experts=4, top_k=5), "top_k=5 must lie in 1..n_experts=4"),
        (dict(n_experts=4, top_k=0), "top_k=0 must lie in 1..n_experts=4"),
        (dict(n_experts=4, top_k=2, moe_layers=[True]), "moe_layers must name each of the 2 layers"),
    ]:
        with pytest.raises(ValueError, match=message) as info:
            models.Config(**base, **fields)
        assert "\n" not in str(info.value)


def test_expert_weight_views_compute_each_expert_and_stack_only_alike_layers(moe):
    """``mlp.W_gate``, ``W_in`` [expert, d_model, d_expert] and ``W_out`` [expert, d_expert, d_model]
    are views of the experts (an edit through them edits the layer); ``model.W_in`` stacks them over
    layers, and says why it cannot where dense and MoE layers mix (Qwen2-MoE)."""
    key, _, model, _ = moe
    mlp = model.blocks[_moe_layers(model)[-1]].mlp
    x = torch.randn(5, model.cfg.d_model, generator=torch.Generator().manual_seed(0))
    cfg = model.cfg
    for e in range(cfg.n_experts):
        if cfg.expert_kind == "gpt_oss":  # biases, the gate clamped above, up on both sides, (up + 1)
            gate = (x @ mlp.W_gate[e] + mlp.b_gate[e]).clamp(max=cfg.swiglu_limit)
            up = (x @ mlp.W_in[e] + mlp.b_in[e]).clamp(-cfg.swiglu_limit, cfg.swiglu_limit)
            by_hand = ((up + 1) * gate * torch.sigmoid(cfg.swiglu_alpha * gate)) @ mlp.W_out[e] + mlp.b_out[e]
        else:
            assert mlp.b_in is None and mlp.b_out is None
            by_hand = (torch.nn.functional.silu(x @ mlp.W_gate[e]) * (x @ mlp.W_in[e])) @ mlp.W_out[e]
        torch.testing.assert_close(by_hand, mlp.expert(e, x), rtol=1e-5, atol=1e-6)
    if all(model.cfg.is_moe(l) for l in range(model.cfg.n_layers)):
        assert model.W_in.shape == (model.cfg.n_layers, *mlp.W_in.shape)
    else:
        with pytest.raises(ValueError, match="shapes differ.*dense and mixture-of-experts layers") as info:
            _ = model.W_in
        assert "\n" not in str(info.value)
    bias = 0 if mlp.b_out is None else mlp.b_out[0]
    with torch.no_grad():
        before = mlp.expert(0, x) - bias
        mlp.W_out[0] *= 2
        torch.testing.assert_close(mlp.expert(0, x) - bias, 2 * before)
        mlp.W_out[0] /= 2
