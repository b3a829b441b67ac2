"""The two readings of a relation (labels v4, issue 35 section 1): on a causal model subject-verb and
anaphora are also read predictively (the last token before the query word -> the target), IOI only
so; planted heads that attend from the pre-verb token or from the verb are labelled in their own
reading only; the IOI items are the contrastive pairs' clean prompts with the answer appended."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import analyses.data as data
import analyses.heads as heads
from analyses.data import Item
from analyses.data.ioi import IOI_SOURCE, ioi_items, ioi_items_from_prompts
from analyses.heads import design, labels, roles
from tests.analyses.heads.test_baselines import NOUN_IDS, SUBJECT_IDS, VERB_IDS, _items, _planted
from tests.factories import ID, SUBJECTS, VERBS, planted_model

# the planted heads of the causal model, by the row they read and where it attends
PRE, VERB, PRE_NEAREST, BOTH = 0, 1, 2, 3
SV_GATES = labels.LABEL_GATES["subject_verb"]


def _reading_pick(toks, q):
    """Head 0: from the token before a verb to the subject (the predictive reading); head 1: from the
    verb to the subject (the retrospective one); head 2: from the token before a verb to the nearest
    noun (the attractor "cabinet" in "The keys near the cabinet | are" where there is one); head 3:
    from both to the subject. Every other row attends to itself."""
    pre = q + 1 < len(toks) and toks[q + 1] in VERB_IDS
    verb = toks[q] in VERB_IDS
    subj = [p for p in range(q + 1) if toks[p] in SUBJECT_IDS]
    nouns = [p for p in range(q + 1) if toks[p] in NOUN_IDS]
    s = subj[-1] if subj else q
    return {
        PRE: s if pre else q,
        VERB: s if verb else q,
        PRE_NEAREST: (nouns[-1] if nouns else q) if pre else q,
        BOTH: s if pre or verb else q,
    }


@pytest.fixture(scope="module")
def reading_df():
    return heads.probe_items(
        _planted(_reading_pick, "causal"), _items(160, seed=5), n_repeat=0, seed=0, n_boot=50, null_model=False,
        weighting=("attention",),
    )  # fmt: skip


def _row(df, head, direction, source="generated", subset="all"):
    g = df[
        (df["head"] == head)
        & (df["role"] == "subject_verb")
        & (df["direction"] == direction)
        & (df["source"] == source)
        & (df["subset"] == subset)
        & (df["specials"] == "exclude")
    ]
    assert len(g) == 1, g
    return g.iloc[0]


RETRO, PRED = "verb->subject", roles.PREDICTIVE["subject_verb"]


def test_a_pre_verb_head_is_labelled_predictive_and_a_verb_head_retrospective(reading_df):
    df = reading_df
    pre_p, pre_r = _row(df, PRE, PRED), _row(df, PRE, RETRO)
    verb_p, verb_r = _row(df, VERB, PRED), _row(df, VERB, RETRO)
    assert pre_p["score"] == 1.0 and pre_p["label"] and pre_p["reading"] == "predictive"
    assert pre_r["score"] == 0.0 and not pre_r["label"] and pre_r["reading"] == "retrospective"
    assert verb_r["score"] == 1.0 and verb_r["label"]
    assert verb_p["score"] == 0.0 and not verb_p["label"]  # its pre-verb row attends to itself: that competes
    assert _row(df, BOTH, PRED)["label"] and _row(df, BOTH, RETRO)["label"]
    # each reading is a family of its own; the labels' names say which reading they are
    assert pre_p["family"] == "subject_verb@predictive" and verb_r["family"] == "subject_verb"
    assert roles.label_name("subject_verb", pre_p["reading"]) == "subject_verb (predictive)"
    fam = df[df["family"] == "subject_verb@predictive"]
    assert set(fam["direction"]) == {PRED} and fam["p_adjusted"].notna().all()


def test_the_predictive_items_leave_out_a_target_right_before_the_query(reading_df):
    items = _items(160, seed=5)
    before = sum(it.target == it.query - 1 for it in items)
    row = _row(reading_df, PRE, PRED, "all")
    assert before > 0 and row["n"] == len(items) - before
    assert _row(reading_df, PRE, RETRO, "all")["n"] == len(items)
    # the best offset is relative to the row word (the word before the verb), over the test's own items
    t = next(t for t in design._relation_tests(items, True, 0.05) if t.direction == PRED and t.source == "all")
    kept = [it for it in items if it.target != it.query - 1]
    offsets = pd.Series([it.target - (it.query - 1) for it in kept])
    assert t.offset == offsets.value_counts().idxmax() and t.offset_baseline == pytest.approx(
        offsets.value_counts(normalize=True).max()
    )


def test_a_predictive_nearest_noun_head_fails_the_gates(reading_df):
    df = reading_df
    row = _row(df, PRE_NEAREST, PRED)
    assert not row["label"] and not row["gates"]
    for source, sub in SV_GATES:
        if source == "all":  # the gated strata have predictive rows, so the gates apply to them
            gate = _row(df, PRE_NEAREST, PRED, source, sub)
            assert gate["n"] > 0 and gate["ci_low"] <= gate["baseline"]
            assert _row(df, PRE, PRED, source, sub)["score"] == 1.0


def test_predictive_tests_exist_on_every_gated_stratum_and_only_on_a_causal_model():
    items = data.generate_subject_verb(60, seed=0) + data.generate_anaphora(80, seed=0)
    items += data.generate_minimal_pairs("subject_verb", 30, 0) + data.generate_minimal_pairs("anaphora", 30, 0)
    causal = design._relation_tests(items, causal=True, margin=0.05)
    for relation, strata in labels.LABEL_GATES.items():
        for source, sub in strata:
            got = [
                t
                for t in causal
                if t.role == relation and t.reading == "predictive" and (t.source, t.subset) == (source, sub)
            ]
            assert len(got) == 1 and got[0].direction == roles.PREDICTIVE[relation]
            assert sum(design.in_stratum(got[0], it) for it in items) > 0
    assert {t.family for t in causal if t.carries_label} == {
        "subject_verb", "subject_verb@predictive", "anaphora", "anaphora@predictive"
    }  # fmt: skip
    encoder = design._relation_tests(items, causal=False, margin=0.05)
    assert {t.reading for t in encoder} == {"retrospective"}
    assert not any(t.direction in roles.PREDICTIVE.values() for t in encoder)


def test_heads_csv_has_the_reading_filled(reading_df, tmp_path):
    from analyses.heads.report import write_csv

    df = reading_df
    assert df["reading"].isin(["retrospective", "predictive", "-"]).all()
    expect = [roles.reading_of(r, d) for r, d in zip(df["role"], df["direction"])]
    assert df["reading"].tolist() == expect
    assert set(df.loc[df["role"] == "previous_token", "reading"]) == {"-"}
    write_csv(df, tmp_path / "heads.csv")
    back = pd.read_csv(tmp_path / "heads.csv")
    assert back["reading"].tolist() == expect  # from the tests, not re-derived on reading


# --------------------------------------------------------------------------------------------------
# IOI

NAMES = SUBJECTS  # the planted vocabulary's names


def _ioi_planted_items(n: int, seed: int) -> list[Item]:
    """IOI-shaped items in the planted vocabulary, ABBA and BABA alternating: "the A near B . (old big)
    B sits near A": the query is the last word (the indirect object named again), the target its first
    mention; 0-2 filler words before the second clause, so that no fixed offset is right half the time."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        a, b = rng.choice(NAMES, 2, replace=False)
        x, y = (a, b) if i % 2 == 0 else (b, a)
        filler = ("old", "big")[: int(rng.integers(0, 3))]
        words = ("the", x, "near", y, ".", *filler, b, str(rng.choice(VERBS)), "near", a)
        query = len(words) - 1
        out.append(
            Item(words, "ioi", query=query, target=words.index(a), candidates=(1, 3, query - 3), source=IOI_SOURCE)
        )
    return out


