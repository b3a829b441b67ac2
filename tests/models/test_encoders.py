"""The encoders beside BERT (RoBERTa, ELECTRA, DistilBERT, ModernBERT) on their tiny configs of
``models/tiny.py``: what the parity matrix (tests/models/test_parity_matrix.py: both paths against
Hugging Face, bitwise, fp32 and bf16, padded rows equal to the rows alone) does not check: the Config
fields that set each apart, ModernBERT's bidirectional window attending exactly zero outside,
RoBERTa's positions as Hugging Face numbers them by default (from padding_idx + 1, on text its own
tokenizer pads), and the refusals."""

from __future__ import annotations

import json

import pytest
import torch

import models
from models.loading import UnsupportedModelError
from models.tiny import ARCHITECTURES, N, save_tiny, tiny_inputs

ENCODER_KEYS = sorted(k for k, t in ARCHITECTURES.items() if t.encoder and k != "bert")


@pytest.fixture(scope="module", params=ENCODER_KEYS)
def encoder(request, tmp_path_factory):
    key = request.param
    folder, hf = save_tiny(key, tmp_path_factory.mktemp(key) / key)
    return key, models.load(str(folder)), hf


def test_the_configs_carry_what_sets_each_encoder_apart(encoder):
    key, model, _ = encoder
    assert not model.cfg.is_causal and not model.cfg.lm_head
    for field, value in ARCHITECTURES[key].expect.items():
        assert getattr(model.cfg, field) == value, (key, field, getattr(model.cfg, field))


def test_a_bidirectional_window_attends_exactly_zero_outside(encoder):
    """|query - key| <= sliding_window on the local layers (both sides), every key on the global ones."""
    key, model, _ = encoder
    tokens, mask = tiny_inputs("none")
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, attention_mask=mask, names_filter=lambda n: n.endswith("hook_pattern"))
    distance = (torch.arange(N)[:, None] - torch.arange(N)[None, :]).abs()
    for l in range(model.cfg.n_layers):
        pattern = cache[f"blocks.{l}.attn.hook_pattern"]
        window = model.cfg.window(l)
        if window is None:
            assert (pattern > 0).all(), f"{key} layer {l}: a global layer that does not see every key"
        else:
            assert (pattern[..., distance > window] == 0).all() and (pattern[..., distance <= window] > 0).all()


def test_modernbert_block_0_reads_the_normed_embeddings_without_ln1(encoder):
    """ModernBERT's block 0 reads the embedding norm's output (no ln1 of its own); the post-norm
    encoders keep every block's ln1 (their norm after attention)."""
    key, model, _ = encoder
    assert model.cfg.first_attn_norm == (not key.startswith("modernbert")), key
    if key.startswith("modernbert"):
        assert model.blocks[0].ln1 is None and all(b.ln1 is not None for b in model.blocks[1:])
        assert model.ln_embed is not None and model.ln_final is not None
    else:
        assert all(b.ln1 is not None for b in model.blocks)


def test_a_checkpoint_round_trips(encoder, tmp_path):
    key, model, _ = encoder
    tokens, mask = tiny_inputs("right")
    folder = models.save_checkpoint(model, tmp_path / key)
    again = models.load(str(folder))
    assert again.cfg == model.cfg
    with torch.no_grad():
        assert torch.equal(again(tokens, attention_mask=mask), model(tokens, attention_mask=mask))


def _roberta_tokenizer(folder, pad: int) -> None:
    """A byte-level BPE tokenizer of single letters (no merges) whose special ids are the tiny
    RoBERTa's (<s> 0, </s> 2, <pad> ``pad``), saved into ``folder``."""
    from transformers import RobertaTokenizer

    specials = {"<s>": 0, "<unk>": 1, "</s>": 2, "<pad>": pad, "<mask>": 4}
    vocab = specials | {c: 5 + i for i, c in enumerate("abcdefghijklmnopqrstuvwxyzĠ")}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tok = RobertaTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    tok.save_pretrained(str(folder))


def test_roberta_on_text_matches_hf_numbering_its_own_positions(tmp_path):
    """Text through the folder's own tokenizer (<s> ... </s>, right-padded with <pad>): the hidden
    states equal Hugging Face's called as a user calls it (no position ids: HF numbers the positions
    from padding_idx + 1 over the tokens that are not <pad>), every real token."""
    folder, hf = save_tiny("roberta", tmp_path / "roberta")
    _roberta_tokenizer(folder, pad=hf.config.pad_token_id)
    model = models.load(str(folder))
    assert model.tokenizer is not None
    batch = model.to_words(["a cat sat", "the dog ran far away"])
    ids, mask = batch.input_ids, batch.attention_mask
    assert (ids[:, 0] == 0).all() and ids[0, (mask[0] == 1).sum() - 1] == 2  # <s> ... </s>
    assert (ids[mask == 0] == hf.config.pad_token_id).all()
    with torch.no_grad():
        ours = model(["a cat sat", "the dog ran far away"])
        theirs = hf(input_ids=ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    assert (ours[real] - theirs[real]).abs().max().item() < 1e-5


def test_electra_with_a_projected_embedding_is_refused_in_one_line(tmp_path):
    from transformers import ElectraConfig, ElectraModel

    cfg = ElectraConfig(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=4, intermediate_size=48, max_position_embeddings=64)  # fmt: skip
    with pytest.raises(UnsupportedModelError, match="embedding_size=16 != hidden_size=32") as err:
        models.from_hf(ElectraModel(cfg))
    assert "\n" not in str(err.value)
