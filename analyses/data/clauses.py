"""The clause families of the generated subject-verb items: sentences whose first noun outside a
prepositional phrase is NOT the subject of the query verb, so that the structural shortcut "attend to
the first noun not inside a PP" (right on every item of the phrase families: simple, adverb, pp, pp2,
rc_object, rc_subject) fails on them.

- ``complement``: "The man said that the dogs near the tree bark ." (bark -> dogs), after a
  fronted adverbial three quarters of the time ("After the game , the man said that ...")
- ``rc_verb``: the relative clause's own verb is the query: "The dog that the boys chase runs ."
  (chase -> boys), after a fronted adverbial three quarters of the time
- ``coordinated``: "The man sleeps and the dogs near the car bark ." (bark -> dogs), after a fronted
  adverbial three quarters of the time
- ``fronted_clause``: a fronted clause with its own subject: "When the man sleeps , the dogs bark ."
  (bark -> dogs)

Every verb is in the present tense and agrees with its own subject; the query subject takes a
prepositional phrase half of the time, whose noun has the other number half of that time (an
attractor), and so does the first clause's subject; complement, rc_verb and coordinated sentences open
with a fronted adverbial three quarters of the time. The subject is the second to sixth noun before
the verb, the first never, and no nearest- or k-th-noun heuristic finds it in half of any family's
items (tests/analyses/data/test_clauses.py). ``subject_verb_item`` builds the Item of both the phrase and the
clause families (meta ``pp_nouns``: the nouns that sit inside a prepositional phrase).
"""

from __future__ import annotations

import numpy as np

from analyses.data.drawing import cap, fronted, noun_phrase, pick, predicate
from analyses.data.items import Item
from analyses.data.lexicon import (
    ANIMATE,
    COMPLEMENT_VERBS,
    COORDINATORS,
    FEMALE_NOUNS,
    INANIMATE,
    MALE_NOUNS,
    PLURAL_PEOPLE,
    PREPOSITIONS,
    SUBORDINATORS,
    TRANSITIVE,
    noun_number,
)

__all__ = ["CLAUSE_FAMILIES", "clause_item", "subject_verb_item"]

CLAUSE_FAMILIES = ("complement", "rc_verb", "coordinated", "fronted_clause")


def subject_verb_item(
    fam: str, words: list[str], nouns: list[int], pps: list[int], subject: int, verb: int, number: str, animate: bool
) -> Item:
    """The generated subject-verb Item: query = ``verb``, target = ``subject``, candidates = ``nouns``
    (every noun before the verb). meta: family, distance, attractor (a noun of the other number
    between subject and verb), number, n_attractors, animate, fronted (the nouns before the subject),
    pp_nouns (the nouns inside a prepositional phrase: what the "first noun outside a PP" heuristic
    of ``analyses.heads.design`` reads)."""
    attractors = [i for i in nouns if subject < i < verb and noun_number(words[i]) != number]
    meta = (
        ("family", fam),
        ("distance", verb - subject),
        ("attractor", bool(attractors)),
        ("number", number),
        ("n_attractors", len(attractors)),
        ("animate", animate),
        ("fronted", sum(1 for i in nouns if i < subject)),
        ("pp_nouns", tuple(sorted(pps))),
    )
    return Item(
        tuple(words),
        "subject_verb",
        query=verb,
        target=subject,
        candidates=tuple(nouns),
        source=f"generated:{fam}",
        meta=meta,
    )