NAME_IDS = {ID[w] for w in NAMES}
IO, FIRST_NAME, LAST_NAME = 0, 1, 2


def _ioi_pick(toks, q):
    """Head 0: to the name mentioned once so far (the indirect object); head 1: to the first name;
    head 2: to the last name; head 3: itself."""
    names = [p for p in range(q + 1) if toks[p] in NAME_IDS]
    once = [p for p in names if sum(toks[r] == toks[p] for r in names) == 1]
    return {
        IO: once[0] if once else q,
        FIRST_NAME: names[0] if names else q,
        LAST_NAME: names[-1] if names else q,
        3: q,
    }


def test_an_ioi_head_is_labelled_and_the_name_heuristics_are_not():
    df = heads.probe_items(
        _planted(_ioi_pick, "causal"), _ioi_planted_items(80, seed=2), n_repeat=0, seed=0, n_boot=50,
        null_model=False, weighting=("attention",),
    )  # fmt: skip
    g = df[(df["role"] == "ioi") & (df["source"] == IOI_SOURCE) & (df["specials"] == "exclude")].set_index("head")
    assert set(g["direction"]) == {roles.PREDICTIVE["ioi"]} and set(g["reading"]) == {"predictive"}
    assert (g["family"] == "ioi").all() and (g["baseline_kind"] == "first name").all()
    assert (g["heuristic"] == "first name").all() and (g["heuristic_baseline"] == 0.5).all()
    assert g.loc[IO, "score"] == 1.0 and g.loc[IO, "label"]
    assert g.loc[FIRST_NAME, "score"] == 0.5 and not g.loc[FIRST_NAME, "label"]
    assert g.loc[LAST_NAME, "score"] == 0.0 and not g.loc[LAST_NAME, "label"]
    assert set(df.loc[df["role"] == "ioi", "direction"]) == {"final->indirect_object"}


