"""Generated probe sentences with word-level gold, deterministic from a seed, and the one
generator of repeated random token sequences.

- ``generate_subject_verb``, ``generate_anaphora``, ``generate_delimiter``: sentence families.
- ``noun_number`` / ``noun_gender``: features of the generators' lexicon (``analyses.data.lexicon``,
  which holds every word list the generators draw from; re-exported here).
- ``random_repeated_tokens``: a random token sequence repeated (induction, duplicate and
  previous-token scores; token level, no words).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from analyses.data.clauses import CLAUSE_FAMILIES, clause_item, subject_verb_item
from analyses.data.drawing import cap as _cap
from analyses.data.drawing import families as _families
from analyses.data.drawing import fronted as _fronted
from analyses.data.drawing import generate as _generate
from analyses.data.drawing import noun_phrase as _np
from analyses.data.drawing import pick as _pick
from analyses.data.drawing import predicate as _predicate
from analyses.data.items import Item, delimiter_positions
from analyses.data.items import check_n as _check_n
from analyses.data.items import rng as _rng
from analyses.data.lexicon import (
    ADVERBS,
    ANIMATE,
    ANIMATE_ADJ,
    COPULA,
    FEMALE_NAMES,
    FEMALE_NOUNS,
    INANIMATE,
    INTRANSITIVE,
    INTRANSITIVE_PAST,
    MALE_NAMES,
    MALE_NOUNS,
    PERSON_PERSON_VERBS,
    PERSON_PREDICATES,
    PERSON_THING_VERBS,
    PLACES,
    PLURAL_PEOPLE,
    POSSESSED,
    PREPOSITIONS,
    PRONOUN_FEATURES,
    THING_ADJ,
    THING_PREDICATES,
    THINGS,
    TRANSITIVE,
    noun_gender,
    noun_number,
)

__all__ = [
    "SUBJECT_VERB_FAMILIES",
    "PHRASE_FAMILIES",
    "CLAUSE_FAMILIES",
    "ANAPHORA_FAMILIES",
    "DELIMITER_FAMILIES",
    "generate_subject_verb",
    "generate_anaphora",
    "generate_delimiter",
    "generate_minimal_pairs",
    "MINIMAL_PAIR_SOURCE",
    "random_repeated_tokens",
    "noun_number",
    "noun_gender",
]


# ---------------------------------------------------------------------------------------------
# Subject-verb agreement
# ---------------------------------------------------------------------------------------------

# the phrase families put the subject as the first noun outside a prepositional phrase (a structural
# shortcut); the clause families (``analyses.data.clauses``) do not
PHRASE_FAMILIES = ("simple", "adverb", "pp", "pp2", "rc_object", "rc_subject")
SUBJECT_VERB_FAMILIES = (*PHRASE_FAMILIES, *CLAUSE_FAMILIES)


def _sv_item(fam: str, rng: np.random.Generator) -> Item:
    if fam in CLAUSE_FAMILIES:
        return clause_item(fam, rng)
    number = "sg" if rng.random() < 0.5 else "pl"
    other = "pl" if number == "sg" else "sg"
    idx = 0 if number == "sg" else 1
    words: list[str] = []
    nouns: list[int] = []  # indices of every noun before the verb
    pps: list[int] = []  # the nouns inside a prepositional phrase (the fronted adverbial's, pp's)
    attractor = False

    def add_np(pool, num, adj_p=0.0):
        words.extend(_np(rng, pool, num, adj_p))
        nouns.append(len(words) - 1)

    def inter_number():
        # an intervening noun: half of the time it is an attractor (the other number)
        nonlocal attractor
        if rng.random() < 0.5:
            attractor = True
            return other
        return number

    animate = fam in ("simple", "adverb", "rc_object", "rc_subject") or rng.random() < 0.5
    front = _fronted(rng)
    for phrase in front:  # a fronted adverbial: its nouns come before the subject
        words.extend(phrase)
        if phrase and phrase[-1] != ",":
            nouns.append(len(words) - 1)
            pps.append(len(words) - 1)
    add_np(ANIMATE if animate else INANIMATE, number, adj_p=0.3)
    subject = nouns[-1]
    if fam == "adverb":
        words.append(_pick(rng, ADVERBS))
    elif fam in ("pp", "pp2"):
        for _ in range(1 if fam == "pp" else 2):
            words.append(_pick(rng, PREPOSITIONS))
            add_np(INANIMATE if rng.random() < 0.6 else ANIMATE, inter_number(), adj_p=0.25)
            pps.append(nouns[-1])
    elif fam == "rc_object":  # the dog that the boys chase runs
        words.append("that")
        n2 = inter_number()
        add_np(ANIMATE, n2)
        words.append(_pick(rng, TRANSITIVE)[0 if n2 == "sg" else 1])
    elif fam == "rc_subject":  # the dog that chases the boys runs
        words.append("that")
        words.append(_pick(rng, TRANSITIVE)[idx])
        add_np(ANIMATE, inter_number())
    verb, _ = _predicate(rng, words, animate, idx)
    words.append(".")
    return subject_verb_item(fam, _cap(words), nouns, pps, subject, verb, number, animate)


def generate_subject_verb(n: int, seed: int = 0, families: Iterable[str] | None = None) -> list[Item]:
    """``n`` distinct subject-verb agreement sentences, deterministic from ``seed``.

    Families (round robin): the phrase families (``PHRASE_FAMILIES``) ``simple`` ("The cat sleeps
    ."), ``adverb`` ("The cat often sleeps ."), ``pp`` ("The keys to the cabinet are old ."),
    ``pp2`` (two prepositional phrases), ``rc_object`` ("The dog that the boys chase runs ."),
    ``rc_subject`` ("The dog that chases the boys runs ."); and the clause families
    (``CLAUSE_FAMILIES``, ``analyses.data.clauses``) ``complement`` ("The man said that the dogs
    near the tree bark ."), ``rc_verb`` ("The dog that the boys chase runs .", query: chase),
    ``coordinated`` ("The man sleeps and the dogs bark ."), ``fronted_clause`` ("When the man
    sleeps , the dogs bark ."). Intervening nouns take the other number half of the time
    (attractors); every verb, main and relative, agrees with its own subject. Three quarters of the
    phrase families' sentences open with a fronted adverbial of one or two nouns ("Near the park ,
    the dogs bark .", "In the garden of the hotel , ..."), so the subject is the first, second or
    third noun: no nearest-, first- or k-th-noun heuristic finds it everywhere (tests/analyses/data
    bound their accuracies). In a phrase family the subject is always the first noun outside a
    prepositional phrase; in a clause family never (the structural shortcut ``analyses.heads.design``
    scores on each family's row).

    query = the verb, target = head noun of its subject, candidates = every noun before the verb.
    meta: family, distance (verb index - subject index, in words), attractor (bool: a noun of the
    other number between subject and verb), number ("sg"/"pl" of the subject), n_attractors,
    animate, fronted (nouns before the subject), pp_nouns (the candidates inside a prepositional
    phrase).
    """
    n = _check_n(n, "generate_subject_verb")
    fams = _families(families, SUBJECT_VERB_FAMILIES, "generate_subject_verb")
    return _generate(n, seed, fams, _sv_item, "generate_subject_verb")


# ---------------------------------------------------------------------------------------------
# Anaphora
# ---------------------------------------------------------------------------------------------

ANAPHORA_FAMILIES = (
    "within_clause",
    "subordinate",
    "because",
    "across_sentences",
    "animacy",
    "number",
    "object_distractor",
)


def _person(rng, gender: str, names_p: float = 0.35) -> tuple[list[str], str]:
    """A gendered mention: (words, head word). Names half of the time-ish, else "the <noun>"."""
    if rng.random() < names_p:
        name = _pick(rng, MALE_NAMES if gender == "m" else FEMALE_NAMES)
        return [name], name
    noun = _pick(rng, MALE_NOUNS if gender == "m" else FEMALE_NOUNS)
    return ["the", noun], noun


class _Words:
    """The sentence being built: its words and the positions of its noun (and name) mentions."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.nouns: list[int] = []

    def mention(self, ws: list[str]) -> int:
        self.words.extend(ws)
        self.nouns.append(len(self.words) - 1)
        return len(self.words) - 1


_SUBJ_PRON = {"m": "he", "f": "she"}
_POSS_PRON = {"m": "his", "f": "her"}
_ANA_DEFAULTS = ("across_clauses", "gender")  # (scope, cue) unless a family says otherwise

# each family builder appends one sentence to ``s`` (random draws in a fixed order) and returns
# (target, pronoun position, scope, cue); g1 and g2 are the two genders, drawn before it


def _ana_within_clause(s: _Words, rng, g1: str, g2: str) -> tuple:  # The king met the queen in her garden .
    a = s.mention(_person(rng, g1)[0])
    s.words.append(_pick(rng, PERSON_PERSON_VERBS))
    b = s.mention(_person(rng, g2)[0])
    target, g = (a, g1) if rng.random() < 0.5 else (b, g2)
    s.words.append("in")
    pron = len(s.words)
    s.words.append(_POSS_PRON[g])
    s.words += [_pick(rng, POSSESSED), "."]
    return target, pron, "clause", "gender"


def _ana_subordinate(
    s: _Words, rng, g1: str, g2: str
) -> tuple:  # When the king met the nurse in the garden , she smiled .
    s.words.append("when")
    a = s.mention(_person(rng, g1)[0])
    s.words.append(_pick(rng, PERSON_PERSON_VERBS))
    b = s.mention(_person(rng, g2)[0])
    if rng.random() < 0.5:  # an inanimate distractor nearest to the pronoun
        s.words += ["in", "the"]
        s.mention([_pick(rng, PLACES)])
    s.words.append(",")
    target, g = (a, g1) if rng.random() < 0.5 else (b, g2)
    pron = len(s.words)
    s.words.append(_SUBJ_PRON[g])
    s.words += _pick(rng, PERSON_PREDICATES) + ["."]
    return (target, pron, *_ANA_DEFAULTS)


def _ana_because(s: _Words, rng, g1: str, g2: str) -> tuple:  # The nurse thanked the king because he was kind .
    a = s.mention(_person(rng, g1)[0])
    s.words.append(_pick(rng, PERSON_PERSON_VERBS))
    b = s.mention(_person(rng, g2)[0])
    s.words.append(_pick(rng, ["because", "since", "after", "before"]))
    target, g = (a, g1) if rng.random() < 0.5 else (b, g2)
    pron = len(s.words)
    s.words.append(_SUBJ_PRON[g])
    s.words += _pick(rng, PERSON_PREDICATES) + ["."]
    return (target, pron, *_ANA_DEFAULTS)


def _ana_across_sentences(s: _Words, rng, g1: str, g2: str) -> tuple:  # Mary met John at the station . He was late .
    a = s.mention(_person(rng, g1, names_p=0.7)[0])
    s.words.append(_pick(rng, PERSON_PERSON_VERBS))
    b = s.mention(_person(rng, g2, names_p=0.7)[0])
    s.words += ["at", "the"]
    s.mention([_pick(rng, PLACES)])
    s.words.append(".")
    target, g = (a, g1) if rng.random() < 0.5 else (b, g2)
    pron = len(s.words)
    s.words.append(_SUBJ_PRON[g].capitalize())
    s.words += _pick(rng, PERSON_PREDICATES) + ["."]
    return target, pron, "across_sentences", "gender"


def _ana_animacy(s: _Words, rng, g1: str, g2: str) -> tuple:
    # The boy dropped the vase because it was heavy . / ... because he was tired .
    a = s.mention(_person(rng, g1)[0])
    s.words.append(_pick(rng, PERSON_THING_VERBS))
    b = s.mention(["the", _pick(rng, THINGS)])
    s.words.append("because")
    pron = len(s.words)
    if rng.random() < 0.5:
        target = b
        s.words.append("it")
        s.words += _pick(rng, THING_PREDICATES) + ["."]
    else:
        target = a
        s.words.append(_SUBJ_PRON[g1])
        s.words += _pick(rng, PERSON_PREDICATES) + ["."]
    return target, pron, _ANA_DEFAULTS[0], "animacy"


def _ana_number(s: _Words, rng, g1: str, g2: str) -> tuple:  # The students thanked the king because they were late .
    plural_first = rng.random() < 0.5
    group = ["the", _pick(rng, PLURAL_PEOPLE)]
    single = _person(rng, g1)[0]
    a = s.mention(group if plural_first else single)
    s.words.append(_pick(rng, PERSON_PERSON_VERBS))
    b = s.mention(single if plural_first else group)
    s.words.append(_pick(rng, ["because", "since", "after", "before"]))
    pl_idx, sg_idx = (a, b) if plural_first else (b, a)
    pron = len(s.words)
    pred = list(_pick(rng, PERSON_PREDICATES))
    if rng.random() < 0.5:
        target = pl_idx
        s.words.append("they")
        if pred[0] == "was":
            pred[0] = "were"
    else:
        target = sg_idx
        s.words.append(_SUBJ_PRON[g1])
    s.words += pred + ["."]
    return target, pron, _ANA_DEFAULTS[0], "number"


def _ana_object_distractor(s: _Words, rng, g1: str, g2: str) -> tuple:
    # The king thanked the nurse near the boys because she was kind .
    # the antecedent is the object: neither the subject nor the nearest noun, which is a
    # distractor of the wrong gender (a person like the subject) or number (a group)
    cue = "gender"
    s.mention(_person(rng, g1)[0])
    s.words.append(_pick(rng, PERSON_PERSON_VERBS))
    target, g = s.mention(_person(rng, g2)[0]), g2
    s.words += [_pick(rng, ["near", "with", "beside", "behind"]), "the"]
    if rng.random() < 0.4:  # the distances vary, so no fixed offset finds the antecedent
        s.words.append(_pick(rng, ANIMATE_ADJ))
    if rng.random() < 0.5:
        s.mention([_pick(rng, PLURAL_PEOPLE)])
        cue = "gender+number"
    else:
        s.mention([_pick(rng, MALE_NOUNS if g1 == "m" else FEMALE_NOUNS)])
    if rng.random() < 0.4:
        s.words += ["in", "the"]
        s.mention([_pick(rng, PLACES)])
    s.words += _pick(rng, [["because"], ["since"], ["after"], ["before"], ["even", "though"]])
    pron = len(s.words)
    s.words.append(_SUBJ_PRON[g])
    s.words += _pick(rng, PERSON_PREDICATES) + ["."]
    return target, pron, _ANA_DEFAULTS[0], cue


_ANA_BUILDERS = {
    "within_clause": _ana_within_clause,
    "subordinate": _ana_subordinate,
    "because": _ana_because,
    "across_sentences": _ana_across_sentences,
    "animacy": _ana_animacy,
    "number": _ana_number,
    "object_distractor": _ana_object_distractor,
}


# the families that take a fronted adverbial (not "subordinate", which opens with "when", nor
# "animacy", whose "it" could take a fronted place, nor "across_sentences", which has one at its end)
_FRONTABLE = ("within_clause", "because", "number", "object_distractor")


def _ana_item(fam: str, rng: np.random.Generator) -> Item:
    s = _Words()
    g1 = "m" if rng.random() < 0.5 else "f"
    g2 = "f" if g1 == "m" else "m"
    front = _fronted(rng) if fam in _FRONTABLE else []
    for phrase in front:  # nouns before the first person: the antecedent is not always noun 1 or 2
        if phrase and phrase[-1] != ",":
            s.mention(phrase)
        else:
            s.words.extend(phrase)
    target, pron, scope, cue = _ANA_BUILDERS[fam](s, rng, g1, g2)  # _families guards fam
    words = _cap(s.words)
    pronoun = words[pron].lower()
    gender, number, _ = PRONOUN_FEATURES[pronoun]
    before = [i for i in s.nouns if i < pron]
    nearest = max(before)
    meta = (
        ("family", fam),
        ("scope", scope),
        ("cue", cue),
        ("pronoun", pronoun),
        ("gender", gender),
        ("number", number),
        ("distance", pron - target),
        ("n_candidates", len(before)),
        ("target_is_nearest", nearest == target),
        ("fronted", sum(1 for p in front if p and p[-1] != ",")),
    )
    return Item(
        tuple(words),
        "anaphora",
        query=pron,
        target=target,
        candidates=tuple(before),
        source=f"generated:{fam}",
        meta=meta,
    )


def generate_anaphora(n: int, seed: int = 0, families: Iterable[str] | None = None) -> list[Item]:
    """``n`` distinct pronoun-antecedent sentences, deterministic from ``seed``.

    Every sentence has a distractor noun that the pronoun's cue rules out, and the antecedent is
    the first or the second person at random (so "nearest preceding noun" is right only part of
    the time). Three quarters of the sentences of the families within_clause, because, number and
    object_distractor open with a fronted adverbial of one or two nouns ("At the station , the
    king met the queen ..."), so the antecedent is not always the first or a fixed k-th noun.
    Families (round robin):
    ``within_clause`` ("The king met the queen in her garden ."; cue gender, one clause),
    ``subordinate`` ("When the baby met Mary in the park , he smiled ."; across clauses),
    ``because`` ("The nurse thanked the king because he was late ."),
    ``across_sentences`` ("Mary met John at the station . He was late ."),
    ``animacy`` ("The boy dropped the vase because it was heavy ."; cue animacy/it),
    ``number`` ("The students thanked the king because they were late ."; cue number).

    query = pronoun, target = antecedent head word, candidates = every noun (and name) before the
    pronoun. meta: family, scope (clause / across_clauses / across_sentences), cue (gender /
    number / animacy), pronoun, gender ("m"/"f"/None), number, distance, n_candidates,
    target_is_nearest, fronted (nouns before the first person).
    """
    n = _check_n(n, "generate_anaphora")
    fams = _families(families, ANAPHORA_FAMILIES, "generate_anaphora")
    return _generate(n, seed, fams, _ana_item, "generate_anaphora")


# ---------------------------------------------------------------------------------------------
# Minimal pairs
# ---------------------------------------------------------------------------------------------

MINIMAL_PAIR_SOURCE = "minimal-pairs"
_PRONOUN_SWAP = {"he": "she", "she": "he", "his": "her", "her": "his"}
_NUMBER_SWAP = {**{sg: pl for sg, pl in ANIMATE + INANIMATE}, **{pl: sg for sg, pl in ANIMATE + INANIMATE}}
# the anaphora families whose two people have opposite genders and whose other nouns have none
_PAIR_ANAPHORA_FAMILIES = ("within_clause", "because", "subordinate", "across_sentences")


def _swap_case(new: str, old: str) -> str:
    return new[:1].upper() + new[1:] if old[:1].isupper() else new


def _anaphora_pair(it: Item) -> Item | None:
    """The item with its pronoun's gender swapped and the antecedent moved to the other person, or
    None where the swap does not give exactly one person of the new gender."""
    old = it.words[it.query]
    new = _PRONOUN_SWAP.get(old.lower())
    if new is None:
        return None
    gender = "f" if new in ("she", "her") else "m"
    others = [c for c in it.candidates if c != it.target and noun_gender(it.words[c]) == gender]
    if len(others) != 1 or noun_gender(it.words[it.target]) == gender:
        return None
    words = list(it.words)
    words[it.query] = _swap_case(new, old)
    return dataclasses.replace(it, words=tuple(words), target=others[0])


def _subject_verb_pair(it: Item) -> Item | None:
    """The item with the number of the noun nearest the verb (between subject and verb) swapped;
    the subject, the verb and the gold stay. None where there is no such noun."""
    between = [c for c in it.candidates if it.target < c < it.query]
    if not between or it.words[between[-1]] not in _NUMBER_SWAP:
        return None
    words = list(it.words)
    words[between[-1]] = _NUMBER_SWAP[words[between[-1]]]
    return dataclasses.replace(it, words=tuple(words))


def generate_minimal_pairs(relation: str, n: int, seed: int = 0) -> list[Item]:
    """``n`` minimal pairs (2n items, the two of a pair adjacent), deterministic from ``seed``:
    sentences that differ in one word, the cue.

    ``anaphora``: the pronoun's gender swapped ("The king met the queen because he was late" /
    "... because she was late"), so the antecedent moves to the other person (families
    within_clause, because, subordinate, across_sentences: two people of opposite genders, no
    other gendered noun). A head that tracks the antecedent moves its argmax with the cue; a head
    that attends to a position or to the nearest noun cannot be right in both.
    ``subject_verb``: the number of the attractor nearest the verb swapped ("The keys to the
    cabinet are" / "The keys to the cabinets are"; families pp, pp2), the subject and verb kept:
    a subject head keeps its argmax on the subject through the swap.

    Both items of a pair have source ``MINIMAL_PAIR_SOURCE`` and the cluster "pair K"; meta adds
    pair (K), member (0: the original, 1: the swapped one) and cue ("gender" / "attractor number").
    """
    n = _check_n(n, "generate_minimal_pairs")
    if relation == "anaphora":
        make, cue = _anaphora_pair, "gender"
        base = lambda m: generate_anaphora(m, seed, _PAIR_ANAPHORA_FAMILIES)  # noqa: E731
    elif relation == "subject_verb":
        make, cue = _subject_verb_pair, "attractor number"
        base = lambda m: generate_subject_verb(m, seed, ("pp", "pp2"))  # noqa: E731
    else:
        raise ValueError(f"generate_minimal_pairs: relation must be 'subject_verb' or 'anaphora', got {relation!r}")
    out: list[Item] = []
    for it in base(3 * n):
        swapped = make(it)
        if swapped is None:
            continue
        k = len(out) // 2
        for member, x in enumerate((it, swapped)):
            meta = (*x.meta, ("pair", k), ("member", member), ("cue", cue))
            out.append(dataclasses.replace(x, source=MINIMAL_PAIR_SOURCE, cluster=f"pair {k}", meta=meta))
        if len(out) == 2 * n:
            return out
    raise ValueError(f"generate_minimal_pairs: could make only {len(out) // 2} {relation} pairs; ask for fewer (n={n})")


# ---------------------------------------------------------------------------------------------
# Delimiters
# ---------------------------------------------------------------------------------------------

DELIMITER_FAMILIES = ("sentences", "list", "quote", "clauses")


def _simple_clause(rng) -> list[str]:
    """A short clause without punctuation: "the old dog sleeps in the garden"."""
    number = "sg" if rng.random() < 0.5 else "pl"
    idx = 0 if number == "sg" else 1
    if rng.random() < 0.5:
        w = _np(rng, ANIMATE, number, 0.4) + [_pick(rng, INTRANSITIVE)[idx]]
        if rng.random() < 0.5:
            w += ["in", "the", _pick(rng, PLACES)]
    else:
        w = _np(rng, INANIMATE, number, 0.3) + [_pick(rng, COPULA)[idx], _pick(rng, THING_ADJ)]
    return w


def _delim_item(fam: str, rng: np.random.Generator) -> Item:
    words: list[str] = []
    n_sent = 1
    if fam == "sentences":  # The dog sleeps . Are the keys old ? The bell is red !
        n_sent = int(rng.integers(2, 4))
        for _ in range(n_sent):
            words += _cap(_simple_clause(rng)) + [_pick(rng, [".", ".", ".", "!"])]
    elif fam == "list":  # The king , the nurse and the boys arrived .
        k = int(rng.integers(3, 5))
        items = []
        for _ in range(k):
            items.append(_np(rng, ANIMATE, "sg" if rng.random() < 0.5 else "pl", 0.3))
        for j, it in enumerate(items):
            words += it
            if j < k - 2:
                words.append(",")
            elif j == k - 2:
                words.append("and")
        words += [_pick(rng, INTRANSITIVE_PAST), "."]
        words = _cap(words)
    elif fam == "quote":  # Mary said , “ The dog sleeps ” and then she left .
        # No punctuation right before or after the closing quote: byte-level BPE merges "?”",
        # ".”", "”," into one token, which would leave a punctuation word without a token.
        g = "m" if rng.random() < 0.5 else "f"
        who = _pick(rng, MALE_NAMES if g == "m" else FEMALE_NAMES)
        said = _pick(rng, ["said", "shouted", "whispered", "replied", "wrote"])
        words += [who, said, _pick(rng, [",", ":"]), "“"] + _cap(_simple_clause(rng)) + ["”"]
        words += [_pick(rng, ["and", "and then", "but"]), {"m": "he", "f": "she"}[g], _pick(rng, INTRANSITIVE_PAST)]
        words = words[:-3] + words[-3].split() + words[-2:]
        words.append(_pick(rng, [".", "!"]))
        if rng.random() < 0.5:  # a parenthesis in a second sentence
            words += _cap(_np(rng, ANIMATE, "sg", 0.3)) + ["(", "and", "the", _pick(rng, ANIMATE)[1], ")"]
            words += [_pick(rng, INTRANSITIVE_PAST), "."]
            n_sent = 2
    elif fam == "clauses":  # When the dog barked , the cat slept ; the bells are old .
        words += ["when"] + _simple_clause(rng) + [","] + _simple_clause(rng)
        words += [_pick(rng, [";", ":"])] + _simple_clause(rng) + ["."]
        if rng.random() < 0.5:
            words += _cap(_simple_clause(rng)) + ["."]
            n_sent = 2
        words = _cap(words)
    else:  # pragma: no cover
        raise AssertionError(fam)
    meta = (("family", fam), ("n_sentences", n_sent), ("n_punct", len(delimiter_positions(words))))
    return Item(tuple(words), "delimiter", source=f"generated:{fam}", meta=meta)


def generate_delimiter(n: int, seed: int = 0, families: Iterable[str] | None = None) -> list[Item]:
    """``n`` distinct short passages rich in punctuation and sentence boundaries (relation
    "delimiter", query = target = -1; use ``delimiter_positions(item.words)`` and
    ``sentence_end_positions``). Families: ``sentences`` (2-3 sentences), ``list`` (commas and
    "and"), ``quote`` (a colon or comma, curly quotes, a parenthesis), ``clauses`` (comma, semicolon or
    colon between clauses). meta: family, n_sentences, n_punct."""
    n = _check_n(n, "generate_delimiter")
    fams = _families(families, DELIMITER_FAMILIES, "generate_delimiter")
    return _generate(n, seed, fams, _delim_item, "generate_delimiter")


# ---------------------------------------------------------------------------------------------
# Random repeated tokens (induction / duplicate / previous token)
# ---------------------------------------------------------------------------------------------


def random_repeated_tokens(
    n: int,
    length: int,
    d_vocab: int,
    seed: int | np.random.Generator = 0,
    avoid: Iterable[int] = (),
    distinct: bool = True,
    low: int = 0,
    high: int | None = None,
):
    """LongTensor [n, 2*length]: a random sequence of ``length`` tokens followed by itself (the one
    generator of repeated random tokens: induction, duplicate-token and previous-token scores, the
    validation prompts and the positional study all draw from it).

    Tokens are drawn uniformly from ``range(low, high or d_vocab)`` minus ``avoid`` (e.g. special
    token ids, so no [CLS]/[SEP]/BOS/padding inside; a ``low`` above the byte and special ids of a
    real vocabulary keeps to ordinary words). ``distinct`` (default): no token repeats inside the
    first half, so the only duplicates are the planted ones at offset ``length`` (clean
    duplicate-token and induction targets). Deterministic from ``seed`` (an int, or a numpy
    Generator to draw from). Prepend a BOS/[CLS] column yourself if the model needs one."""
    import torch

    n = _check_n(n, "random_repeated_tokens")
    length = _check_n(length, "random_repeated_tokens (length)")
    if isinstance(d_vocab, bool) or not isinstance(d_vocab, (int, np.integer)) or d_vocab <= 0:
        raise ValueError(f"random_repeated_tokens: d_vocab must be a positive integer, got {d_vocab!r}")
    high = d_vocab if high is None else int(high)
    if not 0 <= low < high <= d_vocab:
        raise ValueError(
            f"random_repeated_tokens: need 0 <= low < high <= d_vocab, got low={low}, high={high}, d_vocab={d_vocab}"
        )
    avoid = sorted({int(a) for a in avoid})
    bad = [a for a in avoid if not 0 <= a < d_vocab]
    if bad:
        raise ValueError(f"random_repeated_tokens: avoid ids {bad} are outside range(d_vocab={d_vocab})")
    allowed = np.setdiff1d(np.arange(low, high), np.array(avoid, dtype=np.int64))
    if len(allowed) == 0 or (distinct and len(allowed) < length):
        raise ValueError(
            f"random_repeated_tokens: {len(allowed)} usable token ids (range({low}, {high}) minus "
            f"{len(avoid)} avoided) cannot fill {length} {'distinct ' if distinct else ''}positions; "
            "lower length or pass distinct=False"
        )
    rng = seed if isinstance(seed, np.random.Generator) else _rng(seed)
    if distinct:
        half = np.stack([rng.choice(allowed, size=length, replace=False) for _ in range(n)])
    else:
        half = allowed[rng.integers(len(allowed), size=(n, length))]
    return torch.from_numpy(np.concatenate([half, half], axis=1).astype(np.int64))
