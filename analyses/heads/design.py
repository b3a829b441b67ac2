"""The test design: which tests a run makes and on which items. Per relation the strata (source and
subset: ``SUBSETS``, the label-carrying ``LABEL_SUBSET``, the reverse direction's ``CONTROL_SUBSET``),
the noun heuristics a relation head must beat (``noun_heuristics``), each test's baseline over its
own items, and the options check. Nothing here runs a model."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analyses.data.generated import MINIMAL_PAIR_SOURCE, SUBJECT_VERB_FAMILIES
from analyses.data.ioi import IOI_SOURCE
from analyses.data.items import Item
from analyses.data.lexicon import PRONOUNS
from analyses.heads.roles import (
    BROAD_REFERENCE,
    NORM_LABEL_ROLES,
    PREDICTIVE,
    RELATIONS,
    SET_ROLES,
    SPECIALS,
    WEIGHTINGS,
)

__all__ = [
    "source_of",
    "noun_heuristics",
    "in_stratum",
    "is_real_source",
    "SUBSETS",
    "LABEL_SUBSET",
    "CONTROL_SUBSET",
    "REAL_TEXT_GATE",
]


@dataclass
class _Test:
    role: str
    direction: str
    metric: str
    kind: str  # "token", "relation", "repeat"
    relation: str | None = None
    forward: bool = True
    baseline_kind: str = "uniform"
    margin: float = 0.05
    offset: int | None = None  # best fixed offset (relation tests)
    offset_baseline: float = float("nan")
    candidate_baseline: float = float("nan")
    specials: str = "-"  # relation tests: "exclude" / "include" (see roles.COLUMNS)
    source: str = "all"  # relation tests: the items' source, or "all"
    subset: str = "all"  # relation tests: a slice of the items (SUBSETS), or "all"
    carries_label: bool = True  # False: descriptive (own p-value, outside the family, never a label)
    weighting: str = "attention"  # "attention" (the pattern) or "norm" (Kobayashi et al.'s ||a f(x)||)
    heuristics: bool = False  # the noun heuristics (nearest, first, k-th noun) enter ``baseline``
    noun_k: int = 0  # the best k-th noun heuristic's k (relation tests)
    heuristic: str = "-"  # the best noun heuristic's name, and its accuracy on the test's items
    heuristic_baseline: float = float("nan")
    reading: str = "-"  # relation tests: "retrospective" or "predictive" (roles.READINGS); "-" token roles

    @property
    def family(self) -> str:
        """The multiple-comparison family of a label-carrying test ("" for descriptive tests): the
        role, "<role>@predictive" for the predictive reading of a role read both ways, and
        "@<weighting>" after it for a weighting other than attention."""
        if not self.carries_label:
            return ""
        name = f"{self.role}@predictive" if self.reading == "predictive" and self.role in RELATIONS else self.role
        return name if self.weighting == "attention" else f"{name}@{self.weighting}"


def _row_gold(item: Item, forward: bool) -> tuple[int, int]:
    return (item.query, item.target) if forward else (item.target, item.query)


# the reverse directions' control (antecedent->pronoun, subject->verb): the row of another noun of
# the sentence, the gold still the query word. A head whose every noun attends to the pronoun is
# not an antecedent->pronoun head; a reverse label must beat this control (LABEL_GATES' "control")
CONTROL_SUBSET = "other noun"


def _other_noun(item: Item) -> int:
    """The candidate noun other than the target nearest to the query (-1 where there is none)."""
    others = [c for c in item.candidates if c not in (item.target, item.query)]
    return min(others, key=lambda c: (abs(c - item.query), c)) if others else -1


def _test_row_gold(test: _Test, item: Item) -> tuple[int, int]:
    """(row word, gold word) of ``item`` under ``test``: the relation's direction, or for the
    reverse control the other noun's row and the query as the gold. The predictive reading's row
    word is the word before the query (the engine reads its last token: the token whose next-token
    prediction is the query word), its gold the target."""
    if test.reading == "predictive":
        return item.query - 1, item.target
    if test.subset == CONTROL_SUBSET:
        return _other_noun(item), item.query
    return _row_gold(item, test.forward)


def source_of(item: Item) -> str:
    """The source family of an item: "generated", "winobias", "spacy-silver", "conllu"."""
    return item.source.split(":")[0]


def _first_noun(item: Item) -> int:
    return min(set(item.candidates) | {item.target})


def _nouns_before(item: Item) -> list[int]:
    """The item's nouns (its candidates and its target) before the query word, in sentence order."""
    return sorted(c for c in set(item.candidates) | {item.target} if c < item.query)


