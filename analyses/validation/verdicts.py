"""The verdicts of causal validation: each labelled head's effect against a null of random heads,
Benjamini-Hochberg within each role, and the decision rule.

Decision rule (per labelled head and role, one metric):

* **null**: effects of ablating heads drawn uniformly at random from all layers (the head itself
  excluded): ``null_mean``, ``null_std``, ``z = (effect - null_mean) / null_std`` and the empirical
  one-sided p-value ``p = (1 + #{null >= effect}) / (1 + n_null)``. The same numbers against random
  heads of the head's own layer are reported (``*_layer``) but do not enter the verdict (a layer has
  too few heads for a p-value below 0.05). Benjamini-Hochberg within each role, over the role's
  8 best labels by probe score (a family fixed before any ablation), gives ``q_value``, reported
  beside ``p_value``; the role's other labels have a p-value and a verdict and no q.
* **why the verdict uses p, and q is reported**: each label is its own a-priori hypothesis about one
  head, and the smallest attainable empirical p is ``1 / (n_null + 1)``. The CLI's null is every
  head of the model (72 for MiniLM, 270 for SmolLM2; the API default too), so p can reach 0.0037
  on SmolLM2, and with 8 heads in a family a head that beats every random head reaches
  q = 8 x 0.0037 = 0.03; the summary lists the labels validated at q <= 0.05.
* **measurable**: the 95% bootstrap interval of the effect over prompts excludes 0 *and* ``|effect|``
  is at least ``min_effect`` = ``rel`` x scale, scale = mean |clean score| (logit differences,
  probe log-odds; rel 0.05) or the mean clean loss (loss metrics; rel 0.005).
* ``validated``: measurable, positive, and ``p_value <= alpha`` (the head beats at least a fraction
  ``1 - alpha`` of random heads; with 20 null heads: all of them).
* ``no effect`` (an equivalence result): the whole interval lies inside ``(-min_effect,
  +min_effect)``: the ablation is measured well enough to say that any effect is below the smallest
  one that counts.
* ``inconclusive (under-powered)``: the interval does not clear zero (or the effect is below
  ``min_effect``) and reaches beyond ``+-min_effect``: absence of evidence, not evidence of absence
  (more prompts would narrow it). Tables written before labels v4 say ``pattern only`` for both of
  these; their readers show the old word as it is.
* ``inconclusive``: everything else: a measurable effect that random heads match, an ablation that
  *helps*, no behaviour metric for the role (its ``metric`` is None: ``none`` in the table), or an
  encoder probe that fails on clean held-out prompts (mean log-odds <= 0: it cannot show a loss of
  information).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from interp.stats import bh

__all__ = [
    "VERDICTS",
    "UNDER_POWERED",
    "OLD_VERDICTS",
    "COLUMNS",
    "NO_METRIC",
    "UNREADABLE_PROBE",
    "empirical_p",
    "p_floor",
    "p_floor_problem",
    "check_settings",
    "decide",
    "verdict_table",
]

VERDICTS = ("validated", "no effect", "inconclusive (under-powered)", "inconclusive")
UNDER_POWERED = "inconclusive (under-powered)"
OLD_VERDICTS = ("pattern only",)  # the word of tables written before labels v4 (no effect or under-powered)
COLUMNS = [
    "model",
    "layer",
    "head",
    "role",
    "metric",
    "ablation",
    "effect",
    "ci_low",
    "ci_high",
    "clean",
    "min_effect",
    "null_mean",
    "null_std",
    "n_null",
    "z",
    "p_value",
    "q_value",
    "null_mean_layer",
    "p_value_layer",
    "n_null_layer",
    "n_items",
    "label_score",
    "verdict",
    "reason",
]
# the reasons of the verdicts that no effect decides
NO_METRIC = "no behaviour metric for this role"
UNREADABLE_PROBE = "the probe fails on clean held-out prompts (mean log-odds <= 0)"


def empirical_p(effect: float, null: Sequence[float]) -> float:
    """One-sided: the chance that a random head's effect is at least this large, with the +1
    correction (the observed head counts as one draw), so p >= 1 / (n_null + 1)."""
    null = np.asarray(null, dtype=float)
    null = null[np.isfinite(null)]
    return float((1 + np.sum(null >= effect)) / (1 + null.size))


def p_floor(n_null: int) -> float:
    """The smallest p ``empirical_p`` can give against ``n_null`` random heads: 1 / (n_null + 1)."""
    return 1.0 / (n_null + 1)


def p_floor_problem(n_null: int | None, alpha: float) -> str:
    """'' when a head can reach p <= ``alpha`` against ``n_null`` random heads; else the sentence that
    says it cannot (no head could be validated, whatever its effect) and the smallest null that can.
    The verdict reads the raw p, not the q-value: BH (or Holm) only raises p, so a null too small for
    the raw p is too small for any correction."""
    if n_null is None or not n_null >= 1 or p_floor(n_null) <= alpha:
        return ""
    need = math.ceil(1 / alpha - 1 - 1e-9)
    return (
        f"the smallest p a head can reach against {n_null} random heads is 1/{n_null + 1} = "
        f"{p_floor(n_null):.3f}, above alpha {alpha:g}, so no head can be validated; use {need} or more "
        f"null heads (or a larger alpha)"
    )


def check_settings(alpha: float, **counts: int | None) -> None:
    """Refuse, in one line naming the setting, an ``alpha`` outside (0, 1) and a count (``n``,
    ``n_null``, ``max_heads_per_role``, ...) below 1 (None: the default, allowed): ``run`` and
    ``run_powered`` call it before any model work."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r}: give a significance level strictly between 0 and 1 (e.g. 0.05)")
    for name, v in counts.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
            raise ValueError(f"{name}={v!r}: give a whole number >= 1 (or None for the default)")


