"""Generated probe sentences with word-level gold, deterministic from a seed, and the one
generator of repeated random token sequences.

- ``generate_subject_verb``, ``generate_anaphora``, ``generate_delimiter``: sentence families.
- ``noun_number`` / ``noun_gender``: features of the generators' lexicon.
- ``random_repeated_tokens``: a random token sequence repeated (induction, duplicate and
  previous-token scores; token level, no words).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np

from analyses.data.items import Item, delimiter_positions
from analyses.data.items import check_n as _check_n
from analyses.data.items import rng as _rng

__all__ = [
    "SUBJECT_VERB_FAMILIES",
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
# Lexicon. Nouns come as (singular, plural). No singular noun ends in "s", so that number can be
# read off a word by anyone (the tests do) without this table.
# ---------------------------------------------------------------------------------------------

_ANIMATE = [
    ("dog", "dogs"),
    ("cat", "cats"),
    ("horse", "horses"),
    ("bird", "birds"),
    ("wolf", "wolves"),
    ("mouse", "mice"),
    ("child", "children"),
    ("man", "men"),
    ("woman", "women"),
    ("boy", "boys"),
    ("girl", "girls"),
    ("teacher", "teachers"),
    ("student", "students"),
    ("doctor", "doctors"),
    ("farmer", "farmers"),
    ("pilot", "pilots"),
    ("senator", "senators"),
    ("painter", "painters"),
    ("lawyer", "lawyers"),
    ("manager", "managers"),
    ("nurse", "nurses"),
    ("singer", "singers"),
    ("dancer", "dancers"),
    ("soldier", "soldiers"),
    ("worker", "workers"),
    ("guard", "guards"),
    ("neighbor", "neighbors"),
    ("officer", "officers"),
    ("customer", "customers"),
    ("driver", "drivers"),
    ("player", "players"),
    ("scientist", "scientists"),
    ("chef", "chefs"),
    ("clerk", "clerks"),
    ("baker", "bakers"),
    ("author", "authors"),
    ("actor", "actors"),
    ("king", "kings"),
    ("queen", "queens"),
    ("baby", "babies"),
    ("friend", "friends"),
    ("visitor", "visitors"),
    ("tourist", "tourists"),
    ("engineer", "engineers"),
    ("sailor", "sailors"),
    ("hunter", "hunters"),
    ("rabbit", "rabbits"),
    ("monkey", "monkeys"),
]
_INANIMATE = [
    ("key", "keys"),
    ("book", "books"),
    ("picture", "pictures"),
    ("letter", "letters"),
    ("door", "doors"),
    ("window", "windows"),
    ("box", "boxes"),
    ("car", "cars"),
    ("road", "roads"),
    ("tree", "trees"),
    ("bridge", "bridges"),
    ("table", "tables"),
    ("cabinet", "cabinets"),
    ("house", "houses"),
    ("garden", "gardens"),
    ("river", "rivers"),
    ("building", "buildings"),
    ("lamp", "lamps"),
    ("chair", "chairs"),
    ("wall", "walls"),
    ("shelf", "shelves"),
    ("painting", "paintings"),
    ("bottle", "bottles"),
    ("cup", "cups"),
    ("map", "maps"),
    ("report", "reports"),
    ("computer", "computers"),
    ("machine", "machines"),
    ("bell", "bells"),
    ("flower", "flowers"),
    ("tower", "towers"),
    ("ship", "ships"),
    ("train", "trains"),
    ("village", "villages"),
    ("city", "cities"),
    ("school", "schools"),
    ("office", "offices"),
    ("station", "stations"),
    ("hill", "hills"),
    ("forest", "forests"),
    ("island", "islands"),
    ("farm", "farms"),
    ("kitchen", "kitchens"),
    ("library", "libraries"),
    ("museum", "museums"),
]
# intransitive verbs (3rd singular, plural) for animate subjects
_INTRANSITIVE = [
    ("sleeps", "sleep"),
    ("runs", "run"),
    ("laughs", "laugh"),
    ("smiles", "smile"),
    ("waits", "wait"),
    ("sings", "sing"),
    ("works", "work"),
    ("swims", "swim"),
    ("arrives", "arrive"),
    ("leaves", "leave"),
    ("wins", "win"),
    ("stops", "stop"),
    ("jumps", "jump"),
    ("shouts", "shout"),
    ("cries", "cry"),
    ("rests", "rest"),
    ("returns", "return"),
    ("dances", "dance"),
    ("walks", "walk"),
    ("listens", "listen"),
    ("sits", "sit"),
    ("falls", "fall"),
]
_TRANSITIVE = [
    ("chases", "chase"),
    ("sees", "see"),
    ("likes", "like"),
    ("follows", "follow"),
    ("helps", "help"),
    ("admires", "admire"),
    ("watches", "watch"),
    ("calls", "call"),
    ("visits", "visit"),
    ("knows", "know"),
    ("meets", "meet"),
    ("trusts", "trust"),
    ("loves", "love"),
    ("hates", "hate"),
    ("pushes", "push"),
    ("finds", "find"),
]
_COPULA = [("is", "are"), ("was", "were")]
_THING_ADJ = [
    "old",
    "broken",
    "heavy",
    "new",
    "red",
    "expensive",
    "empty",
    "open",
    "closed",
    "clean",
    "dirty",
    "small",
    "large",
    "famous",
    "beautiful",
    "cheap",
]
_PERSON_ADJ = [
    "tired",
    "happy",
    "hungry",
    "late",
    "ready",
    "angry",
    "busy",
    "sick",
    "quiet",
    "lonely",
    "worried",
    "bored",
    "famous",
    "careful",
]
_ADJ = [
    "old",
    "young",
    "small",
    "tall",
    "happy",
    "quiet",
    "clever",
    "tired",
    "big",
    "little",
    "brave",
    "lazy",
    "friendly",
    "strange",
]
_ADV = ["often", "quietly", "always", "usually", "rarely", "never", "sometimes", "slowly"]
_PREP = ["near", "behind", "beside", "of", "from", "with", "to", "under", "in", "above", "by"]
_PLACES = [
    "garden",
    "kitchen",
    "park",
    "office",
    "library",
    "station",
    "village",
    "market",
    "church",
    "school",
    "hospital",
    "museum",
    "hotel",
    "harbor",
    "forest",
    "city",
]

# fronted phrases before a sentence's subject: they put 0, 1 or 2 nouns before it, so that the
# subject (or antecedent) is not always the first or the k-th noun (no noun heuristic passes)
_FRONT_PREP = ["near", "behind", "in", "outside", "after", "before"]
_FRONT_TIME = ["the meeting", "the storm", "the game", "the party", "the concert", "the match"]


def _fronted(rng: np.random.Generator) -> list[list[str]]:
    """A fronted adverbial as noun phrases to mention: [] (a quarter of the time), one ("Near the
    park ,", "After the storm"), or two ("In the garden of the hotel ,"); the comma is added by the
    caller, the last list is [","] or empty."""
    r = rng.random()
    if r < 0.25:
        return []
    prep = _pick(rng, _FRONT_PREP)
    if prep in ("after", "before"):
        first = [prep, *_pick(rng, _FRONT_TIME).split()]
    else:
        first = [prep, "the", _pick(rng, _PLACES)]
    if r < 0.55:
        return [first, [","] if rng.random() < 0.7 else []]
    return [first, ["of", "the", _pick(rng, _PLACES)], [","]]


_MALE_NOUNS = [
    "king",
    "prince",
    "man",
    "boy",
    "father",
    "son",
    "brother",
    "husband",
    "uncle",
    "nephew",
    "grandfather",
    "actor",
    "waiter",
    "monk",
    "duke",
    "gentleman",
    "groom",
    "emperor",
    "policeman",
    "businessman",
    "landlord",
    "headmaster",
    "steward",
]
_FEMALE_NOUNS = [
    "queen",
    "princess",
    "woman",
    "girl",
    "mother",
    "daughter",
    "sister",
    "wife",
    "aunt",
    "niece",
    "grandmother",
    "actress",
    "waitress",
    "nun",
    "duchess",
    "lady",
    "bride",
    "empress",
    "policewoman",
    "businesswoman",
    "landlady",
    "headmistress",
    "stewardess",
]
_MALE_NAMES = [
    "John",
    "David",
    "Michael",
    "James",
    "Robert",
    "Peter",
    "Thomas",
    "Daniel",
    "Paul",
    "Mark",
    "George",
    "Henry",
    "Edward",
    "Samuel",
    "Jack",
    "Oliver",
    "Harry",
    "William",
    "Richard",
    "Charles",
    "Frank",
    "Kevin",
    "Brian",
    "Steven",
    "Andrew",
]
_FEMALE_NAMES = [
    "Mary",
    "Sarah",
    "Emma",
    "Anna",
    "Laura",
    "Alice",
    "Susan",
    "Linda",
    "Julia",
    "Rachel",
    "Emily",
    "Olivia",
    "Sophie",
    "Lucy",
    "Helen",
    "Karen",
    "Jessica",
    "Grace",
    "Hannah",
    "Claire",
    "Kate",
    "Rose",
    "Diana",
    "Nancy",
    "Amy",
]
# gender-neutral plural person nouns for "they"
_PLURAL_PEOPLE = [
    "students",
    "soldiers",
    "workers",
    "children",
    "farmers",
    "tourists",
    "players",
    "visitors",
    "neighbors",
    "doctors",
    "teachers",
    "engineers",
    "guests",
    "pilots",
    "sailors",
    "dancers",
    "singers",
    "lawyers",
]
# inanimate singular nouns for "it"
_THINGS = [
    "vase",
    "box",
    "bag",
    "phone",
    "letter",
    "ring",
    "cake",
    "lamp",
    "chair",
    "bottle",
    "painting",
    "clock",
    "mirror",
    "bicycle",
    "basket",
    "coat",
    "camera",
    "guitar",
    "map",
    "book",
]
_PERSON_PERSON_VERBS = [
    "thanked",
    "called",
    "helped",
    "visited",
    "met",
    "praised",
    "blamed",
    "warned",
    "greeted",
    "followed",
    "admired",
    "ignored",
    "invited",
    "interviewed",
    "paid",
    "phoned",
    "watched",
    "saw",
    "hugged",
    "trusted",
]
_PERSON_THING_VERBS = [
    "dropped",
    "carried",
    "sold",
    "bought",
    "lost",
    "found",
    "repaired",
    "opened",
    "hid",
    "wrapped",
    "cleaned",
    "painted",
]
_PERSON_PRED = [
    ["was", "tired"],
    ["was", "late"],
    ["was", "happy"],
    ["was", "angry"],
    ["was", "sick"],
    ["was", "lonely"],
    ["was", "worried"],
    ["was", "hungry"],
    ["was", "bored"],
    ["was", "busy"],
    ["smiled"],
    ["laughed"],
    ["left", "early"],
    ["cried"],
    ["waved"],
    ["was", "grateful"],
    ["was", "nervous"],
]
_THING_PRED = [
    ["was", "heavy"],
    ["was", "fragile"],
    ["was", "broken"],
    ["was", "old"],
    ["was", "expensive"],
    ["was", "wet"],
    ["was", "dirty"],
    ["was", "ugly"],
    ["was", "cheap"],
    ["was", "too", "small"],
]
_POSSESSED = ["house", "car", "garden", "office", "room", "kitchen", "shop", "boat", "studio", "apartment"]
_INTRANS_PAST = ["arrived", "cried", "laughed", "fell", "left", "smiled", "returned", "shouted", "woke", "sang"]

_SG = {s: "sg" for s, _ in _ANIMATE + _INANIMATE}
_PL = {p: "pl" for _, p in _ANIMATE + _INANIMATE}
_NUMBER = {**_SG, **_PL, **{w: "pl" for w in _PLURAL_PEOPLE}, **{w: "sg" for w in _THINGS}}
_GENDER = {**{w: "m" for w in _MALE_NOUNS + _MALE_NAMES}, **{w: "f" for w in _FEMALE_NOUNS + _FEMALE_NAMES}}

_PRONOUN_FEATURES = {  # pronoun -> (gender or None, number, animate)
    "he": ("m", "sg", True),
    "his": ("m", "sg", True),
    "him": ("m", "sg", True),
    "she": ("f", "sg", True),
    "her": ("f", "sg", True),
    "they": (None, "pl", True),
    "their": (None, "pl", True),
    "them": (None, "pl", True),
    "it": (None, "sg", False),
    "its": (None, "sg", False),
}


def noun_number(word: str) -> str | None:
    """ "sg" / "pl" for a noun of the generators' lexicon (names and gendered nouns are "sg"),
    None for a word it does not know."""
    if word in _GENDER:
        return "sg"
    return _NUMBER.get(word, _NUMBER.get(word.lower()))


def noun_gender(word: str) -> str | None:
    """ "m" / "f" for a gendered noun or name of the generators' lexicon, else None."""
    return _GENDER.get(word, _GENDER.get(word.lower()))


def _pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


def _cap(words: list[str]) -> list[str]:
    return [words[0][:1].upper() + words[0][1:]] + words[1:] if words else words


def _families(requested, known: Sequence[str], what: str) -> list[str]:
    if requested is None:
        return list(known)
    requested = [requested] if isinstance(requested, str) else list(requested)
    bad = [f for f in requested if f not in known]
    if bad or not requested:
        raise ValueError(f"{what}: unknown families {bad or requested}; known: {list(known)}")
    return requested


def _generate(n: int, seed: int, families: list[str], build, what: str) -> list[Item]:
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


# ---------------------------------------------------------------------------------------------
# Subject-verb agreement
# ---------------------------------------------------------------------------------------------

SUBJECT_VERB_FAMILIES = ("simple", "adverb", "pp", "pp2", "rc_object", "rc_subject")


def _np(rng, pool, number: str, adj_p: float = 0.0) -> list[str]:
    sg, pl = _pick(rng, pool)
    words = ["the"]
    if rng.random() < adj_p:
        words.append(_pick(rng, _ADJ if pool is _ANIMATE else _THING_ADJ))
    words.append(sg if number == "sg" else pl)
    return words


def _sv_item(fam: str, rng: np.random.Generator) -> Item:
    number = "sg" if rng.random() < 0.5 else "pl"
    other = "pl" if number == "sg" else "sg"
    idx = 0 if number == "sg" else 1
    words: list[str] = []
    nouns: list[int] = []  # indices of every noun before the verb
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
    add_np(_ANIMATE if animate else _INANIMATE, number, adj_p=0.3)
    subject = nouns[-1]
    if fam == "adverb":
        words.append(_pick(rng, _ADV))
    elif fam in ("pp", "pp2"):
        for _ in range(1 if fam == "pp" else 2):
            words.append(_pick(rng, _PREP))
            add_np(_INANIMATE if rng.random() < 0.6 else _ANIMATE, inter_number(), adj_p=0.25)
    elif fam == "rc_object":  # the dog that the boys chase runs
        words.append("that")
        n2 = inter_number()
        add_np(_ANIMATE, n2)
        words.append(_pick(rng, _TRANSITIVE)[0 if n2 == "sg" else 1])
    elif fam == "rc_subject":  # the dog that chases the boys runs
        words.append("that")
        words.append(_pick(rng, _TRANSITIVE)[idx])
        add_np(_ANIMATE, inter_number())
    verb = len(words)
    if animate and rng.random() < 0.75:
        words.append(_pick(rng, _INTRANSITIVE)[idx])
        if rng.random() < 0.3:
            words += ["in", "the", _pick(rng, _PLACES)]
    else:
        words.append(_pick(rng, _COPULA)[idx])
        words.append(_pick(rng, _PERSON_ADJ if animate else _THING_ADJ))
    words.append(".")
    words = _cap(words)
    attractors = [i for i in nouns if subject < i < verb and noun_number(words[i]) != number]
    meta = (
        ("family", fam),
        ("distance", verb - subject),
        ("attractor", bool(attractors)),
        ("number", number),
        ("n_attractors", len(attractors)),
        ("animate", animate),
        ("fronted", sum(1 for p in front if p and p[-1] != ",")),
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


def generate_subject_verb(n: int, seed: int = 0, families: Iterable[str] | None = None) -> list[Item]:
    """``n`` distinct subject-verb agreement sentences, deterministic from ``seed``.

    Families (round robin): ``simple`` ("The cat sleeps ."), ``adverb`` ("The cat often
    sleeps ."), ``pp`` ("The keys to the cabinet are old ."), ``pp2`` (two prepositional phrases),
    ``rc_object`` ("The dog that the boys chase runs ."), ``rc_subject`` ("The dog that chases
    the boys runs ."). Intervening nouns take the other number half of the time (attractors);
    every verb, main and relative, agrees with its own subject. Three quarters of the sentences open
    with a fronted adverbial of one or two nouns ("Near the park , the dogs bark .", "In the garden
    of the hotel , ..."), so the subject is the first, second or third noun: no nearest-, first- or
    k-th-noun heuristic finds it everywhere (tests/analyses/data bound their accuracies).

    query = main verb, target = head noun of its subject, candidates = every noun before the verb.
    meta: family, distance (verb index - subject index, in words), attractor (bool: a noun of the
    other number between subject and verb), number ("sg"/"pl" of the subject), n_attractors,
    animate, fronted (nouns before the subject).
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
        name = _pick(rng, _MALE_NAMES if gender == "m" else _FEMALE_NAMES)
        return [name], name
    noun = _pick(rng, _MALE_NOUNS if gender == "m" else _FEMALE_NOUNS)
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
    s.words.append(_pick(rng, _PERSON_PERSON_VERBS))
    b = s.mention(_person(rng, g2)[0])
    target, g = (a, g1) if rng.random() < 0.5 else (b, g2)
    s.words.append("in")
    pron = len(s.words)
    s.words.append(_POSS_PRON[g])
    s.words += [_pick(rng, _POSSESSED), "."]
    return target, pron, "clause", "gender"


def _ana_subordinate(
    s: _Words, rng, g1: str, g2: str
) -> tuple:  # When the king met the nurse in the garden , she smiled .
    s.words.append("when")
    a = s.mention(_person(rng, g1)[0])
    s.words.append(_pick(rng, _PERSON_PERSON_VERBS))
    b = s.mention(_person(rng, g2)[0])
    if rng.random() < 0.5:  # an inanimate distractor nearest to the pronoun
        s.words += ["in", "the"]
        s.mention([_pick(rng, _PLACES)])
    s.words.append(",")
    target, g = (a, g1) if rng.random() < 0.5 else (b, g2)
    pron = len(s.words)
    s.words.append(_SUBJ_PRON[g])
    s.words += _pick(rng, _PERSON_PRED) + ["."]
    return (target, pron, *_ANA_DEFAULTS)


def _ana_because(s: _Words, rng, g1: str, g2: str) -> tuple:  # The nurse thanked the king because he was kind .
    a = s.mention(_person(rng, g1)[0])
    s.words.append(_pick(rng, _PERSON_PERSON_VERBS))
    b = s.mention(_person(rng, g2)[0])
    s.words.append(_pick(rng, ["because", "since", "after", "before"]))
    target, g = (a, g1) if rng.random() < 0.5 else (b, g2)
    pron = len(s.words)
    s.words.append(_SUBJ_PRON[g])
    s.words += _pick(rng, _PERSON_PRED) + ["."]
    return (target, pron, *_ANA_DEFAULTS)


def _ana_across_sentences(s: _Words, rng, g1: str, g2: str) -> tuple:  # Mary met John at the station . He was late .
    a = s.mention(_person(rng, g1, names_p=0.7)[0])
    s.words.append(_pick(rng, _PERSON_PERSON_VERBS))
    b = s.mention(_person(rng, g2, names_p=0.7)[0])
    s.words += ["at", "the"]
    s.mention([_pick(rng, _PLACES)])
    s.words.append(".")
    target, g = (a, g1) if rng.random() < 0.5 else (b, g2)
    pron = len(s.words)
    s.words.append(_SUBJ_PRON[g].capitalize())
    s.words += _pick(rng, _PERSON_PRED) + ["."]
    return target, pron, "across_sentences", "gender"


def _ana_animacy(s: _Words, rng, g1: str, g2: str) -> tuple:
    # The boy dropped the vase because it was heavy . / ... because he was tired .
    a = s.mention(_person(rng, g1)[0])
    s.words.append(_pick(rng, _PERSON_THING_VERBS))
    b = s.mention(["the", _pick(rng, _THINGS)])
    s.words.append("because")
    pron = len(s.words)
    if rng.random() < 0.5:
        target = b
        s.words.append("it")
        s.words += _pick(rng, _THING_PRED) + ["."]
    else:
        target = a
        s.words.append(_SUBJ_PRON[g1])
        s.words += _pick(rng, _PERSON_PRED) + ["."]
    return target, pron, _ANA_DEFAULTS[0], "animacy"


def _ana_number(s: _Words, rng, g1: str, g2: str) -> tuple:  # The students thanked the king because they were late .
    plural_first = rng.random() < 0.5
    group = ["the", _pick(rng, _PLURAL_PEOPLE)]
    single = _person(rng, g1)[0]
    a = s.mention(group if plural_first else single)
    s.words.append(_pick(rng, _PERSON_PERSON_VERBS))
    b = s.mention(single if plural_first else group)
    s.words.append(_pick(rng, ["because", "since", "after", "before"]))
    pl_idx, sg_idx = (a, b) if plural_first else (b, a)
    pron = len(s.words)
    pred = list(_pick(rng, _PERSON_PRED))
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
    s.words.append(_pick(rng, _PERSON_PERSON_VERBS))
    target, g = s.mention(_person(rng, g2)[0]), g2
    s.words += [_pick(rng, ["near", "with", "beside", "behind"]), "the"]
    if rng.random() < 0.4:  # the distances vary, so no fixed offset finds the antecedent
        s.words.append(_pick(rng, _ADJ))
    if rng.random() < 0.5:
        s.mention([_pick(rng, _PLURAL_PEOPLE)])
        cue = "gender+number"
    else:
        s.mention([_pick(rng, _MALE_NOUNS if g1 == "m" else _FEMALE_NOUNS)])
    if rng.random() < 0.4:
        s.words += ["in", "the"]
        s.mention([_pick(rng, _PLACES)])
    s.words += _pick(rng, [["because"], ["since"], ["after"], ["before"], ["even", "though"]])
    pron = len(s.words)
    s.words.append(_SUBJ_PRON[g])
    s.words += _pick(rng, _PERSON_PRED) + ["."]
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
    gender, number, _ = _PRONOUN_FEATURES[pronoun]
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
_NUMBER_SWAP = {**{sg: pl for sg, pl in _ANIMATE + _INANIMATE}, **{pl: sg for sg, pl in _ANIMATE + _INANIMATE}}
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
        w = _np(rng, _ANIMATE, number, 0.4) + [_pick(rng, _INTRANSITIVE)[idx]]
        if rng.random() < 0.5:
            w += ["in", "the", _pick(rng, _PLACES)]
    else:
        w = _np(rng, _INANIMATE, number, 0.3) + [_pick(rng, _COPULA)[idx], _pick(rng, _THING_ADJ)]
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
            items.append(_np(rng, _ANIMATE, "sg" if rng.random() < 0.5 else "pl", 0.3))
        for j, it in enumerate(items):
            words += it
            if j < k - 2:
                words.append(",")
            elif j == k - 2:
                words.append("and")
        words += [_pick(rng, _INTRANS_PAST), "."]
        words = _cap(words)
    elif fam == "quote":  # Mary said , “ The dog sleeps ” and then she left .
        # No punctuation right before or after the closing quote: byte-level BPE merges "?”",
        # ".”", "”," into one token, which would leave a punctuation word without a token.
        g = "m" if rng.random() < 0.5 else "f"
        who = _pick(rng, _MALE_NAMES if g == "m" else _FEMALE_NAMES)
        said = _pick(rng, ["said", "shouted", "whispered", "replied", "wrote"])
        words += [who, said, _pick(rng, [",", ":"]), "“"] + _cap(_simple_clause(rng)) + ["”"]
        words += [_pick(rng, ["and", "and then", "but"]), {"m": "he", "f": "she"}[g], _pick(rng, _INTRANS_PAST)]
        words = words[:-3] + words[-3].split() + words[-2:]
        words.append(_pick(rng, [".", "!"]))
        if rng.random() < 0.5:  # a parenthesis in a second sentence
            words += _cap(_np(rng, _ANIMATE, "sg", 0.3)) + ["(", "and", "the", _pick(rng, _ANIMATE)[1], ")"]
            words += [_pick(rng, _INTRANS_PAST), "."]
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
