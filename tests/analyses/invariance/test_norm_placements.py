"""The attention layer's input on every norm placement (``common.attn_input_hook``): pre-norm and
Gemma's sandwich norms read ln1's output, post-norm (BERT) and OLMo-2's reordered norms (no ln1:
attention reads the residual itself) read ``hook_resid_pre``. The hook must exist, and calling the
layer on its value must give the model's own attention output (after ln1_post where there is one:
``hook_attn_out`` is what is added to the residual). Then every invariance check runs on a tiny
OLMo-2 and agrees with theory."""

from __future__ import annotations

import pytest
import torch

import models
from analyses import invariance
from analyses.invariance.common import attention_inputs, attn_input_hook, layer_call
from tests.factories import TINY, randomized, save_tiny_family, tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")

EXPECTED = {
    "llama_like": "ln1.hook_normalized",
    "bert_like": "hook_resid_pre",
    "gemma3": "ln1.hook_normalized",
    "olmo2": "hook_resid_pre",
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = {key: randomized(tiny_config(name=key, **TINY[key]), seed=5) for key in ("llama_like", "bert_like")}
    for key in ("gemma3", "olmo2"):
        out[key] = models.load(str(save_tiny_family(key, tmp_path_factory.mktemp("ckpt") / key)))
    assert out["olmo2"].cfg.norm_placement == "reordered" and out["olmo2"].blocks[0].ln1 is None
    assert out["gemma3"].cfg.norm_placement == "sandwich"
    return out


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_the_attention_input_hook_exists_and_the_layer_reproduces_the_attention_output(tiny, key):
    model = tiny[key]
    tokens = torch.randint(0, 50, (2, 4), generator=torch.Generator().manual_seed(1))  # within Gemma's window
    names = [attn_input_hook(model.cfg, layer) for layer in range(model.cfg.n_layers)]
    assert names == [f"blocks.{layer}.{EXPECTED[key]}" for layer in range(model.cfg.n_layers)]
    assert set(names) <= set(model.hook_names())
    xs = attention_inputs(model, tokens)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_attn_out"))
        for layer, x in enumerate(xs):
            out = layer_call(model, layer, x, causal=model.cfg.is_causal, rope=model.cfg.positional == "rope")
            post = model.blocks[layer].ln1_post
            added = out if post is None else post(out)
            own = cache[f"blocks.{layer}.hook_attn_out"]
            assert (added - own).abs().max() <= 1e-5 * own.abs().max(), (key, layer)


def test_every_invariance_check_runs_on_olmo2_and_agrees_with_theory(tiny):
    model = tiny["olmo2"]
    result = invariance.run(model, n_tokens=10, seed=3)
    table = result.table
    assert table.passed.all(), table[~table.passed][["check", "quantity", "value", "tolerance"]]
    checks = (
        "permutation: one attention layer",
        "rotation: whole model",
        "relative position: shift all positions",
        "sqrt(d) scale",
        "rotation: what can be interpreted",
        "rotation: W_Q A, W_K A^-T (conditioning)",
    )
    assert set(checks) <= set(table.check), set(checks) - set(table.check)