def decide(
    effect: float,
    ci_low: float,
    ci_high: float,
    min_effect: float,
    p_value: float,
    alpha: float = 0.05,
    n_null: int | None = None,
) -> tuple[str, str]:
    """(verdict, reason) by the rule in the module docstring; each reason states what the numbers
    show. ``n_null``: the heads in the null (for the reason of a measurable effect that is not
    validated: how many random heads did as much, or that none did and p cannot go lower)."""
    if not np.isfinite(effect):
        return "inconclusive", "no prompt measured this metric"
    up = ci_low > 0 and effect >= min_effect
    down = ci_high < 0 and -effect >= min_effect
    if up and p_value <= alpha:
        return "validated", "ablation hurts, more than random heads"
    if -min_effect < ci_low and ci_high < min_effect:
        return "no effect", "the whole interval lies inside +-min_effect (equivalence)"
    if not up and not down:
        if ci_low > 0:
            return (
                UNDER_POWERED,
                "the interval lies above zero, but the effect is below min_effect and the interval reaches beyond it",
            )
        if ci_high < 0:
            return (
                UNDER_POWERED,
                "the interval lies below zero (ablation helps), but the effect is smaller than min_effect "
                "and the interval reaches beyond -min_effect",
            )
        return UNDER_POWERED, "the interval does not clear zero and reaches beyond +-min_effect"
    if down:
        return "inconclusive", "ablation helps the behaviour"
    if n_null is None or not n_null >= 1 or not np.isfinite(p_value):
        return "inconclusive", f"measurable effect, but p = {p_value:.3g} against random heads is above alpha {alpha:g}"
    as_large = max(0, round(p_value * (n_null + 1)) - 1)  # p = (1 + #{null >= effect}) / (1 + n_null)
    if as_large == 0:
        return "inconclusive", (
            f"measurable effect, larger than all {n_null} random heads, but with {n_null} of them p cannot go "
            f"below 1/{n_null + 1} = {p_floor(n_null):.3f}, above alpha {alpha:g}: too few null heads"
        )
    return "inconclusive", (
        f"measurable effect, but {as_large} of {n_null} random heads do as much (p = {p_value:.3g} > alpha {alpha:g})"
    )


def null_effects(eff: dict, head: tuple[int, int], metric: str, pool: Sequence) -> np.ndarray:
    """The effects on ``metric`` of the heads of ``pool``, ``head`` itself left out."""
    return np.array([eff[(g, metric)][0] for g in pool if g != head])


