"""The label decision: the heads table from a run's summaries (one-sided p-values over clusters, Holm
within each role's family, intervals widened to Wilson's for accuracies, the null model), the gates a
relation label must also pass (``LABEL_GATES``, the reverse control), the real-text status of a
subject-verb or anaphora label (``real_text_status``: each real source's ``REAL_TEXT_GATE`` subset
against every heuristic; ``real_text_note``), and what the labels make of each head: ``headline``,
``labelled_roles`` (a boundary label by weight only is ``noop_sink``) and the role map."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyses.data.generated import MINIMAL_PAIR_SOURCE
from analyses.heads.adapter import Adapter
from analyses.heads.design import CONTROL_SUBSET, HEURISTIC_RELATIONS, REAL_TEXT_GATE, is_real_source
from analyses.heads.roles import (
    CEILINGS,
    COLUMNS,
    DESCRIPTIVE_ROLES,
    IDLE,
    MAP_PRIMARY,
    NOOP_IDLE,
    NORM_LABEL_ROLES,
    READINGS,
    RELATIONS,
    SINK_ROLES,
    SINK_WRITER,
    SPECIALS,
    decision_low,
    label_name,
    reading_of,
    with_reading,
)
from interp import stats

__all__ = [
    "has_norm_rows",
    "readings",
    "label_names",
    "headline",
    "labelled_roles",
    "role_map",
    "map_sensitivity",
    "MAP_NORMALISATIONS",
    "real_text_status",
    "real_text_note",
    "LABEL_GATES",
    "PAIR_SHARE_MIN",
    "CONTROL_GATES",
    "REAL_TEXT_GATE",
    "REAL_TEXT_RELATIONS",
]


def has_norm_rows(df: pd.DataFrame) -> bool:
    """Whether a heads table (or a slice of one) holds norm-weighted rows (``weighting`` = "norm":
    the probe ran with the norm lens), which the boundary labels and the sink layer read."""
    return "weighting" in df and bool((df["weighting"] == "norm").any())


def readings(df: pd.DataFrame) -> pd.Series:
    """Each row's reading (``roles.with_reading``): the ``reading`` column where it holds one of
    "retrospective", "predictive" or "-", else (an old heads.csv, a hand-made table, an empty cell)
    what ``reading_of`` derives from the role and direction: an old relation row is retrospective."""
    got = with_reading(df)["reading"] if len(df) else pd.Series([], dtype=object, index=df.index)
    derived = pd.Series([reading_of(r, d) for r, d in zip(df["role"], df["direction"])], index=df.index, dtype=object)
    return got.where(got.isin([*READINGS, "-"]), derived).astype(object)


def label_names(df: pd.DataFrame) -> pd.Series:
    """Each row's label name (``roles.label_name``): "subject_verb (predictive)", "delimiter"."""
    return pd.Series([label_name(r, x) for r, x in zip(df["role"], readings(df))], index=df.index, dtype=object)


def _gate_low(summ, clustered, acc: np.ndarray, wilson_low: np.ndarray) -> np.ndarray:
    """The decisions' lower interval end per (test, layer, head): score - t(0.975, G - 1) x the
    cluster-robust standard error of score - baseline over G clusters (the same standard error as the
    test's p), for accuracies at most the Wilson lower end; NaN below 2 clusters. Percentile bootstrap
    ends at the probe's 200 replicates move by a few thousandths from run to run, enough to flip a
    decision at the margin (labels v4); this interval is exact given the sums, and costs nothing."""
    from scipy.stats import t as student_t

    if clustered is not None:
        g, se = clustered.g, clustered.se()
    else:  # one cluster per item: the ordinary standard error
        g = summ.n
        with np.errstate(invalid="ignore", divide="ignore"):
            se = np.where(summ.n >= 2, summ.sd_diff / np.sqrt(summ.n), np.nan)
    with np.errstate(invalid="ignore"):
        crit = np.where(g >= 2, student_t.ppf(0.975, np.maximum(g - 1, 1)), np.nan)
        low = summ.score - crit * se
        return np.where(acc & np.isfinite(wilson_low), np.fmin(low, wilson_low), low)


