"""Summaries of a heads table: why the best head on real text is or is not labelled
(``real_text_heads``), each real source's best head against the strongest heuristic on the
real-text gate's items (``heuristic_table``), a label's real-text support (``real_text``), the
power figure (``detectable_effect``) and what a role without a label bounds (``no_label_bound``),
each head's roles (``head_summary``) and the best head of a role (``top_head``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyses.heads.design import SYNTHETIC_SOURCES
from analyses.heads.labels import (
    REAL_TEXT_GATE,  # the real-text gate's subset per relation
    REAL_TEXT_RELATIONS,
    labelled_roles,
    readings,
)
from analyses.heads.roles import READING_ROLES, decision_low, reading_of

__all__ = [
    "real_text_heads",
    "real_text",
    "heuristic_table",
    "detectable_effect",
    "no_label_bound",
    "head_summary",
    "top_head",
]


def real_text(df: pd.DataFrame) -> pd.Series:
    """Each row's real-text support (the ``real_text`` column: "supported (<sources>)", "templates
    only", "-"); "-" where the table has no such column (written before labels v4) or the cell is empty."""
    if "real_text" not in df:
        return pd.Series("-", index=df.index, dtype=object)
    v = df["real_text"].astype(object)
    empty = v.isna() | (v.astype(str).str.strip() == "")
    return v.where(~empty, "-").astype(str)


def _strongest(row) -> tuple[str, float]:
    """(name, accuracy) of the strongest heuristic on a row's items: the best noun heuristic
    (``heuristic``, ``heuristic_baseline``) or the row's baseline (``baseline_kind``), whichever is higher."""
    got = [(str(row["baseline_kind"]), float(row["baseline"]))]
    name, acc = str(row.get("heuristic", "-")), row.get("heuristic_baseline", np.nan)
    if name not in ("-", "", "nan") and pd.notna(acc):
        got.append((name, float(acc)))
    return max(got, key=lambda x: np.nan_to_num(x[1], nan=-np.inf))


def heuristic_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per relation of ``REAL_TEXT_GATE``, direction (its reading) and real source, on the gate's subset
    of that source (e.g. subject-verb items with an attractor at distance 3+): the best head (highest
    score; attention weights, specials excluded), its score and interval, the strongest heuristic on
    the same items and its accuracy, n, and whether the head's interval clears that heuristic
    (``beats``). Empty where the table has no real-text rows on the gate's subsets."""
    att = df[df["weighting"] == "attention"] if "weighting" in df else df
    att = att[att["specials"].isin(["-", "exclude"])] if "specials" in att else att
    rows = []
    for relation, subset in REAL_TEXT_GATE.items():
        g = att[(att["role"] == relation) & (att["subset"] == subset) & (att["source"] != "all")]
        g = g[~g["source"].isin(SYNTHETIC_SOURCES) & g["score"].notna() & (g["n"] > 0)]
        g = g.assign(reading=readings(g), low=decision_low(g))
        for (direction, reading, source), x in g.groupby(["direction", "reading", "source"], sort=True):
            top = x.loc[x["score"].idxmax()]
            name, acc = _strongest(top)
            rows.append(
                dict(
                    relation=relation,
                    reading=reading,
                    direction=direction,
                    source=source,
                    subset=subset,
                    layer=int(top["layer"]),
                    head=int(top["head"]),
                    score=float(top["score"]),
                    ci_low=float(top["ci_low"]),
                    ci_high=float(top["ci_high"]),
                    heuristic=name,
                    heuristic_accuracy=acc,
                    n=int(top["n"]),
                    beats=bool(top["low"] > acc),
                )
            )
    return pd.DataFrame(rows)


def real_text_heads(df: pd.DataFrame) -> pd.DataFrame:
    """Per relation (``REAL_TEXT_RELATIONS``) and direction: the best head on real text (the highest
    score minus baseline among the label-carrying rows of real sources), whether it is labelled,
    and if not what keeps it out: "p" (Holm-adjusted p above alpha), "interval" (the decision
    interval's lower end, ``gate_low``, not above the baseline), "gates" (a heuristic subset or the minimal pairs)."""
    alpha = float(df.attrs.get("alpha", 0.05))
    lab = df[(df["family"].fillna("") != "") & df["role"].isin(REAL_TEXT_RELATIONS)]
    lab = lab[~lab["source"].isin(SYNTHETIC_SOURCES)]
    rows = []
    for (role, direction), g in lab.groupby(["role", "direction"], sort=True):
        top = g.loc[(g["score"] - g["baseline"]).idxmax()]
        why = [
            name
            for name, bad in (
                ("p", not top["p_adjusted"] <= alpha),
                ("interval", not decision_low(g).loc[top.name] > top["baseline"]),
                ("gates", not bool(top["gates"])),
            )
            if bad
        ]
        rows.append(
            dict(
                role=role,
                direction=direction,
                layer=int(top["layer"]),
                head=int(top["head"]),
                source=top["source"],
                score=float(top["score"]),
                baseline=float(top["baseline"]),
                baseline_kind=top["baseline_kind"],
                ci_low=float(top["ci_low"]),
                p_adjusted=float(top["p_adjusted"]),
                label=bool(top["label"]),
                kept_out_by=", ".join(why) if not top["label"] else "",
            )
        )
    return pd.DataFrame(rows)


