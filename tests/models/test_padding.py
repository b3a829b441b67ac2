"""Left padding, right padding and no padding give the same per-sequence results (issue 2).

Positions follow the attention mask, so a left-padded sequence sees the same positions as when it
runs alone. Hugging Face BERT does not do this (it numbers positions 0..n-1 whatever the mask), so
its left-padded outputs differ from its unpadded ones; ours must not.

Batching changes the shapes of the matrix products, so the comparisons use
``torch.testing.assert_close`` at its default fp32 tolerance rather than bitwise equality.
"""

from __future__ import annotations

import pytest
import torch

from tests.factories import randomized, tiny_config

LENGTHS = (5, 8, 3)
POSITIONAL = ("learned", "sinusoidal", "rope", "alibi", "none")


def _pad(seqs, side, pad_id=0):
    n = max(len(s) for s in seqs)
    tokens = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    mask = torch.zeros(len(seqs), n, dtype=torch.long)
    spans = []
    for b, s in enumerate(seqs):
        start = 0 if side == "right" else n - len(s)
        tokens[b, start : start + len(s)] = s
        mask[b, start : start + len(s)] = 1
        spans.append(slice(start, start + len(s)))
    return tokens, mask, spans


def _run(model, tokens, mask=None, types=None):
    # the final hidden state (what return_type="hidden" gives) is read from its hook, to save a pass
    last = (
        "ln_final.hook_normalized" if model.ln_final is not None else f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
    )
    with torch.no_grad():
        out, cache = model.run_with_cache(
            tokens,
            attention_mask=mask,
            token_type_ids=types,
            names_filter=lambda n: n.endswith("hook_pattern") or n == last,
        )
    hidden = cache[last]
    patterns = torch.stack([cache[f"blocks.{l}.attn.hook_pattern"] for l in range(model.cfg.n_layers)], 1)
    return out, hidden, patterns  # patterns [batch, layer, head, query_pos, key_pos]


def _check_same_as_alone(model, seqs, side, types=None, **tol):
    tokens, mask, spans = _pad(seqs, side, pad_id=model.cfg.pad_token_id or 0)
    assert (mask == 0).any()
    padded_types = None
    if types is not None:
        padded_types = torch.zeros_like(tokens)
        for b, span in enumerate(spans):
            padded_types[b, span] = types[b]
    out, hidden, patterns = _run(model, tokens, mask, padded_types)
    for b, (s, span) in enumerate(zip(seqs, spans)):
        alone_out, alone_hidden, alone_patterns = _run(model, s[None], None, None if types is None else types[b][None])
        torch.testing.assert_close(hidden[b, span], alone_hidden[0], **tol)
        torch.testing.assert_close(out[b, span], alone_out[0], **tol)
        torch.testing.assert_close(patterns[b, :, :, span, span], alone_patterns[0], **tol)
        # and the padding itself gets nothing
        assert (patterns[b][..., mask[b] == 0][..., span, :] == 0).all()


@pytest.mark.parametrize("attention", ["causal", "bidirectional"])
@pytest.mark.parametrize("positional", POSITIONAL)
@pytest.mark.parametrize("side", ["left", "right"])
def test_tiny_padding_matches_alone(attention, positional, side):
    cfg = tiny_config(attention=attention, positional=positional, attn_bias=True, mlp_bias=True)
    model = randomized(cfg, seed=3)
    gen = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, cfg.d_vocab, (n,), generator=gen) for n in LENGTHS]
    _check_same_as_alone(model, seqs, side)


def _real_seqs(model, texts):
    b = model.to_words(texts)
    n = b.attention_mask.sum(-1)
    seqs = [b.input_ids[i, : n[i]] for i in range(len(texts))]
    types = [b.token_type_ids[i, : n[i]] for i in range(len(texts))]
    return seqs, types


@pytest.mark.parametrize("side", ["left", "right"])
def test_minilm_padding_matches_alone(minilm, side):
    seqs, types = _real_seqs(minilm, ["The cat sleeps.", "The keys to the cabinet are on the table.", "Hello"])
    _check_same_as_alone(minilm, seqs, side, types=types)


@pytest.mark.parametrize("side", ["left", "right"])
def test_smollm2_padding_matches_alone(smollm2, side):
    """Batching changes the GEMM shapes, and SmolLM2 carries a residual stream up to ~2e4 through
    30 layers, so batched and alone runs differ by float noise even with no padding semantics at
    stake. Measured: hidden (after the final norm, scale ~1) 2.9e-5, logits (scale ~30) 5.0e-5,
    patterns 2.7e-6, the same for left and right padding; Hugging Face's own model differs by
    4.6e-5..5.9e-5 on the logits under the same batching. A padding bug (a padded key receiving
    weight, positions not following the mask) moves values by orders of magnitude more."""
    seqs, _ = _real_seqs(smollm2, ["The cat sleeps.", "My dog likes to run in the park."])
    _check_same_as_alone(smollm2, seqs, side, atol=1e-4, rtol=1e-5)


def test_hf_bert_itself_differs_under_left_padding(minilm, hf_minilm):
    """Documents why our left-padding test is not vacuous: with arange positions, Hugging Face
    BERT's left-padded output differs from its unpadded output; ours (above) matches."""
    hf_model, _ = hf_minilm
    seqs, _ = _real_seqs(minilm, ["The cat sleeps.", "The keys to the cabinet are on the table."])
    tokens, mask, spans = _pad(seqs, "left", pad_id=minilm.cfg.pad_token_id or 0)
    with torch.no_grad():
        padded = hf_model(input_ids=tokens, attention_mask=mask).last_hidden_state
        alone = hf_model(input_ids=seqs[0][None]).last_hidden_state
        ours_padded = minilm(tokens, attention_mask=mask)
        ours_alone = minilm(seqs[0][None])
    assert (padded[0, spans[0]] - alone[0]).abs().max() > 1e-2
    torch.testing.assert_close(ours_padded[0, spans[0]], ours_alone[0])