def _table(adapter: Adapter, tests: list, summ, null, alpha: float) -> pd.DataFrame:
    L, H = adapter.n_layers, adapter.n_heads
    ci_low, ci_high = summ.ci(0.95)
    n_tests = len(tests)
    margin = np.array([t.margin for t in tests])[:, None, None] * np.ones((1, L, H))
    clustered = summ.extra.get("clustered")
    n_clusters = clustered.g if clustered is not None else summ.n
    # the test runs over clusters (one cluster per item where items have none: the item t-test)
    if clustered is not None:
        p = clustered.p_value(margin)
    else:
        p = stats.one_sided_p_from_sums(summ.n, summ.mean_diff, summ.sd_diff, margin)
    p = np.where(summ.n >= 2, p, np.nan)
    # accuracy intervals: the cluster bootstrap's, widened to the Wilson interval at the number of
    # clusters, so that a small all-correct sample does not get the interval [1, 1]
    acc = np.array([t.metric == "accuracy" for t in tests])[:, None, None]
    w_lo, w_hi = stats.wilson_interval(summ.score * n_clusters, n_clusters)
    with np.errstate(invalid="ignore"):
        ci_low = np.where(acc & np.isfinite(w_lo), np.fmin(ci_low, w_lo), ci_low)
        ci_high = np.where(acc & np.isfinite(w_hi), np.fmax(ci_high, w_hi), ci_high)
    gate_low = _gate_low(summ, clustered, acc, w_lo)
    # one family per role (each role is its own claim), over its label-carrying tests only
    p_adj = np.full_like(p, np.nan)
    for role in {t.family for t in tests} - {""}:
        ks = [k for k, t in enumerate(tests) if t.family == role]
        if ks:
            p_adj[ks] = stats.holm(p[ks])
    null_score = null.score if null is not None else np.full((n_tests, L, H), np.nan)
    layer, head = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
    frames = []
    for k, t in enumerate(tests):
        frames.append(
            pd.DataFrame(
                {
                    "model": adapter.name,
                    "layer": layer.ravel(),
                    "head": head.ravel(),
                    "role": t.role,
                    "direction": t.direction,
                    "metric": t.metric,
                    "score": summ.score[k].ravel(),
                    "baseline": summ.baseline[k].ravel(),
                    "baseline_kind": t.baseline_kind,
                    "ci_low": ci_low[k].ravel(),
                    "ci_high": ci_high[k].ravel(),
                    "n": summ.n[k].ravel().astype(int),
                    "p_value": p[k].ravel(),
                    "p_adjusted": p_adj[k].ravel(),
                    "null_score": null_score[k].ravel(),
                    "mass": summ.extra["mass"][k].ravel(),
                    "offset_baseline": t.offset_baseline,
                    "candidate_baseline": t.candidate_baseline,
                    "margin": t.margin,
                    "specials": t.specials,
                    "source": t.source,
                    "subset": t.subset,
                    "family": t.family,
                    "weighting": t.weighting,
                    "sd_diff": summ.sd_diff[k].ravel(),
                    "special_mass": summ.extra["special_mass"][k].ravel(),
                    "heuristic": t.heuristic,
                    "heuristic_baseline": t.heuristic_baseline,
                    "n_clusters": n_clusters[k].ravel().astype(int),
                    "reading": t.reading,
                    "gate_low": gate_low[k].ravel(),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    low = decision_low(df)
    clears_null = (low > df["null_score"]) | df["null_score"].isna() | df["role"].isin(DESCRIPTIVE_ROLES)
    df["label"] = (df["p_adjusted"] <= alpha) & (low > df["baseline"]) & clears_null
    df["label"] = df["label"].fillna(False).astype(bool) & (df["family"] != "")
    df["gates"] = _gates(df)
    df["label"] &= df["gates"]
    df["real_text"] = real_text_status(df)
    df.attrs["real_text_gate"] = real_text_note(df)
    return with_reading(df)[COLUMNS]


# the strata (source, subset) on which a relation label must also clear the best heuristic (the
# row's baseline there: best offset, first word, nearest / first / k-th noun): the items where the
# heuristics disagree with the gold (required: no such items, no label), and the minimal pairs
# (where the run has them: ``--sources pairs``), whose score must also reach PAIR_SHARE_MIN.
# A head that follows a heuristic scores at most that heuristic there.
LABEL_GATES = {
    "subject_verb": (("all", "attractor"), ("all", "distance 3+"), (MINIMAL_PAIR_SOURCE, "all")),
    "anaphora": ((MINIMAL_PAIR_SOURCE, "all"),),
}
PAIR_SHARE_MIN = 0.5  # a gated head moves its argmax with the cue in at least half of the pairs
# matched controls (labels v4): a relation whose label rows must clear, on the same subset, direction and
# conventions, the same head's score on its control source (rhyme: non-rhyming line ends of the same
# sonnets at the same line distance, placed as the rhyme pair is): gate_low above the control's
# ci_high, the two intervals apart. A head that attends to "the line end d lines back" scores the same
# on both and fails. Not a paired difference (the control is its own item), so stricter than one.
CONTROL_GATES = {"rhyme": "sonnets-control"}
# the relations whose labels say whether real text supports them (``real_text_status``): each real
# source's REAL_TEXT_GATE subset (analyses.heads.design) against the best of every heuristic
REAL_TEXT_RELATIONS = tuple(REAL_TEXT_GATE)


def _gates(df: pd.DataFrame) -> pd.Series:
    """Per row: False for a label-carrying row of a gated relation whose head does not clear, on
    each of ``LABEL_GATES``' strata (same direction, specials convention and weighting), gate_low >
    that stratum's baseline (and, on the minimal pairs, score >= PAIR_SHARE_MIN), or where the
    run has no items in a required stratum, or (``CONTROL_GATES``: rhyme) where gate_low is not above
    the matched control's ci_high on the same subset; else True. Directions the stratum has no rows for
    (a reverse direction, on the minimal pairs) are not gated by it."""
    ok = pd.Series(True, index=df.index)
    keys = ["layer", "head", "direction", "specials", "weighting"]
    for relation, strata in LABEL_GATES.items():
        rows = (df["role"] == relation) & (df["family"] != "")
        if not rows.any():
            continue
        for source, sub in strata:
            g = df[(df["role"] == relation) & (df["source"] == source) & (df["subset"] == sub)]
            pairs = source == MINIMAL_PAIR_SOURCE
            if pairs and g.empty:
                continue  # not measured in this run
            passed = (decision_low(g) > g["baseline"]) & (g["n"] > 0)
            if pairs:
                passed &= g["score"] >= PAIR_SHARE_MIN
            passed = g.assign(passed=passed).set_index(keys)["passed"]
            key = pd.MultiIndex.from_frame(df.loc[rows, keys])
            got = passed.reindex(key)
            if pairs:  # only the directions measured on the pairs
                got = got.where(~got.isna() | key.get_level_values("direction").isin(g["direction"]), True)
            ok.loc[rows] &= got.fillna(False).astype(bool).to_numpy()
    for relation, control in CONTROL_GATES.items():  # the matched control: a rhyme, not a distance
        rows = (df["role"] == relation) & (df["family"] != "")
        ctrl = df[(df["role"] == relation) & (df["source"] == control) & (df["n"] > 0)]
        if not rows.any() or ctrl.empty:
            continue  # no control in this run: not gated by it
        ctrl_high = ctrl.set_index(["subset", *keys])["ci_high"]
        key = pd.MultiIndex.from_frame(df.loc[rows, ["subset", *keys]])
        against = ctrl_high.reindex(key).to_numpy()  # NaN: no control on that subset
        ok.loc[rows] &= ~(decision_low(df.loc[rows]).to_numpy() <= against)
    for relation in HEURISTIC_RELATIONS:  # the reverse control: other nouns attend to the query less
        reverse = RELATIONS[relation][1]
        rows = (df["role"] == relation) & (df["family"] != "") & (df["direction"] == reverse)
        ctrl = df[(df["role"] == relation) & (df["subset"] == CONTROL_SUBSET) & (df["direction"] == reverse)]
        if not rows.any() or ctrl.empty:
            continue
        ctrl_score = ctrl.set_index(["source", *keys])["score"]
        key = pd.MultiIndex.from_frame(df.loc[rows, ["source", *keys]])
        against = ctrl_score.reindex(key).to_numpy()  # NaN: no other noun in that source's items
        ok.loc[rows] &= ~(decision_low(df.loc[rows]).to_numpy() <= against)
    return ok


def real_text_status(df: pd.DataFrame) -> pd.Series:
    """Per row, the ``real_text`` column: for a label-carrying row of a ``REAL_TEXT_RELATIONS``
    relation, "supported (<sources>)" where the same head, direction, specials convention and
    weighting clears the best heuristic (gate_low > baseline, n > 0) on a real source's gate subset
    (``REAL_TEXT_GATE``), the sources that it clears listed; "templates only" where the run has real
    text of the relation but no source supports the row (a label stays a label, on its own gates,
    but is not a real-text label); "-" where the run has no real text of the relation and on every
    other row."""
    out = pd.Series("-", index=df.index, dtype=object)
    keys = ["layer", "head", "direction", "specials", "weighting"]
    for relation in REAL_TEXT_RELATIONS:
        rows = (df["role"] == relation) & (df["family"] != "")
        has_real = (df["role"] == relation) & df["source"].map(is_real_source)
        if not rows.any() or not has_real.any():
            continue
        g = df[has_real & (df["subset"] == REAL_TEXT_GATE[relation])]
        g = g[(decision_low(g) > g["baseline"]) & (g["n"] > 0)]
        support = g.groupby(keys)["source"].agg(lambda s: ", ".join(sorted(set(s))))
        got = support.reindex(pd.MultiIndex.from_frame(df.loc[rows, keys])).to_numpy()
        out.loc[rows] = [f"supported ({s})" if isinstance(s, str) else "templates only" for s in got]
    return out


def real_text_note(df: pd.DataFrame) -> dict[str, dict]:
    """What the real-text gate rests on, per ``REAL_TEXT_RELATIONS`` relation the run has real text
    of: ``items`` (real source -> its items in the gate subset, 0 where it has none: the n of its
    gate row) and ``note`` ("" or a sentence the readers print: the relation's labels rest on
    generated items where no real source has a gate item)."""
    out = {}
    for relation in REAL_TEXT_RELATIONS:
        real = df[(df["role"] == relation) & df["source"].map(is_real_source)]
        if real.empty:
            continue
        gate = real[real["subset"] == REAL_TEXT_GATE[relation]]
        items = {
            s: int(gate.loc[gate["source"] == s, "n"].max()) if (gate["source"] == s).any() else 0
            for s in sorted(set(real["source"]))
        }
        note = ""
        if not any(items.values()):
            note = (
                f"{relation} labels rest on generated items: no real source has items in the real-text gate "
                f"subset '{REAL_TEXT_GATE[relation]}' ({', '.join(f'{s}: 0' for s in items)})"
            )
        out[relation] = {"subset": REAL_TEXT_GATE[relation], "items": items, "note": note}
    return out


def headline(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (layer, head, role, direction): the pooled row under the label-carrying
    convention (all sources, all items, specials excluded), with ``label`` true where any of the
    head's label-carrying rows for that role and direction is labelled, its ``reading`` and its
    label ``name`` (``label_name``: the reading named). What maps and heatmaps show."""
    pooled = (df["source"] == "all") & (df["subset"] == "all") & df["specials"].isin(["-", SPECIALS[0]])
    if "weighting" in df:
        pooled &= df["weighting"] == "attention"
    head = df[pooled].copy()
    lab = df[df["label"]]
    if "weighting" in df:
        lab = lab[lab["weighting"] == "attention"]
    labelled = lab.groupby(["layer", "head", "role", "direction"]).size()
    key = pd.MultiIndex.from_frame(head[["layer", "head", "role", "direction"]])
    head["label"] = key.isin(labelled.index)
    head["reading"] = readings(head)
    head["name"] = label_names(head)
    return head.reset_index(drop=True)


def labelled_roles(df: pd.DataFrame) -> pd.DataFrame:
    """The labelled rows that make a head's roles: attention-weighted rows with ``label``, and,
    where the table has norm-weighted rows, each boundary role (``NORM_LABEL_ROLES``:
    attention_sink, delimiter, punctuation, sep_eos) split into itself (the norm row is labelled too:
    the head moves information from where it attends) and ``noop_sink`` (it is not). Adds
    ``reading`` (``readings``), ``name`` (the label's name: ``label_name(role, reading)``, e.g.
    "subject_verb (predictive)", or ``noop_sink``), ``effect`` = score - baseline, ``standardised`` =
    effect / margin and ``relative``, the ceiling-normalised effect (score - baseline) / (ceiling -
    baseline) (``CEILINGS``; 1 for most roles): the share of the way from the baseline to the best
    score the metric allows. A hand-made table without ``margin`` gets the default 0.05 there."""
    lab = df[df["label"].astype(bool)].copy()
    if has_norm_rows(df):
        normed = lab[lab["weighting"] == "norm"]
        confirmed = set(zip(normed["layer"], normed["head"], normed["role"]))
        lab = lab[lab["weighting"] == "attention"].copy()
        weight_only = [
            r in NORM_LABEL_ROLES and (l, h, r) not in confirmed
            for l, h, r in zip(lab["layer"], lab["head"], lab["role"])
        ]
    else:
        weight_only = [False] * len(lab)
    lab["effect"] = lab["score"] - lab["baseline"]
    margin = lab["margin"] if "margin" in lab else pd.Series(np.nan, index=lab.index)
    lab["standardised"] = lab["effect"] / margin.where(margin > 0, 0.05)
    ceiling = lab["role"].map(lambda r: CEILINGS.get(r, 1.0)).astype(float)
    room = ceiling - lab["baseline"]
    lab["relative"] = lab["effect"] / room.where(room > 0)
    # the map's second normalisation (labels v4): the same share measured from the random-init model's
    # score of that head instead of the baseline; roles without a null (broad, a table without the
    # column) keep the first
    null = pd.to_numeric(lab["null_score"], errors="coerce") if "null_score" in lab else np.nan  # "": none
    room_null = ceiling - null
    lab["relative_null"] = ((lab["score"] - null) / room_null.where(room_null > 0)).fillna(lab["relative"])
    lab["relative_null"] = lab["relative_null"].astype(float)
    lab.loc[weight_only, "role"] = "noop_sink"
    lab["reading"] = readings(lab)
    lab["name"] = label_names(lab)
    return lab


def _sink_layer(df: pd.DataFrame) -> pd.DataFrame:
    """Per head: the attention_sink score by weight (``sink_weight``) and by norm (``sink_norm``,
    NaN without norm rows), and the learned sink's share (``sink_learned``, gpt-oss; NaN for a model
    without learned sinks), from the pooled rows."""
    g = df[(df["role"] == "attention_sink") & (df["source"] == "all") & (df["subset"] == "all")]
    w = g[g["weighting"] == "attention"] if "weighting" in g else g
    out = w.groupby(["layer", "head"])["score"].max().rename("sink_weight").to_frame()
    if has_norm_rows(g):
        out["sink_norm"] = g[g["weighting"] == "norm"].groupby(["layer", "head"])["score"].max()
    else:
        out["sink_norm"] = np.nan
    learned = df[(df["role"] == "learned_sink") & (df["source"] == "all") & (df["subset"] == "all")]
    out["sink_learned"] = learned.groupby(["layer", "head"])["score"].max() if len(learned) else np.nan
    return out


def _idle_kind(sinks: set, norm_lens: bool) -> str:
    """What a head whose only labels are sink roles is on the map: a ``SINK_WRITER`` where its
    attention_sink label is norm-confirmed (it writes from the sink), a ``NOOP_IDLE`` where every
    sink label is by weight only (noop_sink), ``IDLE`` where the table has no norm rows to tell."""
    if not norm_lens:
        return IDLE
    return SINK_WRITER if "attention_sink" in sinks else NOOP_IDLE


MAP_NORMALISATIONS = {"ceiling": "relative", "null": "relative_null"}


def role_map(df: pd.DataFrame, normalisation: str = "ceiling") -> pd.DataFrame:
    """One row per head: its primary role (what it does when it is not idling), the effect behind
    it, its other (secondary) roles, and the sink layer of the map beside them.

    A head's labelled roles outside the sink (``SINK_ROLES``: attention_sink, noop_sink) are ranked
    by the ceiling-normalised effect ``relative`` = (score - baseline) / (ceiling - baseline)
    (``labelled_roles``), which puts accuracy roles, mass roles, the induction score (which cannot
    exceed 0.5) and ``broad``'s entropy on one scale; the first is the primary role. Roles are named
    by their label names (``label_name``: "subject_verb (predictive)" and "subject_verb
    (retrospective)" are two roles). A head whose only labels are sink roles is a "sink writer"
    (its attention_sink label is norm-confirmed), a "no-op sink" (by weight only) or, without norm
    rows, "idle (sink)"; one with none "unclassified". The sink is its own layer: ``sink`` (the
    head's sink label, "attention_sink" when the norm lens confirms it, "noop_sink" for a boundary
    label by weight only, "" for none), ``sink_weight`` and ``sink_norm`` (its attention_sink score
    by weight and by norm). ``standardised`` (effect / margin) is kept. ``normalisation`` "null"
    ranks a head's roles by ``relative_null`` instead, (score - null_score) / (ceiling - null_score):
    the share of the way from the random-init model's score of the head to the ceiling
    (``map_sensitivity`` counts the heads whose primary role changes)."""
    if normalisation not in MAP_NORMALISATIONS:
        raise ValueError(f"unknown normalisation {normalisation!r}: one of {', '.join(MAP_NORMALISATIONS)}")
    key = MAP_NORMALISATIONS[normalisation]
    h = headline(df)
    lab = labelled_roles(df)
    lab["relative"] = lab[key]
    best = lab.sort_values("relative", ascending=False).drop_duplicates(["layer", "head", "name"])
    sinks = _sink_layer(df)
    norm_lens = has_norm_rows(df)
    rows = []
    for (layer, head_), _ in h.groupby(["layer", "head"], sort=True):
        g = best[(best["layer"] == layer) & (best["head"] == head_)]
        active = g[~g["role"].isin(SINK_ROLES)]
        idle = g[g["role"].isin(SINK_ROLES)]
        row = dict(layer=int(layer), head=int(head_), primary="unclassified", effect=np.nan, standardised=np.nan)
        row.update(relative=np.nan, secondary="", sink=", ".join(sorted(set(idle["role"]))))
        if not active.empty:
            top = active.iloc[0]
            row.update(primary=str(top["name"]), effect=float(top["effect"]), standardised=float(top["standardised"]))
            row.update(relative=float(top["relative"]), secondary=", ".join(active["name"].iloc[1:]))
        elif not idle.empty:
            row["primary"] = _idle_kind(set(idle["role"]), norm_lens)
        key = (layer, head_)
        row["sink_weight"] = float(sinks.loc[key, "sink_weight"]) if key in sinks.index else np.nan
        row["sink_norm"] = float(sinks.loc[key, "sink_norm"]) if key in sinks.index else np.nan
        row["sink_learned"] = float(sinks.loc[key, "sink_learned"]) if key in sinks.index else np.nan
        rows.append(row)
    out = pd.DataFrame(rows)
    out["primary"] = pd.Categorical(out["primary"], list(MAP_PRIMARY))
    return out


def map_sensitivity(df: pd.DataFrame) -> pd.DataFrame:
    """The heads whose primary role differs between the map's two normalisations (``role_map`` with
    "ceiling" and with "null"): layer, head, ``primary`` (the map's) and ``primary_null``. Only a head
    with two or more labelled roles outside the sink can change; ``attrs["n_multi"]`` counts them."""
    a, b = role_map(df), role_map(df, "null")
    both = a[["layer", "head", "primary", "secondary"]].assign(primary_null=b["primary"].astype(str).to_numpy())
    both["primary"] = both["primary"].astype(str)
    out = both[both["primary"] != both["primary_null"]][["layer", "head", "primary", "primary_null"]]
    out = out.reset_index(drop=True)
    out.attrs["n_multi"] = int((both["secondary"] != "").sum())
    return out