def detectable_effect(df: pd.DataFrame, alpha: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """The power figure, per role, direction (its ``reading``) and source of the label-carrying rows:
    the smallest true effect over the baseline (margin included) that this run labels with
    probability ``power`` after the multiple-comparison control, at the observed variance.

    A paired one-sided t-test with n sentences rejects at level a when mean(d) - margin exceeds
    t(1-a, n-1) * sd / sqrt(n), and does so with probability ``power`` when the true effect is at
    least margin + (t(power, n-1) + t(1-a, n-1)) * sd / sqrt(n). Holm's first step tests at
    a = alpha / m (m: the family size of the rows: "subject_verb", "subject_verb@predictive"), the
    strictest level any label must pass, so the figure is conservative for all but the first label.
    sd is the median over heads."""
    from scipy import stats as st

    family = df["family"].fillna("")  # a heads.csv read back has NaN for the empty string
    lab = df[family != ""]
    rows = []
    for (fam, role, direction, source), g in lab.groupby(["family", "role", "direction", "source"], sort=False):
        m = int(df[family == fam]["p_value"].notna().sum())
        n = int(g["n"].median())
        sd = float(g["sd_diff"].median())
        margin = float(g["margin"].iloc[0])
        if n < 2 or m < 1 or not np.isfinite(sd):
            continue
        a = alpha / m
        delta = margin + (st.t.ppf(1 - a, n - 1) + st.t.ppf(power, n - 1)) * sd / np.sqrt(n)
        rows.append(
            dict(
                role=role,
                direction=direction,
                reading=str(readings(g).iloc[0]) if len(g) else reading_of(role, direction),
                source=source,
                subset=str(g["subset"].iloc[0]),
                n=n,
                sd_diff=sd,
                family_size=m,
                margin=margin,
                detectable_effect=float(delta),
            )
        )
    return pd.DataFrame(rows)


def no_label_bound(df: pd.DataFrame, role: str, reading: str, alpha: float = 0.05) -> str:
    """What a role (in one reading) without a label says, as a bounded negative from the power
    figure: "no head above baseline + 0.130 on generated (verb->subject, n=400) at 80% power". A
    head whose true effect exceeded that would have been labelled with probability 0.8 or more."""
    d = detectable_effect(df, alpha=alpha) if "family" in df else pd.DataFrame()
    if len(d):  # a role read one way only (rhyme, line_structure: not READING_ROLES) matches any reading
        d = d[(d["role"] == role) & ((d["reading"] == reading) | (role not in READING_ROLES))]
    if d.empty:
        return "no labelled head, and no label-carrying rows with items to bound the effect (no items of it in the run)"
    parts = [f"+ {r.detectable_effect:.3f} on {r.source} ({r.direction}, n={r.n})" for r in d.itertuples()]
    return "no head above baseline " + ", ".join(parts) + " at 80% power"


def head_summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per head: the roles it holds, by their label names (with the direction where there is
    one: "subject_verb (predictive) [pre-verb->subject]") or 'unclassified'; the same roles as the
    map's (``labelled_roles``: boundary heads by weight only are noop_sink)."""
    rows = []
    labelled = labelled_roles(df)
    for (layer, head), _ in df.groupby(["layer", "head"], sort=True):
        lab = labelled[(labelled["layer"] == layer) & (labelled["head"] == head)]
        roles = sorted({r if d == "all" else f"{r} [{d}]" for r, d in zip(lab["name"], lab["direction"])})
        rows.append(
            {
                "layer": layer,
                "head": head,
                "roles": ", ".join(roles) if roles else "unclassified",
                "n_roles": len(roles),
            }
        )
    return pd.DataFrame(rows)


def top_head(df: pd.DataFrame, role: str) -> tuple[int, int, bool, str]:
    """(layer, head, labelled, direction) of the best head for a role: the labelled one with the
    highest score, else the highest-scoring one."""
    g = df[df["role"] == role].dropna(subset=["score"])
    if g.empty:
        raise ValueError(f"no rows for role {role!r}")
    lab = g[g["label"]]
    pick = (lab if not lab.empty else g).sort_values("score", ascending=False).iloc[0]
    return int(pick["layer"]), int(pick["head"]), not lab.empty, str(pick["direction"])
