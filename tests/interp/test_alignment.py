"""interp.alignment on hand-made inputs: no model, no tokenizer."""

from __future__ import annotations

import pytest
import torch

from interp.alignment import join_words, split_words, token_to_word, word_attention, word_matrix


def test_split_words():
    words, spans = split_words("Don't stop, well-known cat's (big) 42!")
    assert words == ["Don't", "stop", ",", "well-known", "cat's", "(", "big", ")", "42", "!"]
    text = "Don't stop, well-known cat's (big) 42!"
    assert [text[s:e] for s, e in spans] == words


@pytest.mark.parametrize(
    "words,text",
    [
        (["the", "cat", "sleeps", "."], "the cat sleeps."),
        (["Hi", ",", "he", "said", ":", "no", "!"], "Hi, he said: no!"),
        (["a", "(", "b", ")", "c"], "a (b) c"),
        (["the", "dog", "'s", "bone"], "the dog's bone"),
        (["do", "n't"], "don't"),
        (["50", "%", "?"], "50%?"),
    ],
)
def test_join_words_spacing_and_spans(words, text):
    joined, spans = join_words(words)
    assert joined == text
    assert [joined[s:e] for s, e in spans] == words


@pytest.mark.parametrize("bad", [[], [""], ["the", " cat"], ["the", "cat "], ["ok", 3]])
def test_join_words_errors(bad):
    with pytest.raises(ValueError, match="empty word list|word 1|word 0"):
        join_words(bad)


def test_token_to_word_wordpiece_like():
    text = "the cat sleeps."
    _, spans = split_words(text)
    # [CLS] the cat sleep ##s . [SEP]
    offsets = [(0, 0), (0, 3), (4, 7), (8, 13), (13, 14), (14, 15), (0, 0)]
    assert token_to_word(text, spans, offsets) == [-1, 0, 1, 2, 2, 3, -1]


def test_token_to_word_bpe_like():
    text = "The cat sleeps."
    _, spans = split_words(text)
    # The | Ġcat (span includes the space) | Ġsleep | s | . | a lone space token
    offsets = [(0, 3), (3, 7), (7, 13), (13, 14), (14, 15), (3, 4)]
    assert token_to_word(text, spans, offsets) == [0, 1, 2, 2, 3, -1]


def test_token_spanning_two_words_goes_to_larger_overlap():
    text = "ab cdef"
    _, spans = split_words(text)
    assert token_to_word(text, spans, [(1, 5)]) == [1]  # "b" (1 char) vs "cd" (2 chars)


def _token_to_word_by_scan(text, spans, offsets):
    """The definition, written as a plain scan over every word: the reference for the bisection."""
    out = []
    for start, end in offsets:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        overlaps = [min(end, we) - max(start, ws) if end > start else 0 for ws, we in spans]
        out.append(max(range(len(spans)), key=lambda w: (overlaps[w], -w)) if max(overlaps, default=0) > 0 else -1)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_token_to_word_on_long_texts_equals_the_scan(seed):
    """Random words and random token spans (straddling words, spaces, specials); spans in text
    order take the bisection, the same spans shuffled the full scan: both give the definition."""
    import random

    rng = random.Random(seed)
    words = ["".join(rng.choice("abc,'") for _ in range(rng.randint(1, 6))).strip() or "x" for _ in range(300)]
    text, spans = join_words(words)
    offsets = [(0, 0)]
    while len(offsets) < 600:
        a = rng.randrange(len(text))
        offsets.append((a, min(len(text), a + rng.randint(1, 12))))
    got = token_to_word(text, spans, offsets)
    assert got == _token_to_word_by_scan(text, spans, offsets)
    assert len(set(got)) > 100  # the tokens reach many words, not only the first or none
    order = list(range(len(spans)))
    rng.shuffle(order)
    shuffled = [spans[i] for i in order]
    assert token_to_word(text, shuffled, offsets) == _token_to_word_by_scan(text, shuffled, offsets)


def test_word_matrix():
    m = word_matrix([-1, 0, 0, 1, -1], n_words=2)
    assert torch.equal(m, torch.tensor([[0.0, 1, 1, 0, 0], [0, 0, 0, 1, 0]]))


def test_word_attention_to_sum_from_mean():
    # tokens: [CLS] w0a w0b w1 [SEP]; words: 0 = (1, 2), 1 = (3)
    align = [-1, 0, 0, 1, -1]
    pattern = torch.tensor(
        [
            [1.0, 0.0, 0.0, 0.0, 0.0],
            [0.1, 0.2, 0.3, 0.4, 0.0],
            [0.0, 0.5, 0.1, 0.2, 0.2],
            [0.3, 0.3, 0.3, 0.1, 0.0],
            [0.0, 0.0, 0.0, 0.0, 1.0],
        ]
    )
    out = word_attention(pattern, align, n_words=2)
    # from word 0 = mean of rows 1 and 2; to word 0 = sum of columns 1 and 2
    expected = torch.tensor([[((0.2 + 0.3) + (0.5 + 0.1)) / 2, (0.4 + 0.2) / 2], [0.3 + 0.3, 0.1]])
    torch.testing.assert_close(out, expected)
    # batched leading axes work the same
    stacked = word_attention(torch.stack([pattern, pattern])[None], align, n_words=2)
    assert stacked.shape == (1, 2, 2, 2)
    torch.testing.assert_close(stacked[0, 1], expected)


def test_word_attention_errors():
    pattern = torch.full((4, 4), 0.25)
    with pytest.raises(ValueError, match="no token"):
        word_attention(pattern, [0, 0, 2, 2], n_words=3)  # word 1 has no token
    with pytest.raises(ValueError, match="covers 3 tokens"):
        word_attention(pattern, [0, 1, 1], n_words=2)
