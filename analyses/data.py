"""Probing data with word-level gold annotation (owned by the data helper; the Item type is the
contract between data and scorers)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    """

    words: tuple[str, ...]
    relation: str
    query: int = -1
    target: int = -1
    candidates: tuple[int, ...] = ()
    source: str = "generated"
    meta: tuple[tuple[str, object], ...] = field(default=())

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