class _Sentence:
    """The sentence being built: its words, every noun's position and the nouns inside a PP."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.nouns: list[int] = []
        self.pps: list[int] = []

    def front(self, rng) -> None:
        """A fronted adverbial (``drawing.fronted``): none, one or two nouns, each inside a PP."""
        for phrase in fronted(rng):
            self.words.extend(phrase)
            if phrase and phrase[-1] != ",":
                self.nouns.append(len(self.words) - 1)
                self.pps.append(len(self.words) - 1)

    def noun(self, rng, pool, number: str, adj_p: float = 0.0, in_pp: bool = False) -> int:
        self.words.extend(noun_phrase(rng, pool, number, adj_p))
        self.nouns.append(len(self.words) - 1)
        if in_pp:
            self.pps.append(len(self.words) - 1)
        return len(self.words) - 1

    def subject(self, rng, number: str, animate: bool, pp_p: float) -> int:
        """A subject noun phrase, followed with probability ``pp_p`` by a prepositional phrase whose
        noun has the other number half of the time. Returns the subject's index."""
        at = self.noun(rng, ANIMATE if animate else INANIMATE, number, adj_p=0.3)
        if rng.random() < pp_p:
            self.words.append(pick(rng, PREPOSITIONS))
            inter = number if rng.random() < 0.5 else ("pl" if number == "sg" else "sg")
            self.noun(rng, INANIMATE if rng.random() < 0.6 else ANIMATE, inter, adj_p=0.25, in_pp=True)
        return at

    def predicate(self, rng, animate: bool, number: str) -> int:
        verb, place = predicate(rng, self.words, animate, 0 if number == "sg" else 1)
        if place >= 0:
            self.nouns.append(place)
            self.pps.append(place)
        return verb

    def clause(self, rng, pp_p: float) -> None:
        """A clause that is not the query's: its own subject (any number) and agreeing predicate."""
        number, animate = _number(rng), rng.random() < 0.6
        self.subject(rng, number, animate, pp_p)
        self.predicate(rng, animate, number)


def _number(rng) -> str:
    return "sg" if rng.random() < 0.5 else "pl"


def _speaker(s: _Sentence, rng) -> None:
    """The subject of "said that": a person, singular ("the king") or plural ("the students")."""
    if rng.random() < 0.5:
        s.words += ["the", pick(rng, MALE_NOUNS if rng.random() < 0.5 else FEMALE_NOUNS)]
    else:
        s.words += ["the", pick(rng, PLURAL_PEOPLE)]
    s.nouns.append(len(s.words) - 1)
    if rng.random() < 1 / 3:
        s.words.append(pick(rng, ["from", "near", "with", "behind"]))
        s.noun(rng, INANIMATE, _number(rng), in_pp=True)


def clause_item(fam: str, rng: np.random.Generator) -> Item:
    """One sentence of clause family ``fam`` (``CLAUSE_FAMILIES``); query = the verb of the clause
    whose subject is not the sentence's first noun outside a PP, target = that subject."""
    if fam not in CLAUSE_FAMILIES:
        raise ValueError(f"unknown clause family {fam!r}; known: {list(CLAUSE_FAMILIES)}")
    s = _Sentence()
    number, animate = _number(rng), rng.random() < 0.6
    if fam == "complement":  # (After the game ,) the man said that the dogs near the tree bark .
        s.front(rng)
        _speaker(s, rng)
        s.words += [pick(rng, COMPLEMENT_VERBS), "that"]
    elif fam == "coordinated":  # (Near the park ,) the man sleeps and the dogs bark .
        s.front(rng)
        s.clause(rng, pp_p=0.5)
        s.words.append(pick(rng, COORDINATORS))
    elif fam == "fronted_clause":  # When the man sleeps , the dogs bark .
        s.words.append(pick(rng, SUBORDINATORS))
        s.clause(rng, pp_p=0.5)
        s.words.append(",")
    if fam == "rc_verb":  # (Near the park ,) the dog that the boys (near the tree) chase runs .
        s.front(rng)
        head_number, animate = _number(rng), True
        s.noun(rng, ANIMATE, head_number, adj_p=0.3)
        s.words.append("that")
        subject = s.subject(rng, number, animate, pp_p=0.5)
        verb = len(s.words)
        s.words.append(pick(rng, TRANSITIVE)[0 if number == "sg" else 1])
        s.predicate(rng, animate, head_number)  # the main verb agrees with the head noun
    else:
        subject = s.subject(rng, number, animate, pp_p=0.5)
        verb = s.predicate(rng, animate, number)
    s.words.append(".")
    nouns, pps = [i for i in s.nouns if i < verb], [i for i in s.pps if i < verb]  # before the verb
    return subject_verb_item(fam, cap(s.words), nouns, pps, subject, verb, number, animate)
