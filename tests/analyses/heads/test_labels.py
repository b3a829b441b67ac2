"""Defensible labels: the special-token convention, per-source and per-subset rows, which row
carries the label and in which family, the power figure, and the one-map-per-model view."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from analyses import heads
from analyses.data import Item
from analyses.heads import design, summaries
from tests.factories import planted_items, planted_model

SEP_WEIGHT = 1.2  # head 2's key weight on [SEP]: above the subject's 1.0, so [SEP] takes the largest weight


@pytest.fixture(scope="module")
def sep_df():
    m = planted_model(sep_weight=SEP_WEIGHT)
    return heads.probe_items(
        m, planted_items(120, seed=3), n_repeat=0, seed=0, n_boot=50, null_model=False, weighting=("attention",)
    )


def _row(df, head, **where):
    g = df[(df["head"] == head) & (df["role"] == "subject_verb") & (df["direction"] == "verb->subject")]
    for k, v in where.items():
        g = g[g[k] == v]
    assert len(g) == 1, g
    return g.iloc[0]


def test_a_sep_heavy_head_is_right_under_clark_and_wrong_when_specials_compete(sep_df):
    # the verb's largest weight goes to [SEP], its largest weight among words to the subject
    exclude = _row(sep_df, 2, source="all", subset="all", specials="exclude")
    include = _row(sep_df, 2, source="all", subset="all", specials="include")
    assert exclude["score"] == 1.0 and include["score"] == 0.0
    # the mass on special tokens is reported beside the accuracy, the same under both conventions
    assert exclude["special_mass"] > 0.9 and exclude["special_mass"] == include["special_mass"]
    # the label follows the documented default (exclude); the include row is descriptive
    lab = _row(sep_df, 2, source="generated", subset="all", specials="exclude")
    assert lab["family"] == "subject_verb" and lab["label"]
    desc = _row(sep_df, 2, source="generated", subset="all", specials="include")
    assert desc["family"] == "" and not desc["label"] and np.isnan(desc["p_adjusted"])


def test_without_special_tokens_both_conventions_agree():
    m = planted_model("causal")  # a tokenizer with no special tokens: nothing to exclude
    df = heads.probe_items(
        m, planted_items(60, seed=4), n_repeat=0, n_boot=20, null_model=False, weighting=("attention",)
    )
    rel = df[df["role"] == "subject_verb"]
    ex = rel[rel["specials"] == "exclude"].set_index(["layer", "head", "source", "subset"]).sort_index()
    inc = rel[rel["specials"] == "include"].set_index(["layer", "head", "source", "subset"]).sort_index()
    common = ex.index.intersection(inc.index)
    assert len(common) > 0
    np.testing.assert_array_equal(ex.loc[common, "score"], inc.loc[common, "score"])


def test_descriptive_rows_never_carry_a_label_and_families_are_per_role(sep_df):
    desc = sep_df[sep_df["family"] == ""]
    assert not desc["label"].any() and desc["p_adjusted"].isna().all()
    assert set(sep_df.loc[sep_df["family"] != "", "family"]) <= set(heads.ROLES)
    # per role: adding descriptive tests (the include convention) changes no label-carrying p_adjusted
    m = planted_model(sep_weight=SEP_WEIGHT)
    only = heads.probe_items(
        m,
        planted_items(120, seed=3),
        n_repeat=0,
        seed=0,
        n_boot=50,
        null_model=False,
        specials=("exclude",),
        weighting=("attention",),
    )
    key = ["layer", "head", "role", "direction", "source", "subset"]
    a = sep_df[sep_df["family"] != ""].set_index(key)["p_adjusted"].sort_index()
    b = only[only["family"] != ""].set_index(key)["p_adjusted"].sort_index()
    assert a.index.equals(b.index)
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=0, atol=0)


def test_bad_specials_are_refused():
    m = planted_model()
    with pytest.raises(ValueError, match="specials"):
        heads.probe_items(
            m, planted_items(4, seed=0), specials=("bogus",), null_model=False, n_repeat=0, weighting=("attention",)
        )


def _item(words, q, t, cands, source="generated:x"):
    return Item(words=tuple(words.split()), relation="anaphora", query=q, target=t, candidates=cands, source=source)


def test_strata_pick_the_documented_items():
    subj = _item("the king met the queen because he was late", 6, 1, (1, 4))  # antecedent = first noun
    near = _item("the king met the queen because she was late", 6, 4, (1, 4))  # nearest noun
    other = _item("the king met the queen near the boys because she was late", 9, 4, (1, 4, 7), "winobias")
    t = design._Test(
        role="anaphora", direction="pronoun->antecedent", metric="accuracy", kind="relation", relation="anaphora"
    )
    member = {}
    for subset in ("all", "antecedent=subject", "antecedent=nearest", "antecedent=other"):
        t.subset, t.source = subset, "all"
        member[subset] = [design.in_stratum(t, it) for it in (subj, near, other)]
    assert member == {
        "all": [True, True, True],
        "antecedent=subject": [True, False, False],
        "antecedent=nearest": [False, True, False],
        "antecedent=other": [False, False, True],
    }
    t.subset, t.source = "all", "winobias"
    assert [design.in_stratum(t, it) for it in (subj, near, other)] == [False, False, True]
    assert design.LABEL_SUBSET["anaphora"] == "antecedent=other"


def test_anaphora_labels_are_tested_where_neither_subject_nor_nearest_noun_is_right():
    items = [
        _item("the king met the queen because he was late", 6, 1, (1, 4)),
        _item("the king met the queen near the boys because she was late", 9, 4, (1, 4, 7)),
        _item("the man saw the woman by the men since she left", 9, 4, (1, 4, 7)),
    ]
    tests = [t for t in design._relation_tests(items, causal=True, margin=0.05) if t.carries_label]
    # both readings of a causal model, each in its own family
    assert [(t.role, t.source, t.subset, t.specials, t.reading, t.family) for t in tests] == [
        ("anaphora", "generated", "antecedent=other", "exclude", "retrospective", "anaphora"),
        ("anaphora", "generated", "antecedent=other", "exclude", "predictive", "anaphora@predictive"),
    ]
    # on those items the nearest-candidate baseline is 0 by construction: a nearest-noun head cannot pass
    assert [t.candidate_baseline for t in tests] == [0.0, 0.0]


@pytest.mark.parametrize("n, sd, m", [(200, 0.6, 100), (800, 0.7, 300)])
def test_power_figure_is_what_a_simulation_finds(n, sd, m):
    """At the reported detectable effect, a one-sided paired t-test at alpha/m rejects in ~80% of
    simulated runs; at half the effect above the margin, far less often."""
    margin, alpha = 0.05, 0.05
    df = _power_frame(n, sd, m, margin)
    delta = float(summaries.detectable_effect(df, alpha=alpha).iloc[0]["detectable_effect"])
    rng = np.random.default_rng(0)

    def rejection_rate(effect, reps=2000):
        d = rng.normal(effect, sd, size=(reps, n))
        t = (d.mean(1) - margin) / (d.std(1, ddof=1) / np.sqrt(n))
        return float((st.t.sf(t, n - 1) <= alpha / m).mean())

    assert 0.76 <= rejection_rate(delta) <= 0.84
    assert rejection_rate(margin + (delta - margin) / 2) < 0.3


def _power_frame(n, sd, m, margin):
    import pandas as pd

    rows = [
        dict(
            role="subject_verb",
            direction="verb->subject",
            source="generated",
            subset="all",
            n=n,
            sd_diff=sd,
            margin=margin,
            family="subject_verb",
            p_value=0.5,
        )
        for _ in range(m)
    ]
    return pd.DataFrame(rows)


def test_role_map_gives_each_planted_head_its_role():
    m = planted_model()
    df = heads.probe_items(
        m, planted_items(160, seed=1), n_repeat=60, seed=0, n_boot=50, null_model=False, weighting=("attention",)
    )
    rmap = heads.role_map(df).set_index("head")
    assert rmap.loc[2, "primary"] == "subject_verb (retrospective)"  # an encoder: the verb's own row
    assert rmap.loc[3, "primary"] == "broad"
    assert rmap.loc[0, "primary"] in ("previous_token", "local")
    assert rmap.loc[1, "primary"] in ("delimiter", "punctuation", "sep_eos")
    # standardised effect: (score - baseline) / margin for the primary role
    sv = heads.headline(df)
    sv = sv[(sv["head"] == 2) & (sv["role"] == "subject_verb") & (sv["direction"] == "verb->subject")].iloc[0]
    assert rmap.loc[2, "standardised"] >= (sv["score"] - sv["baseline"]) / sv["margin"] - 1e-9


def test_rhyme_labels_are_tested_where_the_partner_is_not_the_previous_line_end():
    from analyses.data import poetry

    items = poetry.rhyme_items()[:40]
    controls = [
        dataclasses.replace(it, relation="rhyme", source="sonnets-control") for it in poetry.rhyme_controls()[:40]
    ]
    tests = design._relation_tests(items + controls, causal=True, margin=0.05)
    labelled = [(t.role, t.source, t.subset) for t in tests if t.carries_label]
    assert labelled == [("rhyme", "sonnets", "partner=earlier line")]
    control = [t for t in tests if t.source == "sonnets-control"]
    assert control and not any(t.carries_label for t in control)  # the control set never labels
    label_test = next(t for t in tests if t.carries_label)
    assert label_test.candidate_baseline == 0.0  # the previous line's end is never the partner there


def test_the_map_names_each_reading_and_splits_the_idle_sink_heads():
    """Labels v4 (issue 35): a relation's two readings are two roles on the map, named by
    ``label_name``; a sink-only head is a sink writer (norm-confirmed) or a no-op sink (weight only)."""
    from tests.analyses.heads.planted_tables import planted_heads

    rmap = heads.role_map(planted_heads()).set_index(["layer", "head"])
    assert rmap.loc[(0, 0), "primary"] == "subject_verb (predictive)"  # the pre-verb row only
    assert rmap.loc[(1, 1), "primary"] == "subject_verb (retrospective)"  # both, the verb's row stronger
    assert rmap.loc[(1, 1), "secondary"] == "subject_verb (predictive)"
    assert rmap.loc[(1, 0), "primary"] == "ioi (predictive)"
    assert rmap.loc[(0, 1), "primary"] == heads.SINK_WRITER and rmap.loc[(0, 1), "sink"] == "attention_sink"
    assert rmap.loc[(0, 2), "primary"] == heads.NOOP_IDLE and rmap.loc[(0, 2), "sink"] == "noop_sink"
    assert rmap.loc[(1, 2), "primary"] == "unclassified"
    assert set(rmap["primary"].cat.categories) == set(heads.MAP_PRIMARY)
    lab = heads.labelled_roles(planted_heads())
    got = sorted(lab.loc[lab["head"] == 1, "name"])  # L0H1's sink label, L1H1's two readings
    assert got == ["attention_sink", "subject_verb (predictive)", "subject_verb (retrospective)"]
    assert list(lab.loc[lab["head"] == 2, "name"]) == ["noop_sink"]


def test_an_old_heads_csv_without_reading_reads_as_retrospective(tmp_path):
    from analyses.report.page import read_heads
    from tests.analyses.heads.planted_tables import planted_heads

    old = planted_heads(old=True)
    assert "reading" not in old and "real_text" not in old
    old.to_csv(tmp_path / "heads.csv", index=False)
    back = read_heads(tmp_path / "heads.csv")  # the page, the summary and the explorer read it so
    sv = back[back["role"] == "subject_verb"]
    assert (sv["reading"] == "retrospective").all() and (back.loc[back["role"] == "local", "reading"] == "-").all()
    rmap = heads.role_map(back).set_index(["layer", "head"])
    assert rmap.loc[(1, 1), "primary"] == "subject_verb (retrospective)" and rmap.loc[(1, 1), "secondary"] == ""
    assert (heads.real_text(heads.labelled_roles(back)) == "-").all()  # not known before labels v4
    # a hand-made table whose reading cells are empty gets them derived too
    blank = planted_heads().assign(reading="")
    assert set(heads.readings(blank[blank["direction"] == "pre-verb->subject"])) == {"predictive"}


def test_head_vs_strongest_heuristic_per_reading_and_source():
    from tests.analyses.heads.planted_tables import GATE_SUBSET, planted_heads

    t = summaries.heuristic_table(planted_heads()).set_index("reading")
    assert list(t["source"]) == ["spacy-silver"] * 2 and (t["subset"] == GATE_SUBSET).all()
    assert (t.loc["retrospective", "layer"], t.loc["retrospective", "head"]) == (1, 1)
    assert t.loc["retrospective", "heuristic"] == "nearest noun or pronoun" and t.loc["retrospective", "beats"]
    # the best predictive head (L1H1, 0.70) does not clear the heuristic's 0.86 there
    assert (t.loc["predictive", "head"], t.loc["predictive", "score"]) == (1, 0.70) and not t.loc["predictive", "beats"]
    assert t.loc["predictive", "heuristic_accuracy"] == 0.86 and t.loc["predictive", "n"] == 48


def test_a_role_without_a_label_is_a_bounded_negative():
    from tests.analyses.heads.planted_tables import planted_heads

    df = planted_heads()
    d = summaries.detectable_effect(df).set_index(["role", "reading"]).loc[("anaphora", "retrospective")]
    text = summaries.no_label_bound(df, "anaphora", "retrospective")
    bound = f"+ {d['detectable_effect']:.3f} on generated (pronoun->antecedent, n=200)"
    assert text == f"no head above baseline {bound} at 80% power" and 0.05 < d["detectable_effect"] < 0.5
    # each reading's family is its own: the predictive rows' m is theirs, not the retrospective family's
    p = summaries.detectable_effect(df).set_index(["role", "reading"]).loc[("subject_verb", "predictive")]
    assert p["family_size"] == int((df["family"] == "subject_verb@predictive").sum())


def test_a_role_read_one_way_is_bounded_from_its_own_rows():
    """rhyme is not read in two readings: its bounded negative finds its label-carrying rows whatever
    reading they carry (the summary passed "-" and found none, then said the run had no rhyme items)."""
    from analyses.heads.report import no_label_line
    from tests.analyses.heads.planted_tables import planted_heads

    df = planted_heads()
    rows = df[(df["role"] == "anaphora") & (df["family"] == "anaphora")].copy()
    rows = rows.assign(role="rhyme", direction="line_end->rhyme", source="sonnets", family="rhyme")
    both = pd.concat([df, rows], ignore_index=True)
    line = no_label_line(both, "rhyme")
    assert line.startswith("- `rhyme`: no head above baseline + ") and "on sonnets (line_end->rhyme, n=200)" in line
    assert "no items of it" in no_label_line(df, "rhyme")  # a run without rhyme rows says so