def _tested_row(eff: dict, clean: np.ndarray, min_effect: float, h, m: str, null_pool, layer_pool) -> dict:
    """The statistics of one labelled head on its metric: the effect, its interval and both nulls."""
    e, lo, hi, n_items = eff[(h, m)]
    null = null_effects(eff, h, m, null_pool)
    lnull = null_effects(eff, h, m, layer_pool)
    sd = float(null.std(ddof=1)) if null.size > 1 else math.nan
    return {
        "effect": e,
        "ci_low": lo,
        "ci_high": hi,
        "clean": float(np.nanmean(clean)),
        "min_effect": min_effect,
        "null_mean": float(null.mean()) if null.size else math.nan,
        "null_std": sd,
        "n_null": int(null.size),
        "z": (e - null.mean()) / sd if null.size > 1 and sd > 0 else math.nan,
        "p_value": empirical_p(e, null),
        "null_mean_layer": float(lnull.mean()) if lnull.size else math.nan,
        "p_value_layer": empirical_p(e, lnull),
        "n_null_layer": int(lnull.size),
        "n_items": n_items,
    }


def _add_q_values(table: pd.DataFrame, q_family: int | None) -> None:
    """Benjamini-Hochberg within each role (the probe's families are per role too), over the role's
    ``q_family`` best-scoring labels by probe score: a family fixed before any ablation, small enough
    that a head beating every random head (p = 1/(n_null+1)) can reach q <= 0.05; the other
    labelled heads keep their p-value and verdict, with no q."""
    for _, idx in table.groupby("role").groups.items():
        sub = table.loc[idx]
        sub = sub[sub["p_value"].notna()].sort_values("label_score", ascending=False, na_position="last")
        family = sub.index[:q_family] if q_family is not None else sub.index
        if len(family):
            table.loc[family, "q_value"] = bh(table.loc[family, "p_value"].to_numpy())


def _verdict(row: pd.Series, metric: str | None, unreadable: set, alpha: float) -> tuple[str, str]:
    if metric is None:
        return "inconclusive", NO_METRIC
    if metric in unreadable:  # a probe that does not read the behaviour clean cannot show its loss
        return "inconclusive", UNREADABLE_PROBE
    return decide(
        row["effect"], row["ci_low"], row["ci_high"], row["min_effect"], row["p_value"], alpha, n_null=row["n_null"]
    )


def verdict_table(
    lab: pd.DataFrame,
    effects: dict,
    clean: dict[str, np.ndarray],
    min_effect: dict[str, float],
    pools: tuple[Sequence, dict],
    unreadable: set,
    base: dict,
    alpha: float = 0.05,
    q_family: int | None = 8,
) -> pd.DataFrame:
    """One row per labelled (head, role) of ``lab`` (columns layer, head, role, score, metric: a
    metric name or None), ``COLUMNS``: the head's effect on its metric (``effects``: {(head, metric):
    (effect, ci_low, ci_high, n_items)}) against ``pools`` = (the null's heads, {layer: that layer's
    null heads}), the q-value within its role and the verdict. ``base``: the model and ablation
    columns; ``unreadable``: the probe metrics that fail on clean held-out prompts."""
    null_pool, layer_pool = pools
    out, metrics = [], []
    for rec in lab.itertuples(index=False):
        h, m = (int(rec.layer), int(rec.head)), rec.metric
        m = m if isinstance(m, str) else None
        row = dict(
            model=base["model"],
            layer=h[0],
            head=h[1],
            role=rec.role,
            metric=m if m is not None else "none",
            ablation=base["ablation"],
            label_score=float(rec.score) if pd.notna(rec.score) else math.nan,
        )
        if m is not None:
            row.update(_tested_row(effects, clean[m], min_effect[m], h, m, null_pool, layer_pool[h[0]]))
        out.append(row)
        metrics.append(m)
    table = pd.DataFrame(out, columns=COLUMNS)
    _add_q_values(table, q_family)
    verdicts = [_verdict(r, m, unreadable, alpha) for (_, r), m in zip(table.iterrows(), metrics)]
    table["verdict"] = pd.Series([v for v, _ in verdicts], index=table.index, dtype=object)
    table["reason"] = pd.Series([why for _, why in verdicts], index=table.index, dtype=object)
    return table