def test_an_encoder_refuses_ioi():
    with pytest.raises(ValueError, match="encoder.*ioi.*causal model") as err:
        heads.probe_items(planted_model(), _ioi_planted_items(10, seed=0), n_repeat=0, null_model=False)
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def smol_tokenizer():
    from transformers import AutoTokenizer

    import models
    from models.loading import smollm2_hf_dir

    return models.Tokenizer(AutoTokenizer.from_pretrained(str(smollm2_hf_dir())))


def test_ioi_items_are_the_clean_prompts_of_the_contrastive_pairs(smol_tokenizer):
    from analyses.validation.prompts import contrastive_pairs

    pairs = contrastive_pairs("ioi", smol_tokenizer, 40, seed=3)
    hf = smol_tokenizer.hf
    answers = [hf.decode([int(r)]).strip() for r in pairs.right]
    built = ioi_items_from_prompts(pairs.clean_texts, answers, pairs.template)
    source = data.load_items(n=40, seed=3, sources="ioi")  # the source: the same prompts, no tokenizer needed
    assert [(it.words, it.query, it.target, it.candidates) for it in source] == [
        (it.words, it.query, it.target, it.candidates) for it in built
    ]
    assert source == ioi_items(40, seed=3)
    for it, text, answer, form in zip(built, pairs.clean_texts, answers, pairs.template):
        assert it.relation == "ioi" and it.source == IOI_SOURCE and it.cluster == ""
        assert it.text == f"{text} {answer}" and it.query == len(it.words) - 1 and it.words[-1] == answer
        assert it.words[it.target] == answer and it.words[it.query - 1] == "to"
        names = [it.words[c] for c in it.candidates]
        assert len(names) == 3 and names.count(answer) == 1  # IO once, the subject twice
        assert it.target == it.candidates[0 if form.startswith("ABBA") else 1]
        # the predictive row: the last token of "to", the clean prompt's final token, whose prediction is the answer
        batch = smol_tokenizer.words([list(it.words)])
        row = max(p for p, w in enumerate(batch.token_to_word[0]) if w == it.query - 1)
        real = batch.input_ids[0][batch.attention_mask[0].bool()].tolist()
        assert hf.decode(real[: row + 1]).strip().endswith(text.strip())


def test_the_ioi_source_takes_its_own_size_and_checks_its_prompts():
    items = data.load_items(n=10, seed=0, sources="generated,ioi", n_for={"ioi": 7})
    assert sum(it.relation == "ioi" for it in items) == 7 and sum(it.relation == "subject_verb" for it in items) == 10
    with pytest.raises(ValueError, match="named exactly once"):
        ioi_items_from_prompts(["Then, Mary and John went to the store. Mary gave a drink to"], ["Mary"])


def test_the_predictive_row_is_the_last_token_before_the_query_and_its_word_competes(smol_tokenizer):
    """On "The keys near the cabinetmakers are": the predictive row is the last token of the
    multi-token "cabinetmakers" alone, and that word competes in the argmax; the retrospective row
    averages the verb's tokens and leaves the verb out. A row that puts 0.6 on its own word and 0.4 on
    the subject is wrong predictively; the same weights from the verb's row are right retrospectively."""
    import torch

    from analyses.heads.engine import _relation_plan
    from analyses.heads.scoring import relation_scores

    item = Item(("The", "keys", "near", "the", "cabinetmakers", "are", "."), "subject_verb", 5, 1, (1, 4))
    tests = [t for t in design._relation_tests([item], True, 0.05) if t.source == "all" and t.specials == "exclude"]
    pred, retro = (next(t for t in tests if t.direction == d) for d in (PRED, RETRO))
    batch = smol_tokenizer.words([list(item.words)])
    plan, _, rel = _relation_plan(batch, [item], [pred, retro], causal=True)
    align = batch.token_to_word[0]
    row_toks = [p for p, w in enumerate(align) if w == 4]
    assert len(row_toks) > 1  # a word of several tokens
    assert plan.row_weights[0, 0].nonzero().flatten().tolist() == [row_toks[-1]]
    verb_toks = [p for p, w in enumerate(align) if w == 5]
    assert plan.row_weights[0, 1].nonzero().flatten().tolist() == verb_toks
    assert plan.others[0, 0, 4] and not plan.others[0, 1, 5]  # the row word competes / is left out
    assert not plan.others[0, 0, 1] and not plan.others[0, 1, 1]  # the gold is the gold
    t = batch.input_ids.shape[1]
    pattern = torch.zeros(1, 1, t, t)
    subj = [p for p, w in enumerate(align) if w == 1][0]
    for rows, own in ((row_toks, row_toks[-1]), (verb_toks, verb_toks[-1])):
        for r in rows:
            pattern[0, 0, r, own], pattern[0, 0, r, subj] = 0.6, 0.4
    acc, _ = relation_scores(pattern, plan)
    assert acc[0, :, 0].tolist() == [0.0, 1.0]