def _kth_noun(item: Item, k: int) -> int:
    """The k-th noun (1-based) before the query word, or -1 where there are fewer."""
    nouns = _nouns_before(item)
    return nouns[k - 1] if len(nouns) >= k else -1


def _nearest_noun(item: Item) -> int:
    """The nearest noun before the query: a candidate or the target that is not a pronoun of
    ``analyses.data.lexicon.PRONOUNS`` (real sources' candidates hold the words their parser tags
    PRON too), or -1."""
    nouns = [c for c in set(item.candidates) | {item.target} if c < item.query]
    nouns = [c for c in nouns if item.words[c].lower() not in PRONOUNS]
    return max(nouns) if nouns else -1


def _nearest_noun_or_pronoun(item: Item) -> int:
    """The nearest word before the query that is a noun (a candidate or the target) or a pronoun of
    ``analyses.data.lexicon.PRONOUNS`` (the closed class, matched on the lower-cased word), or -1."""
    nouns = set(item.candidates) | {item.target}
    before = [i for i in range(item.query) if i in nouns or item.words[i].lower() in PRONOUNS]
    return before[-1] if before else -1


def _first_noun_outside_pp(item: Item) -> int:
    """The first noun before the query that is not inside a prepositional phrase (meta ``pp_nouns``:
    generated subject-verb items carry it), or -1."""
    inside = set(item.info.get("pp_nouns", ()))
    nouns = [c for c in _nouns_before(item) if c not in inside]
    return nouns[0] if nouns else -1


# the noun heuristics a relation head must beat, looking back from the query (verb, pronoun):
# the nearest preceding noun (pronouns of lexicon.PRONOUNS excluded), the nearest noun or pronoun
# (those pronouns included: on real text about what the nearest nominal candidate is), the first
# noun, and the k-th noun for the best fixed k <= MAX_NOUN_K; on one generated family's items (the
# "family=<name>" rows) also the structural shortcut PP_SHORTCUT, the first noun outside a
# prepositional phrase
HEURISTIC_RELATIONS = ("subject_verb", "anaphora")
MAX_NOUN_K = 4
NEAREST_OR_PRONOUN = "nearest noun or pronoun"
PP_SHORTCUT = "first noun outside a PP"
NOUN_HEURISTICS = ("nearest noun", NEAREST_OR_PRONOUN, "first noun", PP_SHORTCUT)  # and "noun k"


def _noun_heuristic(item: Item, kind: str, k: int = 0) -> bool:
    """Whether noun heuristic ``kind`` ("nearest noun", "nearest noun or pronoun", "first noun",
    "first noun outside a PP", "noun k" with ``k``) finds the gold target."""
    if kind == "nearest noun":
        return _nearest_noun(item) == item.target
    if kind == NEAREST_OR_PRONOUN:
        return _nearest_noun_or_pronoun(item) == item.target
    if kind == PP_SHORTCUT:
        return _first_noun_outside_pp(item) == item.target
    return _kth_noun(item, 1 if kind == "first noun" else k) == item.target


def _shortcut_applies(items: Sequence[Item]) -> bool:
    """The PP shortcut is scored on the items of one generated family that all carry ``pp_nouns``
    (the "family=<name>" rows): pooled over families, sources or minimal pairs it is left out (it is
    right on every phrase-family item by construction, so it would leave such a row no room)."""
    families = {(it.source, it.info.get("family")) for it in items}
    return len(families) == 1 and all("pp_nouns" in it.info for it in items)


