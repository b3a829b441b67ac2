"""Hook names from one place, and one view of what a model is (ours and TransformerLens's bridge)."""

from __future__ import annotations

import pytest

from interp.names import act_name, layer_of
from interp.view import view


def test_act_name_full_and_short_names(minilm):
    assert act_name(3, "attn.hook_z") == "blocks.3.attn.hook_z"
    assert act_name(0, "ln1.hook_normalized") == "blocks.0.ln1.hook_normalized"
    assert act_name(2, "pattern") == "blocks.2.attn.hook_pattern"  # TransformerLens's short names
    assert act_name(1, "resid_pre") == "blocks.1.hook_resid_pre"
    assert layer_of("blocks.11.attn.hook_q") == 11
    names = set(minilm.hook_dict)
    for short in ("z", "q", "k", "v", "pattern", "attn_scores", "resid_pre", "resid_post", "attn_out", "mlp_out"):
        assert act_name(5, short) in names, short
    with pytest.raises(ValueError, match="layer"):
        act_name(-1, "attn.hook_z")
    with pytest.raises(ValueError, match="per-block"):
        layer_of("hook_embed")


def test_view_of_our_models(minilm, smollm2):
    v = view(minilm)
    assert (v.name, v.n_layers, v.n_heads, v.n_kv_heads, v.causal, v.lm_head, v.is_bridge) == (
        "minilm",
        6,
        12,
        12,
        False,
        False,
        False,
    )
    assert v.d_vocab == 30522 and str(v.device) == "cpu" and view(v) is v
    assert 101 in v.special_ids and 102 in v.special_ids  # [CLS], [SEP]
    s = view(smollm2)
    assert (s.n_layers, s.n_heads, s.n_kv_heads, s.causal, s.lm_head) == (30, 9, 3, True, True)
    with pytest.raises(TypeError, match="cfg.n_layers"):
        view(object())


@pytest.mark.slow
def test_view_of_a_bridge_agrees_with_ours(minilm, minilm_bridge):
    ours, theirs = view(minilm), view(minilm_bridge)
    assert theirs.is_bridge and not ours.is_bridge
    for field in ("n_layers", "n_heads", "d_head", "d_model", "causal", "d_vocab"):
        assert getattr(theirs, field) == getattr(ours, field), field
