"""Tokenisation with token-to-word alignment: WordPiece (MiniLM) and byte-level BPE (SmolLM2)."""

from __future__ import annotations

import pytest
import torch

from models import Tokenizer

SENTENCES = [
    "The cat sleeps.",
    "Unbelievably, the snoozing cat's keys weren't found!",
    "When the baby cried, he woke up.",
]


def _pieces(token: str, kind: str) -> str:
    """The characters of the text a token stands for, without its word-boundary marker."""
    if kind == "wordpiece":
        return token[2:] if token.startswith("##") else token
    return token.replace("Ġ", " ").strip()


def _check_reconstruction(batch, kind):
    """Each word is exactly the concatenation of its tokens (lower-cased for uncased WordPiece),
    and a word's tokens are contiguous."""
    for tokens, words, align in zip(batch.tokens, batch.words, batch.token_to_word):
        for w, word in enumerate(words):
            idx = [t for t, a in enumerate(align) if a == w]
            assert idx, f"word {word!r} got no token"
            assert idx == list(range(idx[0], idx[-1] + 1)), f"tokens of {word!r} are not contiguous"
            text = "".join(_pieces(tokens[t], kind) for t in idx)
            assert text == (word.lower() if kind == "wordpiece" else word)


def test_wordpiece_alignment(minilm):
    b = minilm.to_words(SENTENCES)
    _check_reconstruction(b, "wordpiece")
    for tokens, align, n in zip(b.tokens, b.token_to_word, b.lengths):
        assert tokens[0] == "[CLS]" and tokens[n - 1] == "[SEP]"
        assert align[0] == -1 and align[n - 1] == -1
        assert all(a == -1 for a in align[n:])  # padding belongs to no word
    # a long word splits into several pieces, all of one word
    second = b.token_to_word[1]
    assert b.words[1][0] == "Unbelievably" and second.count(0) >= 2
    assert b.token_type_ids is not None and (b.token_type_ids == 0).all()


def test_bpe_alignment(smollm2):
    b = smollm2.to_words(SENTENCES)
    _check_reconstruction(b, "bpe")
    tokens, align, words = b.tokens[0], b.token_to_word[0], b.words[0]
    assert words == ["The", "cat", "sleeps", "."]
    assert align[tokens.index("Ġcat")] == words.index("cat")  # the leading space is not a word of its own
    sleep_tokens = [t for t, a in zip(tokens, align) if a == words.index("sleeps")]
    assert "".join(sleep_tokens).replace("Ġ", "") == "sleeps"
    assert tokens[0] != "<|im_start|>"  # SmolLM2 adds no BOS by default


def test_padding_and_mask(smollm2):
    b = smollm2.to_words(["The cat sleeps.", "A"])
    assert b.input_ids.shape == b.attention_mask.shape
    n = b.lengths
    assert n[1] < n[0]
    assert (b.attention_mask[1, n[1] :] == 0).all() and (b.input_ids[1, n[1] :] == smollm2.tokenizer.pad_token_id).all()
    assert b.token_to_word[1][n[1] :] == [-1] * (n[0] - n[1])


def test_prepend_bos(smollm2):
    tok = Tokenizer(smollm2.tokenizer.hf, prepend_bos=True)
    b = tok("The cat")
    assert b.input_ids[0, 0].item() == smollm2.tokenizer.hf.bos_token_id
    assert b.token_to_word[0][0] == -1 and b.token_to_word[0][1:] == [0, 1]


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_word_lists_keep_their_boundaries(name, request):
    model = request.getfixturevalue(name)
    words = ["the", "cat", "sleeps", ",", "and", "the", "dog", "'s", "owner", "waits", "."]
    b = model.to_words([words])
    assert b.texts == ["the cat sleeps, and the dog's owner waits."]
    assert b.words == [words]
    _check_reconstruction(b, "wordpiece" if name == "minilm" else "bpe")
    assert torch.equal(model.tokenizer.words([words]).input_ids, b.input_ids)


def test_text_forward_equals_id_forward(minilm):
    b = minilm.to_words(SENTENCES[:2])
    with torch.no_grad():
        assert torch.equal(
            minilm(SENTENCES[:2]), minilm(b.input_ids, attention_mask=b.attention_mask, token_type_ids=b.token_type_ids)
        )


def test_tokenizer_errors(minilm):
    tok = minilm.tokenizer
    for bad in ("", "   "):
        with pytest.raises(ValueError, match="empty text"):
            tok(bad)
    with pytest.raises(ValueError, match="empty input"):
        tok([])
    with pytest.raises(ValueError, match="empty word list"):
        tok.words([[]])
    with pytest.raises(ValueError, match="word 1"):
        tok.words([["the", " cat"]])
    with pytest.raises(TypeError, match="list of word lists"):
        tok.words(["the", "cat"])
    with pytest.raises(ValueError, match="max_length=3"):
        tok("The cat sleeps on the mat.", max_length=3)