def noun_heuristics(items: Sequence[Item]) -> dict[str, float]:
    """The accuracy of each noun heuristic on ``items`` (looking back from the query): "nearest
    noun", "nearest noun or pronoun", "first noun", "noun k" for k = 2 .. MAX_NOUN_K (k = 1 is the
    first noun), and "first noun outside a PP" where ``_shortcut_applies``."""
    items = list(items)
    if not items:
        return {}
    kinds = ["nearest noun", NEAREST_OR_PRONOUN, "first noun"]
    kinds += [f"noun {k}" for k in range(2, MAX_NOUN_K + 1)]
    kinds += [PP_SHORTCUT] if _shortcut_applies(items) else []
    return {kind: float(np.mean([_noun_heuristic(it, kind, _k(kind)) for it in items])) for kind in kinds}


def _k(kind: str) -> int:
    """The k of a "noun k" heuristic (0 for the others)."""
    return int(kind.split()[1]) if kind.startswith("noun ") else 0


def _intervening(item: Item) -> bool:
    """A candidate noun between the two words of the relation (an attractor for subject-verb, a
    nearer distractor for anaphora)."""
    lo, hi = sorted((item.query, item.target))
    return any(lo < c < hi for c in item.candidates if c != item.target)


def _family(name: str):
    """The subset of one generated subject-verb family's items (``SUBJECT_VERB_FAMILIES``)."""
    return lambda it: source_of(it) == "generated" and it.info.get("family") == name


# subsets reported beside each relation (descriptive), and the one that carries the anaphora label:
# a head attending to the sentence's subject (its first noun) looks like an anaphora head whenever the
# antecedent is the subject, and one attending to the nearest noun whenever the antecedent is that,
# so the label is tested where the antecedent is neither ("antecedent=other": a distractor noun of
# the wrong gender or number stands nearer to the pronoun)
SUBSETS = {
    "subject_verb": {
        "attractor": _intervening,
        "no attractor": lambda it: not _intervening(it),
        "distance 1-2": lambda it: abs(it.query - it.target) <= 2,
        "distance 3+": lambda it: abs(it.query - it.target) >= 3,
        # the real-text gate (REAL_TEXT_GATE): a noun between subject and verb (the nearest noun is
        # wrong) and three words or more apart (a short fixed offset is wrong)
        "attractor, distance 3+": lambda it: _intervening(it) and abs(it.query - it.target) >= 3,
        # one row per generated family: the phrase families put the subject as the first noun outside
        # a prepositional phrase, the clause families never (the PP shortcut is scored on these rows)
        **{f"family={name}": _family(name) for name in SUBJECT_VERB_FAMILIES},
    },
    "rhyme": {  # the previous line's end is the nearest candidate: right for couplets only
        "partner=previous line": lambda it: _nearest_candidate(it) == it.target,
        "partner=earlier line": lambda it: _nearest_candidate(it) != it.target,
    },
    "line_structure": {},
    "anaphora": {
        "antecedent=subject": lambda it: it.target == _first_noun(it),
        "antecedent=nearest": lambda it: it.target != _first_noun(it) and _nearest_candidate(it) == it.target,
        "antecedent=other": lambda it: it.target != _first_noun(it) and _nearest_candidate(it) != it.target,
    },
}
# rhyme: where the partner is not the previous line's end (ABAB), so a head attending to the nearest
# line end cannot pass; the control source (non-rhyming line ends at the same distance) never labels
LABEL_SUBSET = {
    "subject_verb": "all",
    "anaphora": "antecedent=other",
    "rhyme": "partner=earlier line",
    "line_structure": "all",
}
CONTROL_SOURCES = ("sonnets-control",)
# sources whose rows never carry a label of their own: the rhyme control, and the minimal pairs,
# which are scored per pair (a pair counts as right only where the head is right on both of its
# sentences: the argmax moved with the cue) and enter the labels as a gate (LABEL_GATES)
NON_LABEL_SOURCES = (*CONTROL_SOURCES, MINIMAL_PAIR_SOURCE)
# the sources that are not real text (IOI: the probe's prompt items): they get no real-text gate row,
# and a label's ``real_text`` status reads the other sources' (``analyses.heads.labels``)
SYNTHETIC_SOURCES = ("generated", IOI_SOURCE, *NON_LABEL_SOURCES)
# the real-text gate (labels v4): per relation, the subset of each real source's items on which a
# label's head is compared with the best of every heuristic (nearest noun, nearest noun or pronoun,
# first noun, k-th noun, best offset): subject-verb's items with a noun between subject and verb at
# distance 3+, anaphora's items whose antecedent is neither the subject nor the nearest noun. Each
# real source (not SYNTHETIC_SOURCES) gets a descriptive row of it per direction; ``roles.COLUMNS``'
# ``real_text`` says which real sources support a label (``analyses.heads.labels``)
REAL_TEXT_GATE = {"subject_verb": "attractor, distance 3+", "anaphora": "antecedent=other"}


