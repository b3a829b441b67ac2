"""Token <-> word alignment, for any tokenizer that reports character offsets.

Words are what analyses annotate (gold subject-verb pairs, antecedents); tokens are what models
see. The bridge is a character span per word and per token: a token belongs to the word its
non-space characters overlap most. Special tokens ([CLS], [SEP], BOS), which cover no character,
and tokens made only of whitespace belong to no word (index -1). This works the same for WordPiece
("sleeps" -> "sleep", "##s") and byte-level BPE ("Ġcat", whose span includes the leading space).

Aggregation to words (Clark et al., 2019): attention *to* a word is the sum over its tokens,
attention *from* a word is the mean over its tokens, so word-level rows still sum to one over
words (plus whatever went to special tokens).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["WORD_RE", "split_words", "join_words", "token_to_word", "word_attention", "word_matrix"]

# Characters that extend the one before them instead of starting a word of their own: combining
# marks (a decomposed "é"), variation selectors, emoji skin tones, emoji tag characters.
_EXTEND = (
    "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff"  # combining marks
    "\ufe00-\ufe0f\ufe20-\ufe2f"  # variation selectors, half marks
    "\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f"  # skin tones, emoji tags
)
_LETTER = rf"\w[{_EXTEND}]*"
_SYMBOL = rf"[^\w\s][{_EXTEND}]*"

# A word is a run of letters/digits (with inner ' or -, as in "don't", "well-known") or one
# punctuation character or symbol (an emoji with its modifiers, a zero-width-joiner emoji sequence,
# a flag's two regional indicators). Punctuation as its own word is what delimiter analyses need.
WORD_RE = re.compile(
    rf"(?:{_LETTER})+(?:['’\-](?:{_LETTER})+)*"
    rf"|[\U0001f1e6-\U0001f1ff]{{2}}"
    rf"|{_SYMBOL}(?:\u200d{_SYMBOL})*"
)
_NO_SPACE_BEFORE = re.compile(r"^[.,;:!?%)\]}'’”]$|^'s$|^n't$")


def split_words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Words of ``text`` and their character spans."""
    matches = list(WORD_RE.finditer(text))
    return [m.group() for m in matches], [m.span() for m in matches]


def join_words(words: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """Text that reads naturally from a word list (no space before punctuation), with each word's
    character span, so that a word list tokenises as the sentence a model would see in the wild."""
    if len(words) == 0:
        raise ValueError("empty word list: need at least one word")
    parts, spans, pos = [], [], 0
    for i, w in enumerate(words):
        if not isinstance(w, str) or not w or w != w.strip():
            raise ValueError(f"word {i} is {w!r}; words must be non-empty strings without surrounding spaces")
        if i and not _NO_SPACE_BEFORE.match(w) and words[i - 1] not in ("(", "[", "{", "“"):
            parts.append(" ")
            pos += 1
        spans.append((pos, pos + len(w)))
        parts.append(w)
        pos += len(w)
    return "".join(parts), spans


def token_to_word(
    text: str, word_spans: Sequence[tuple[int, int]], token_offsets: Sequence[tuple[int, int]]
) -> list[int]:
    """For each token, the index of the word it belongs to, or -1 (special or whitespace token).
    Ties go to the first word. Spans in text order (what ``split_words`` and ``join_words`` give)
    are searched by bisection, so a long text (a sonnet) costs tokens x log(words), not tokens x words."""
    ordered = all(a[1] <= b[0] for a, b in zip(word_spans, word_spans[1:]))
    ends = [we for _, we in word_spans]
    out = []
    for start, end in token_offsets:
        # shrink the token span to its non-space characters (byte-level BPE spans include " ")
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        best, best_overlap = -1, 0
        if end > start:
            # in order, no word ending at or before `start` can overlap: begin at the first that ends after it
            first = bisect.bisect_right(ends, start) if ordered else 0
            for w in range(first, len(word_spans)):
                ws, we = word_spans[w]
                if ordered and ws >= end:
                    break  # this word and every later one start after the token
                overlap = min(end, we) - max(start, ws)
                if overlap > best_overlap:
                    best, best_overlap = w, overlap
        out.append(best)
    return out


def word_matrix(alignment: Sequence[int], n_words: int, n_tokens: int | None = None) -> Tensor:
    """One-hot [word, token] membership matrix (float) from a token-to-word map."""
    n_tokens = len(alignment) if n_tokens is None else n_tokens
    m = torch.zeros(n_words, n_tokens)
    for t, w in enumerate(alignment[:n_tokens]):
        if w >= 0:
            m[w, t] = 1.0
    return m


def word_attention(pattern: Tensor, alignment: Sequence[int], n_words: int) -> Tensor:
    """Token attention [..., query_pos, key_pos] -> word attention [..., query_word, key_word].

    To a word: sum over its tokens. From a word: mean over its tokens. Attention that goes to
    special tokens is dropped, so a row sums to (1 - mass on special tokens)."""
    n = pattern.shape[-1]
    if len(alignment) < n:
        raise ValueError(f"alignment covers {len(alignment)} tokens, pattern has {n}")
    m = word_matrix(alignment, n_words, n).to(pattern)
    counts = m.sum(-1, keepdim=True)
    if (counts == 0).any():
        missing = [i for i in range(n_words) if counts[i] == 0]
        raise ValueError(f"words {missing} have no token in the alignment")
    to_words = pattern @ m.T  # [..., query_pos, word]
    return (m / counts) @ to_words  # [..., word, word]
