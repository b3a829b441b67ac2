"""The public parts of the forward pass (``position_embedding``, ``rotate``, ``attention_layer``)
give exactly what the full forward pass computes at the same place."""

from __future__ import annotations

import pytest
import torch

from tests.factories import tiny_model


@pytest.mark.parametrize("key", ["gpt2_like", "llama_like", "sinusoidal_bidir", "alibi", "rope_partial_interleaved"])
def test_parts_equal_the_forward_pass(key):
    model = tiny_model(key)
    cfg = model.cfg
    tokens = torch.randint(0, cfg.d_vocab, (2, 7), generator=torch.Generator().manual_seed(0))
    positions = torch.arange(7).expand(2, 7)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
        assert torch.equal(
            model.position_embedding(positions).to(cache["hook_pos_embed"].dtype), cache["hook_pos_embed"]
        )
        # queries as the hooks see them: [batch, pos, head, d_head] before and after RoPE
        q, rot_q = cache["blocks.1.attn.hook_q"], cache["blocks.1.attn.hook_rot_q"]
        assert torch.equal(model.rotate(q.transpose(1, 2), positions).transpose(1, 2), rot_q)
        x = cache["blocks.1.ln1.hook_normalized"] if cfg.norm_placement == "pre" else cache["blocks.1.hook_resid_pre"]
        assert torch.equal(model.attention_layer(1, x), cache["blocks.1.hook_attn_out"])
        if cfg.positional == "rope":  # leaving RoPE out changes the output
            assert not torch.allclose(model.attention_layer(1, x, rope=False), cache["blocks.1.hook_attn_out"])
    with pytest.raises(ValueError, match="layers 0..1"):
        model.attention_layer(2, x)