def is_real_source(source: str) -> bool:
    """Whether a source family (``source_of``) is real text: not generated, minimal pairs, IOI
    prompts or the rhyme control, and not the pooled "all"."""
    return source != "all" and source not in SYNTHETIC_SOURCES


def _real_text_strata(relation: str, sources: Sequence[str]) -> list[tuple[str, str, bool]]:
    """The real-text gate's strata of ``relation``: (source, REAL_TEXT_GATE's subset, descriptive)
    for each real source of the run."""
    if relation not in REAL_TEXT_GATE:
        return []
    return [(s, REAL_TEXT_GATE[relation], False) for s in sources if is_real_source(s)]


def in_stratum(test: _Test, item: Item) -> bool:
    """Whether ``item`` counts for relation test ``test`` (its relation, source and subset)."""
    if item.relation != test.relation or item.query < 0 or item.target < 0:
        return False
    if test.source != "all" and source_of(item) != test.source:
        return False
    if test.reading == "predictive" and (item.query < 1 or item.target == item.query - 1):
        return False  # the target is the row word itself: nothing to predict from the row before it
    if test.subset == CONTROL_SUBSET:
        return _other_noun(item) >= 0
    return test.subset == "all" or SUBSETS[test.relation][test.subset](item)


def _directions(relation: str, causal: bool) -> list[tuple[str, bool, str]]:
    """(direction, forward, reading) of a relation's tests: the retrospective reading (the query
    word's own row: both ways on an encoder; a causal row cannot see a later word, so only looking
    back there) and, on a causal model, the predictive one (``PREDICTIVE``: IOI has only that)."""
    out = []
    if relation in RELATIONS:
        fwd_name, rev_name = RELATIONS[relation]
        out.append((fwd_name, True, "retrospective"))
        if not causal:
            out.append((rev_name, False, "retrospective"))
    if causal and relation in PREDICTIVE:
        out.append((PREDICTIVE[relation], True, "predictive"))
    return out


def _strata(relation: str, rel: Sequence[Item]) -> list[tuple[str, str, bool]]:
    """(source, subset, carries a label) of a relation's tests: every source pooled, each source on
    the relation's ``LABEL_SUBSET`` (label-carrying unless a ``NON_LABEL_SOURCES``) and on all of its
    items, and each subset pooled; one test per stratum."""
    sources = sorted({source_of(it) for it in rel})
    label_subset = LABEL_SUBSET.get(relation, "all")
    strata = [("all", "all", False)] + [(s, label_subset, s not in NON_LABEL_SOURCES) for s in sources]
    strata += [(s, "all", False) for s in sources if label_subset != "all" or s == MINIMAL_PAIR_SOURCE]
    strata += [("all", sub, False) for sub in SUBSETS.get(relation, {})] + _real_text_strata(relation, sources)
    # one test per stratum (the minimal pairs' "all" is the label subset of subject-verb too)
    return [st for i, st in enumerate(strata) if st[:2] not in {x[:2] for x in strata[:i]}]


# the relations the probe scores: Clark et al.'s word relations, then those read only predictively
PROBE_RELATIONS = (*RELATIONS, *(r for r in PREDICTIVE if r not in RELATIONS))


