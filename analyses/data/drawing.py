"""The drawing helpers the sentence generators share (``analyses.data.generated``,
``analyses.data.clauses``): a seeded pick from a list, capitalisation, the family check, the
round-robin loop that rejects duplicate sentences, the fronted adverbial, the noun phrase and
the agreeing predicate.
Every draw goes through the caller's ``numpy`` generator, in a fixed order."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from analyses.data.items import Item
from analyses.data.items import rng as _rng
from analyses.data.lexicon import (
    ANIMATE,
    ANIMATE_ADJ,
    COPULA,
    FRONT_EVENTS,
    FRONT_PREPOSITIONS,
    INTRANSITIVE,
    PERSON_ADJ,
    PLACES,
    THING_ADJ,
)

__all__ = ["pick", "cap", "families", "generate", "fronted", "noun_phrase", "predicate"]


def pick(rng: np.random.Generator, seq):
    """One element of ``seq``, drawn with ``rng``."""
    return seq[int(rng.integers(len(seq)))]


def cap(words: list[str]) -> list[str]:
    """``words`` with the first letter of the first word capitalised."""
    return [words[0][:1].upper() + words[0][1:]] + words[1:] if words else words


def families(requested, known: Sequence[str], what: str) -> list[str]:
    """The families asked for (None: all of ``known``), checked: ValueError naming the unknown ones."""
    if requested is None:
        return list(known)
    requested = [requested] if isinstance(requested, str) else list(requested)
    bad = [f for f in requested if f not in known]
    if bad or not requested:
        raise ValueError(f"{what}: unknown families {bad or requested}; known: {list(known)}")
    return requested


def generate(n: int, seed: int, families: list[str], build, what: str) -> list[Item]:
    """Round-robin over families, rejecting duplicate sentences, until n distinct items."""
    rng = _rng(seed)
    out: list[Item] = []
    seen: set[tuple[str, ...]] = set()
    misses = 0  # consecutive duplicates: the families are exhausted long before this runs out
    i = 0
    while len(out) < n:
        if misses >= 5000:
            raise ValueError(
                f"{what}: could only make {len(out)} distinct sentences of families {families}; ask for fewer (n={n})"
            )
        fam = families[i % len(families)]
        item = build(fam, rng)
        if item.words in seen:
            misses += 1
            continue
        misses = 0
        seen.add(item.words)
        out.append(item)
        i += 1
    return out


def fronted(rng: np.random.Generator) -> list[list[str]]:
    """A fronted adverbial as noun phrases to mention: [] (a quarter of the time), one ("Near the
    park ,", "After the storm"), or two ("In the garden of the hotel ,"); the comma is added by the
    caller, the last list is [","] or empty. Every noun of it sits inside a prepositional phrase."""
    r = rng.random()
    if r < 0.25:
        return []
    prep = pick(rng, FRONT_PREPOSITIONS)
    if prep in ("after", "before"):
        first = [prep, *pick(rng, FRONT_EVENTS).split()]
    else:
        first = [prep, "the", pick(rng, PLACES)]
    if r < 0.55:
        return [first, [","] if rng.random() < 0.7 else []]
    return [first, ["of", "the", pick(rng, PLACES)], [","]]


def noun_phrase(rng, pool, number: str, adj_p: float = 0.0) -> list[str]:
    """ "the (adjective) noun" from ``pool`` ((singular, plural) pairs) in ``number`` ("sg"/"pl"),
    with an adjective (of a person or animal for ``ANIMATE``, else of a thing) with probability ``adj_p``."""
    sg, pl = pick(rng, pool)
    words = ["the"]
    if rng.random() < adj_p:
        words.append(pick(rng, ANIMATE_ADJ if pool is ANIMATE else THING_ADJ))
    words.append(sg if number == "sg" else pl)
    return words


def predicate(rng, words: list[str], animate: bool, idx: int) -> tuple[int, int]:
    """Append a present-tense predicate agreeing in number ``idx`` (0: singular, 1: plural): for an
    animate subject mostly an intransitive verb, sometimes followed by "in the PLACE", else the
    copula and an adjective. Returns (the verb's index, the place noun's index or -1)."""
    verb, place = len(words), -1
    if animate and rng.random() < 0.75:
        words.append(pick(rng, INTRANSITIVE)[idx])
        if rng.random() < 0.3:
            words += ["in", "the", pick(rng, PLACES)]
            place = len(words) - 1
    else:
        words.append(pick(rng, COPULA)[idx])
        words.append(pick(rng, PERSON_ADJ if animate else THING_ADJ))
    return verb, place
