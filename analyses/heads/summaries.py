"""Summaries of a heads table: why the best head on real text is or is not labelled
(``real_text_heads``), the power figure (``detectable_effect``), each head's roles
(``head_summary``) and the best head of a role (``top_head``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyses.heads.design import SYNTHETIC_SOURCES
from analyses.heads.labels import REAL_TEXT_RELATIONS, labelled_roles

__all__ = ["real_text_heads", "detectable_effect", "head_summary", "top_head"]


def real_text_heads(df: pd.DataFrame) -> pd.DataFrame:
    """Per relation (``REAL_TEXT_RELATIONS``) and direction: the best head on real text (the highest
    score minus baseline among the label-carrying rows of real sources), whether it is labelled,
    and if not what keeps it out: "p" (Holm-adjusted p above alpha), "ci_low" (interval not above
    the baseline), "gates" (a heuristic subset or the minimal pairs)."""
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
                ("ci_low", not top["ci_low"] > top["baseline"]),
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
    """The power figure, per role, direction and source of the label-carrying rows: the smallest
    true effect over the baseline (margin included) that this run labels with probability ``power``
    after the multiple-comparison control, at the observed variance.

    A paired one-sided t-test with n sentences rejects at level a when mean(d) - margin exceeds
    t(1-a, n-1) * sd / sqrt(n), and does so with probability ``power`` when the true effect is at
    least margin + (t(1-a, n-1) + t(power, n-1)) * sd / sqrt(n). Holm's first step tests at
    a = alpha / m (m: the role's family size), the strictest level any label must pass, so the
    figure is conservative for all but the first label. sd is the median over heads."""
    from scipy import stats as st

    family = df["family"].fillna("")  # a heads.csv read back has NaN for the empty string
    lab = df[family != ""]
    rows = []
    for (role, direction, source), g in lab.groupby(["role", "direction", "source"], sort=False):
        m = int(df[family == role]["p_value"].notna().sum())
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


def head_summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per head: the roles it holds (with direction where there is one) or 'unclassified';
    the same roles as the map's (``labelled_roles``: boundary heads by weight only are noop_sink)."""
    rows = []
    labelled = labelled_roles(df) if "family" in df else df[df["label"]]
    for (layer, head), _ in df.groupby(["layer", "head"], sort=True):
        lab = labelled[(labelled["layer"] == layer) & (labelled["head"] == head)]
        roles = sorted({r if d == "all" else f"{r} ({d})" for r, d in zip(lab["role"], lab["direction"])})
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