def _relation_tests(
    items: Sequence[Item], causal: bool, margin: float, specials: Sequence[str] = SPECIALS
) -> list[_Test]:
    """The word-relation tests. Per relation, direction and reading (``_directions``): the
    label-carrying tests (the first ``specials`` convention, one per source, on the relation's
    ``LABEL_SUBSET``), and descriptive ones: every source pooled, each source and each subset on its
    own, and the other conventions for the label-carrying strata (``_strata``). The predictive
    reading has the retrospective one's strata, on the items whose target is not the word right
    before the query."""
    tests = []
    for relation in PROBE_RELATIONS:
        rel = [it for it in items if it.relation == relation and it.query >= 0 and it.target >= 0]
        strata = _strata(relation, rel)
        controls = []  # the reverse control, beside every label-carrying source and pooled
        if relation in HEURISTIC_RELATIONS:
            controls = [("all", CONTROL_SUBSET, False)] + [(s, CONTROL_SUBSET, False) for s, _, lab in strata if lab]
        for name, forward, reading in _directions(relation, causal):
            for source, subset, label_stratum in strata + ([] if forward else controls):
                for k, convention in enumerate(specials):
                    if k > 0 and not label_stratum and (source, subset) != ("all", "all"):
                        continue
                    probe = _Test(
                        role=relation,
                        direction=name,
                        metric="accuracy",
                        kind="relation",
                        relation=relation,
                        forward=forward,
                        margin=margin,
                        specials=convention,
                        source=source,
                        subset=subset,
                        carries_label=label_stratum and k == 0,
                        # subject-verb on all items keeps the positional baselines: there the first
                        # noun is usually the subject, so its label is gated on the subsets where
                        # the heuristics fail instead (LABEL_GATES); IOI: the first and the last name
                        heuristics=(
                            forward
                            and relation in HEURISTIC_RELATIONS
                            and not (relation == "subject_verb" and subset == "all" and source != MINIMAL_PAIR_SOURCE)
                        )
                        or relation in NAME_HEURISTICS_RELATIONS,
                        reading=reading,
                    )
                    members = [it for it in rel if in_stratum(probe, it)]
                    if members or (source, subset) == ("all", "all"):  # the pooled row is always there
                        tests.append(_with_baseline(probe, members, causal))
    return tests


# IOI's heuristics, on its names (the candidates): the first name and the last (nearest) name; the
# name mentioned once is the indirect object by construction (the task's solution), so no baseline
NAME_HEURISTICS_RELATIONS = ("ioi",)
NAME_HEURISTICS = {"first name": "first noun", "last name": "nearest noun"}  # name -> the noun heuristic


def _heuristics(t: _Test, looking_back: Sequence[Item]) -> dict[str, float]:
    """The accuracy of each heuristic of ``t``'s relation on its items looking back: the noun
    heuristics (subject-verb, anaphora), the name heuristics (IOI), none for the rest."""
    if t.relation in HEURISTIC_RELATIONS and t.forward:
        return noun_heuristics(looking_back)
    if t.relation in NAME_HEURISTICS_RELATIONS and looking_back:
        return {
            kind: float(np.mean([_noun_heuristic(it, noun) for it in looking_back]))
            for kind, noun in NAME_HEURISTICS.items()
        }
    return {}


def _with_baseline(t: _Test, rel: Sequence[Item], causal: bool) -> _Test:
    """Set the test's baseline: the best of a fixed word offset (relative to the row word), the
    first word, (anaphora and rhyme, looking back) the nearest preceding candidate and, where
    ``t.heuristics``, the noun heuristics (``noun_heuristics``: nearest, first and k-th noun) or
    IOI's name heuristics (``NAME_HEURISTICS``: first and last name), over the test's own items. The
    best heuristic is recorded either way (``heuristic``, ``heuristic_baseline``)."""
    pairs = [_test_row_gold(t, it) for it in rel]
    if causal:
        pairs = [(r, g) for r, g in pairs if g < r]
    offsets = pd.Series([g - r for r, g in pairs], dtype="int64")
    best = int(offsets.value_counts().idxmax()) if len(offsets) else -1
    off_acc = float((offsets == best).mean()) if len(offsets) else float("nan")
    t.baseline_kind, t.offset, t.offset_baseline = f"offset {best:+d}", best, off_acc
    best_acc = off_acc
    # a head that always attends to the first word (the attention sink of models without a
    # BOS token) is right whenever the gold word is word 0: a fixed-position baseline
    first = float(np.mean([g == 0 for _, g in pairs])) if pairs else float("nan")
    if pairs and first > best_acc:
        t.baseline_kind, best_acc = "first word", first
    if t.relation in ("anaphora", "rhyme") and t.forward:
        cand = [float(_nearest_candidate(it) == it.target) for it in rel if not causal or it.target < it.query]
        t.candidate_baseline = float(np.mean(cand)) if cand else float("nan")
        if cand and t.candidate_baseline > best_acc:
            t.baseline_kind, best_acc = "nearest candidate", t.candidate_baseline
    heur = _heuristics(t, [it for it in rel if not causal or it.target < it.query])
    if heur:  # ties: the nearest noun (name)
        kind = max(heur, key=lambda name: (heur[name], name in ("nearest noun", "last name")))
        t.heuristic, t.heuristic_baseline = kind, heur[kind]
        t.noun_k = int(kind.split()[1]) if kind.startswith("noun ") else 0
        if t.heuristics and heur[kind] > best_acc:
            t.baseline_kind, best_acc = kind, heur[kind]
    return t


