"""The probe item type and the rules every data source shares.

- ``Item``: one sentence as words, with the query word (verb, pronoun), the gold target word
  (subject head noun, antecedent head noun) and the competing candidate words.
- ``is_punctuation`` (the one punctuation rule), ``delimiter_positions``, ``sentence_end_positions``.
- ``keep_tokenizable``: the items whose every word keeps a token under a tokenizer.
- ``check_n`` / ``rng``: argument checks shared by the generators and the source registry.

Word lists keep punctuation as separate words (["The", "keys", "to", "the", "cabinet", "are",
"on", "the", "table", "."]) so that ``models.Tokenizer.words`` joins them into natural text.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Item",
    "RELATIONS",
    "is_punctuation",
    "delimiter_positions",
    "sentence_end_positions",
    "keep_tokenizable",
    "item_location",
    "USER_FILE_SOURCES",
    "check_n",
    "rng",
]

RELATIONS = ("subject_verb", "anaphora", "delimiter")


@dataclass(frozen=True)
class Item:
    """One probe sentence.

    words: the sentence as words; punctuation marks are words of their own.
    relation: "subject_verb", "anaphora", "delimiter", ... (what ``query``/``target`` mean).
    query: index of the word whose attention row is read (the verb, the pronoun), or -1.
    target: index of the gold word it should attend to (the subject, the antecedent), or -1.
    candidates: indices of competing words (e.g. all nouns before a pronoun, the attractor noun),
        used by baselines such as "nearest preceding candidate"; may be empty.
    source: where it came from: "generated:<family>", "winobias", "spacy-silver", "conllu:<path>".
    meta: free-form labels (family, distance, attractor number, gender, ...) as (key, value) pairs.
    cluster: items that are not independent share one (a sonnet, a WinoBias template pair, an XSum
        document, a CoNLL-U sentence, a minimal pair): statistics resample and test over clusters
        (``interp.stats``). "" (the default): the item is a cluster of its own.
    """

    words: tuple[str, ...]
    relation: str
    query: int = -1
    target: int = -1
    candidates: tuple[int, ...] = ()
    source: str = "generated"
    meta: tuple[tuple[str, object], ...] = field(default=())
    cluster: str = ""

    def __post_init__(self) -> None:
        n = len(self.words)
        if n == 0:
            raise ValueError("an Item needs at least one word")
        for name in ("query", "target"):
            i = getattr(self, name)
            if not -1 <= i < n:
                raise ValueError(f"Item.{name}={i} is outside the sentence of {n} words: {' '.join(self.words)}")
        if self.query >= 0 and self.query == self.target:
            raise ValueError(f"Item query and target are the same word ({self.query}): {' '.join(self.words)}")
        for c in self.candidates:
            if not 0 <= c < n:
                raise ValueError(f"Item candidate {c} is outside the sentence of {n} words")

    @property
    def info(self) -> dict:
        return dict(self.meta)

    @property
    def text(self) -> str:
        """The words joined as a model would see them (no space before punctuation)."""
        from interp.alignment import join_words

        return join_words(self.words)[0]


# sources that read a file the user names; their items carry the file's path ("conllu:FILE")
USER_FILE_SOURCES = ("conllu", "text")


def check_n(n, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise ValueError(f"{what}: n must be a positive integer, got {n!r}")
    return int(n)


def rng(seed) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    return np.random.default_rng(int(seed))


# Unicode calls these "punctuation, other" (Po) but they are symbols inside text, not delimiters
_NOT_DELIMITERS = set("%‰‱#&*@/\\§¶†‡")


def is_punctuation(word: str) -> bool:
    """The one punctuation rule of the toolkit: a non-empty word made only of Unicode punctuation
    characters (category P*: . , ; : ! ? ( ) quotes, dashes), symbols such as % # & * @ / excluded
    (Unicode files some of them under "punctuation, other" but inside text they are not delimiters).
    Currency and maths signs ($ + =) are symbols (category S*), not punctuation."""
    return bool(word) and all(unicodedata.category(c).startswith("P") and c not in _NOT_DELIMITERS for c in word)


def delimiter_positions(words: Sequence[str]) -> list[int]:
    """Indices of the words made only of punctuation characters (Unicode category P*):
    . , ; : ! ? ( ) quotes, dashes, "...". Symbols (% # & * @ / $ + ...) are not delimiters."""
    if isinstance(words, str):
        raise TypeError("delimiter_positions takes a list of words, not a string")
    return [i for i, w in enumerate(words) if is_punctuation(w)]


_SENTENCE_END = {".", "!", "?", "...", "…", "?!", "!?"}


def sentence_end_positions(words: Sequence[str]) -> list[int]:
    """Indices of sentence-final punctuation words (. ! ? ...)."""
    if isinstance(words, str):
        raise TypeError("sentence_end_positions takes a list of words, not a string")
    return [i for i, w in enumerate(words) if w in _SENTENCE_END]


def keep_tokenizable(
    items: Sequence[Item], tokenizer, max_tokens: int | None = None, counts: dict | None = None
) -> list[Item]:
    """The items whose every word keeps at least one token under ``tokenizer`` (a
    ``models.Tokenizer``) and, if given, that fit in ``max_tokens`` tokens.

    Word-level attention (``interp.alignment.word_attention``) needs a token for every word; a
    byte-level BPE can merge two punctuation words into one token ('".' in real news text, where
    the quote and the period are two words), leaving the second without one. Generated items
    never lose a word this way (tested for MiniLM and SmolLM2); real text loses a few percent.
    ``counts`` (a dict, filled in): ``words``, ``lost`` (every token of the word is the unknown
    token) and ``changed`` (the normaliser rewrote it, or part of it became unknown) over all items,
    from ``models.Batch.n_lost`` / ``n_changed``."""
    items = list(items)
    kept = []
    for start in range(0, len(items), 256):
        chunk = items[start : start + 256]
        batch = tokenizer.words([list(it.words) for it in chunk])
        lengths = batch.lengths
        if counts is not None:
            counts["words"] = counts.get("words", 0) + sum(len(it.words) for it in chunk)
            counts["lost"] = counts.get("lost", 0) + batch.n_lost
            counts["changed"] = counts.get("changed", 0) + batch.n_changed
        for k, it in enumerate(chunk):
            covered = {w for w in batch.token_to_word[k] if w >= 0}
            if len(covered) == len(it.words) and (max_tokens is None or lengths[k] <= max_tokens):
                kept.append(it)
    return kept


def item_location(item: Item, index: int | None = None) -> str:
    """Where a sentence came from, for messages: FILE:LINE (the line the sentence starts at) for an
    item read from a user's file (CoNLL-U, plain text), else "sentence INDEX (SOURCE)"."""
    kind, _, path = item.source.partition(":")
    info = item.info
    line = info.get("sentence_line", info.get("line")) if kind in USER_FILE_SOURCES else None
    if path and line is not None:
        return f"{path}:{line}"
    return f"sentence {index} ({item.source})" if index is not None else f"a sentence of {item.source}"
