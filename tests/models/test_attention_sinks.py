"""Learned attention sinks (gpt-oss, ``Config.attn_sinks``) on the tiny gpt-oss of ``models/tiny.py``:
what ``hook_pattern`` holds when a sink logit takes part in the softmax, that such layers never run
the fused path, and that the parity matrix catches a model that drops the sink.

The forward pass against Hugging Face (fp32 and bf16, padding, generation) is the parity matrix's
(tests/models/test_parity_matrix.py)."""

from __future__ import annotations

import pytest
import torch

import models
from models import families, parity
from models.tiny import save_tiny, tiny_inputs


@pytest.fixture(scope="module")
def oss(tmp_path_factory):
    folder, _ = save_tiny("gpt_oss", tmp_path_factory.mktemp("oss") / "gpt_oss")
    return folder, models.load(str(folder))


def test_the_pattern_is_the_real_keys_share_of_a_softmax_with_the_sink(oss):
    """softmax(cat(scores, sink))[..., :-1] from the cached scores and ``attn.sinks`` is the pattern;
    its rows sum to 1 minus the sink's share; a sink logit far below every score gives the
    plain softmax back."""
    _, model = oss
    tokens, _ = tiny_inputs("none")
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    for l in range(model.cfg.n_layers):
        scores = cache[f"blocks.{l}.attn.hook_attn_scores"].double()
        pattern = cache[f"blocks.{l}.attn.hook_pattern"].double()
        sink = model.blocks[l].attn.sinks.double()
        with_sink = torch.cat([scores, sink[None, :, None, None].expand(*scores.shape[:3], 1)], -1).softmax(-1)
        torch.testing.assert_close(pattern, with_sink[..., :-1], rtol=1e-6, atol=1e-7)
        share = 1 - pattern.sum(-1)
        torch.testing.assert_close(share, with_sink[..., -1], rtol=1e-5, atol=1e-6)
        assert share.min() > -1e-6 and share.max() < 1 and share.mean() > 1e-2, l  # the sink takes a real part
    with torch.no_grad():
        saved = [b.attn.sinks.clone() for b in model.blocks]
        try:
            for b in model.blocks:
                b.attn.sinks.fill_(-1e4)
            _, cache = model.run_with_cache(tokens)
        finally:
            for b, s in zip(model.blocks, saved):
                b.attn.sinks.copy_(s)
    scores = cache["blocks.0.attn.hook_attn_scores"]
    torch.testing.assert_close(cache["blocks.0.attn.hook_pattern"], scores.softmax(-1), rtol=1e-6, atol=1e-7)


def test_learned_sink_layers_always_run_the_eager_path(oss):
    """Hugging Face has no SDPA path for learned sinks; ours runs eager on them, hooked or not: the
    default forward, ``exact=True`` and a forward with the pattern hooked give the same bits."""
    _, model = oss
    tokens, mask = tiny_inputs("left")
    with torch.no_grad():
        plain = model(tokens, attention_mask=mask)
        exact = model(tokens, attention_mask=mask, exact=True)
        hooked = model.run_with_hooks(
            tokens, attention_mask=mask, fwd_hooks=[("blocks.0.attn.hook_pattern", lambda t, hook: None)]
        )
    assert torch.equal(plain, exact) and torch.equal(plain, hooked)


def test_a_model_that_drops_the_sink_fails_the_parity_matrix(oss, monkeypatch):
    """The converter planted to ignore the sink logits: the matrix's eager cell fails with the numbers."""
    folder, _ = oss
    fam = families.FAMILIES["gpt_oss"]
    monkeypatch.setitem(
        families.FAMILIES, "gpt_oss", fam._replace(extra=lambda hf_cfg: fam.extra(hf_cfg) | {"attn_sinks": False})
    )
    cell = parity.measure("gpt_oss", folder, checks=("eager",))["eager"]
    assert cell.status == parity.FAIL and cell.value > 1e-3 and cell.where, cell


def test_the_sinks_are_a_parameter_per_head_and_refused_where_they_do_not_fit(oss):
    _, model = oss
    attn = model.blocks[0].attn
    assert attn.sinks.shape == (model.cfg.n_heads,) and attn.sinks.requires_grad
    state = model.state_dict()
    state["blocks.1.attn.sinks"] = torch.zeros(model.cfg.n_heads + 1)
    with pytest.raises(models.CheckpointError, match=r"blocks\.1\.attn\.sinks") as info:
        models.load_state_dict_checked(model, state)
    assert f"({model.cfg.n_heads + 1},)" in str(info.value) and f"({model.cfg.n_heads},)" in str(info.value)
