"""The clause families of subject-verb (issue 35 section 2): the gold sits where the grammar says, the
first noun outside a prepositional phrase is never the subject there (and always in the phrase
families), and the main job's sizes give every clause family 150 items or more."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import analyses.data as data
from analyses.data.clauses import clause_item
from analyses.data.lexicon import TRANSITIVE
from analyses.heads import design
from tests.analyses.data.test_data import marked, plural_noun, singular_verb

TRANSITIVE_FORMS = {w for pair in TRANSITIVE for w in pair}

# the first two sentences of each clause family from numpy's seed 0, read by hand: (sentence, the
# query verb, its subject, the nouns inside a PP, the first noun outside a PP: the shortcut's answer)
HAND_CHECKED = [
    ("The duchess wrote that the rabbits were lonely .", "were", "rabbits", (), "duchess"),
    (
        "Near the harbor of the park , the tired cats that the quiet soldiers near the chef call were angry .",
        "call",
        "soldiers",
        ("harbor", "park", "chef"),
        "cats",
    ),
    (
        "After the match the children were angry but the reports were expensive .",
        "were",
        "reports",
        ("match",),
        "children",
    ),
    (
        "While the girls dance in the forest , the expensive tower above the school was new .",
        "was",
        "tower",
        ("forest", "school"),
        "girls",
    ),
    (
        "Before the concert , the students near the cities wrote that the dancer by the customers was angry .",
        "was",
        "dancer",
        ("concert", "cities", "customers"),
        "students",
    ),
    ("In the library the young authors that the bakers hate are happy .", "hate", "bakers", ("library",), "authors"),
    (
        "Before the game of the forest , the pilots sing but the singers in the train laugh .",
        "laugh",
        "singers",
        ("game", "forest", "train"),
        "pilots",
    ),
    (
        "After the scientists swim in the library , the teachers behind the windows are sick .",
        "are",
        "teachers",
        ("library", "windows"),
        "scientists",
    ),
]


@pytest.fixture(scope="module")
def clauses():
    return data.generate_subject_verb(800, seed=3, families=data.CLAUSE_FAMILIES)


def _by_family(items):
    out = collections.defaultdict(list)
    for it in items:
        out[it.info["family"]].append(it)
    return out


def test_hand_checked_items_put_the_gold_where_the_grammar_says():
    rng = np.random.default_rng(0)
    got = [clause_item(fam, rng) for _ in range(2) for fam in data.CLAUSE_FAMILIES]
    for it, (sentence, verb, subject, pps, shortcut) in zip(got, HAND_CHECKED):
        assert " ".join(it.words) == sentence
        assert (it.words[it.query], it.words[it.target]) == (verb, subject)
        assert tuple(it.words[c] for c in it.info["pp_nouns"]) == pps
        assert it.words[design._first_noun_outside_pp(it)] == shortcut != subject
        assert design._nearest_noun(it) == max(it.candidates)  # a PP noun or the subject: the last noun


def test_every_clause_item_agrees_and_its_subject_is_not_the_first_noun_outside_a_pp(clauses):
    fams = _by_family(clauses)
    assert set(fams) == set(data.CLAUSE_FAMILIES) and all(len(g) == 200 for g in fams.values())
    for it in clauses:
        q, t = it.query, it.target
        assert 0 < t < q and "the" in it.words[t - 2 : t], marked(it)  # a noun phrase's head
        assert plural_noun(it.words[t]) == (not singular_verb(it.words[q])), marked(it)
        assert t in it.candidates and all(c < q for c in it.candidates), marked(it)
        pp = set(it.info["pp_nouns"])
        assert pp <= set(it.candidates) and t not in pp, marked(it)
        assert design._first_noun_outside_pp(it) not in (t, -1), marked(it)  # the shortcut is always wrong
        between = [c for c in it.candidates if t < c < q]
        assert it.info["attractor"] == any(plural_noun(it.words[c]) != plural_noun(it.words[t]) for c in between)
    for it in fams["rc_verb"]:  # the relative's own verb, after its subject (and its PP)
        assert it.words[it.query] in TRANSITIVE_FORMS and it.words.index("that") < it.target, marked(it)


def test_the_pp_shortcut_is_right_on_every_phrase_item_and_wrong_on_every_clause_item(clauses):
    phrase = data.generate_subject_verb(600, seed=3, families=data.PHRASE_FAMILIES)
    for fam, items in _by_family(phrase).items():
        assert design.noun_heuristics(items)[design.PP_SHORTCUT] == 1.0, fam
    for fam, items in _by_family(clauses).items():
        heur = design.noun_heuristics(items)
        assert heur[design.PP_SHORTCUT] == 0.0 and heur["first noun"] == 0.0, fam
        assert max(heur.values()) < 0.65, (fam, heur)  # no single heuristic finds the clause subject
    # pooled over families (or sources) the shortcut is not scored: it would leave no room on them
    assert design.PP_SHORTCUT not in design.noun_heuristics(phrase + clauses)


def test_the_main_job_sizes_give_every_clause_family_150_items():
    for n in (600, 1000):  # scripts/main.sh: --n 600 (SmolLM2), --n 1000 (MiniLM)
        items = data.load_dataset("subject_verb", n, seed=0, sources=("generated", "clauses"))
        counts = collections.Counter(it.info["family"] for it in items)
        assert len(items) == 2 * n and len({it.words for it in items}) == 2 * n  # n of each source
        assert all(counts[f] >= 150 for f in data.CLAUSE_FAMILIES), counts
        assert sum(counts[f] for f in data.PHRASE_FAMILIES) == n


def test_each_family_is_a_report_row():
    items = data.generate_subject_verb(400, seed=1)
    tests = design._relation_tests(items, causal=False, margin=0.05)
    rows = {(t.source, t.subset): t for t in tests if t.direction == "verb->subject"}
    for fam in data.SUBJECT_VERB_FAMILIES:
        t = rows[("all", f"family={fam}")]
        assert not t.carries_label and t.heuristics  # descriptive, against every heuristic
        members = [it for it in items if design.in_stratum(t, it)]
        assert len(members) == 40 and {it.info["family"] for it in members} == {fam}
        # the shortcut is the best heuristic of every phrase family with a noun between subject and verb
        # (simple, adverb: the nearest noun ties with it), and of no clause family
        if fam in ("pp", "pp2", "rc_object", "rc_subject"):
            assert t.heuristic == design.PP_SHORTCUT and t.heuristic_baseline == 1.0
        if fam in data.CLAUSE_FAMILIES:
            assert t.heuristic != design.PP_SHORTCUT and t.heuristic_baseline < 1.0
