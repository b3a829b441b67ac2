"""Labels v4, section 4: what a decision reads. Gates, labels and real-text support decide on the
clustered t interval (``gate_low``), not on a 200-replicate bootstrap end; the map's primary role
under a second normalisation (from the random-init model's score); ``broad`` is descriptive."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from analyses import heads
from analyses.heads import labels, summaries
from analyses.heads import report as hreport
from interp import stats
from tests.analyses.heads.planted_tables import GATE_SUBSET, SV_RETRO, planted_heads


class _Summ:  # the two fields ``_gate_low`` reads of the reducer's summary
    def __init__(self, score, n, sd_diff):
        self.score, self.n, self.sd_diff = score, n, sd_diff


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gate_low_is_the_cluster_robust_t_interval_computed_by_hand(seed):
    rng = np.random.default_rng(seed)
    n_units, cells = 90, (2, 3)
    clusters = rng.integers(0, 25, n_units)  # clusters of uneven sizes
    d = rng.normal(0.1, 0.3, (n_units, *cells)) + 0.2 * rng.normal(size=(25, *cells))[clusters]
    cs = stats.ClusterSums(cells)
    order = np.argsort(clusters, kind="stable")
    cs.update(d[order], np.ones_like(d, dtype=bool), clusters[order])
    base = 0.25
    summ = _Summ(score=d.mean(0) + base, n=np.full(cells, n_units), sd_diff=d.std(0, ddof=1))
    acc = np.zeros((1, 1), dtype=bool)
    got = labels._gate_low(summ, cs, acc, np.full(cells, np.nan))
    # by hand: Liang-Zeger over cluster totals, G - 1 degrees of freedom
    ids = np.unique(clusters)
    g = len(ids)
    m = d.mean(0)
    resid = np.stack([(d[clusters == c] - m).sum(0) for c in ids])
    se = np.sqrt(g / (g - 1) * (resid**2).sum(0) / n_units**2)
    want = m + base - st.t.ppf(0.975, g - 1) * se
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # accuracies: never above the Wilson end at the number of clusters
    w = np.full(cells, -1.0)
    assert (labels._gate_low(summ, cs, np.ones((1, 1), dtype=bool), w) == -1.0).all()


def test_without_clusters_gate_low_is_the_item_t_interval():
    rng = np.random.default_rng(5)
    d = rng.normal(0.05, 0.2, (40, 1))
    summ = _Summ(score=d.mean(0), n=np.array([40]), sd_diff=d.std(0, ddof=1))
    got = labels._gate_low(summ, None, np.zeros(1, dtype=bool), np.full(1, np.nan))
    lo, _ = st.t.interval(0.95, 39, loc=d.mean(), scale=st.sem(d[:, 0]))
    np.testing.assert_allclose(got, [lo], rtol=1e-12)


def _gate_row(df, layer, head, direction):
    m = (df["layer"] == layer) & (df["head"] == head) & (df["direction"] == direction)
    return m & (df["source"] == "spacy-silver") & (df["subset"] == GATE_SUBSET)


def test_decisions_read_gate_low_where_the_table_has_it():
    """L1H1's verb row clears the strongest heuristic (0.86) on spaCy-silver by its bootstrap end (0.88);
    with a decision interval that reaches below 0.86 it no longer does: the real-text support and the
    head-vs-heuristic table follow ``gate_low``, and an old table (no column) keeps reading ci_low."""
    df = planted_heads()
    assert summaries.heuristic_table(df).set_index("reading").loc["retrospective", "beats"]
    label_rows = (df["layer"] == 1) & (df["head"] == 1) & (df["direction"] == SV_RETRO) & (df["family"] != "")
    assert heads.real_text_status(df)[label_rows].str.startswith("supported").all()
    wide = df.copy()
    wide.loc[_gate_row(df, 1, 1, SV_RETRO), "gate_low"] = 0.85  # the same ci_low, 0.88
    assert not summaries.heuristic_table(wide).set_index("reading").loc["retrospective", "beats"]
    assert (heads.real_text_status(wide)[label_rows] == "templates only").all()
    old = wide.drop(columns="gate_low")
    assert summaries.heuristic_table(old).set_index("reading").loc["retrospective", "beats"]
    # a missing value (a row with < 2 clusters) falls back to the bootstrap end, it never decides alone
    gap = wide.copy()
    gap.loc[_gate_row(df, 1, 1, SV_RETRO), "gate_low"] = np.nan
    assert heads.decision_low(gap)[_gate_row(df, 1, 1, SV_RETRO)].tolist() == [0.88]


def test_the_map_counts_primary_roles_that_change_under_the_null_normalisation():
    """L1H1 is labelled subject_verb in both readings (retrospective 0.95, predictive 0.70, baseline 0.3):
    from the baseline the verb's row is ahead ((0.95 - 0.3) / 0.7 = 0.93 vs 0.57). If the random-init
    model's same head already scored 0.9 on the verb's row, from the null it is behind (0.5 vs 0.625)."""
    df = planted_heads()
    same = labels.map_sensitivity(df)
    assert same.empty and same.attrs["n_multi"] == 1  # L1H1: the only head with two roles
    assert "0 of the 1 heads with two or more roles change" in hreport.sensitivity_text(df)
    moved = df.copy()
    retro = (moved["layer"] == 1) & (moved["head"] == 1) & (moved["direction"] == SV_RETRO)
    moved.loc[retro, "null_score"] = 0.9
    assert heads.role_map(moved).set_index(["layer", "head"]).loc[(1, 1), "primary"] == "subject_verb (retrospective)"
    null_map = heads.role_map(moved, "null").set_index(["layer", "head"])
    assert null_map.loc[(1, 1), "primary"] == "subject_verb (predictive)"
    got = labels.map_sensitivity(moved)
    assert got[["layer", "head", "primary", "primary_null"]].values.tolist() == [
        [1, 1, "subject_verb (retrospective)", "subject_verb (predictive)"]
    ]
    assert "L1H1 subject_verb (retrospective) -> subject_verb (predictive)" in hreport.sensitivity_text(moved)
    with pytest.raises(ValueError, match="unknown normalisation 'z'.*ceiling, null"):
        heads.role_map(df, "z")


def _rhyme_rows(label_low: float, control_high: float | None) -> pd.DataFrame:
    """A rhyme head's label-carrying row (sonnets, partner=earlier line) and, optionally, the same
    head on the matched control (sonnets-control, the same subset)."""
    base = dict(layer=0, head=0, role="rhyme", direction="line_end->rhyme", specials="exclude", weighting="attention")
    base.update(subset="partner=earlier line", n=60, baseline=0.2, label=True)
    label = dict(source="sonnets", family="rhyme", score=label_low + 0.1, ci_low=label_low, ci_high=1.0)
    rows = [dict(base, **label, gate_low=label_low)]
    if control_high is not None:
        rows.append(dict(base, source="sonnets-control", family="", score=control_high - 0.1, ci_high=control_high))
    return pd.DataFrame(rows)


def test_a_rhyme_label_must_clear_its_matched_control():
    """A head that attends to the line end d lines back scores alike on rhyming and non-rhyming pairs
    at that distance: its rhyme row does not clear the control and is gated out; one that clears it
    (the two intervals apart) keeps its gate; a run without controls is not gated by them."""
    assert labels.CONTROL_GATES == {"rhyme": "sonnets-control"}
    distance_head = _rhyme_rows(label_low=0.55, control_high=0.70)
    assert labels._gates(distance_head).tolist() == [False, True]  # the control row itself is not gated
    rhyme_head = _rhyme_rows(label_low=0.55, control_high=0.40)
    assert labels._gates(rhyme_head).tolist() == [True, True]
    assert labels._gates(_rhyme_rows(label_low=0.55, control_high=None)).tolist() == [True]