def _nearest_candidate(item: Item) -> int:
    """The nearest noun before the query among the item's candidates and its target."""
    before = [c for c in set(item.candidates) | {item.target} if c < item.query]
    return max(before) if before else -1


def _item_baseline(test: _Test, item: Item) -> float:
    r, g = _test_row_gold(test, item)
    if test.baseline_kind == "nearest candidate":
        return float(_nearest_candidate(item) == item.target)
    if test.baseline_kind in NOUN_HEURISTICS or test.baseline_kind.startswith("noun "):
        return float(_noun_heuristic(item, test.baseline_kind, test.noun_k))
    if test.baseline_kind in NAME_HEURISTICS:
        return float(_noun_heuristic(item, NAME_HEURISTICS[test.baseline_kind]))
    if test.baseline_kind == "first word":
        return float(g == 0)
    return float(g - r == test.offset)


def _check_options(items: list, alpha: float, specials: tuple, weighting: tuple) -> None:
    if not items:
        raise ValueError("empty dataset: no items to probe (need sentences with word-level gold)")
    for i, it in enumerate(items):
        if not isinstance(it, Item):
            raise TypeError(f"item {i} is a {type(it).__name__}, not an analyses.data.Item")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if not specials or any(s not in SPECIALS for s in specials) or len(set(specials)) != len(specials):
        raise ValueError(
            f"specials must be distinct values among {SPECIALS} (the first carries the labels), got {specials}"
        )
    if not weighting or weighting[0] != "attention" or any(w not in WEIGHTINGS for w in weighting):
        raise ValueError(f"weighting must start with 'attention' and take values among {WEIGHTINGS}, got {weighting}")


def _tests(
    items: list, causal: bool, n_repeat: int, margin: float, mass_margin: float, specials: tuple, weighting: tuple,
    learned_sink: bool = False,
) -> list[_Test]:  # fmt: skip
    """Every test of a run, in table order: token roles, broad, word relations, repeats; then the
    same again under the norm weighting if asked. ``learned_sink``: the model has learned sink logits
    (gpt-oss): their share is a test too (attention weighting only: the norm lens renormalises rows)."""
    tests = [
        _Test(role=r, direction="all", metric="mass", kind="token", margin=mass_margin)
        for r in ("local", "previous_token", "next_token", "self_token", *SET_ROLES)
    ]
    if learned_sink:
        tests.append(_Test(role="learned_sink", direction="all", metric="mass", kind="token", margin=mass_margin))
    tests.append(
        _Test(role="broad", direction="all", metric="entropy", kind="token", baseline_kind=BROAD_REFERENCE, margin=0.0)
    )
    tests += _relation_tests(items, causal, margin, specials)
    if n_repeat > 0:
        tests += [
            _Test(role=r, direction="all", metric="mass", kind="repeat", margin=mass_margin)
            for r in ("duplicate_token", "induction")
        ]
    if "norm" in weighting:
        tests += [
            dataclasses.replace(t, weighting="norm", carries_label=t.carries_label and t.role in NORM_LABEL_ROLES)
            for t in tests
            if t.role != "learned_sink"
        ]
    return tests
