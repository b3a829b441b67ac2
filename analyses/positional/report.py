"""Tables and figures of the positional study, from the runs' results (``analyses.positional.runs``):
one markdown table and one figure per claim, the claims table (each row's verdict computed by the
rule written in the function that makes it, from a measurement of that claim), a CSV of every run;
the natural-text part is ``text_report``'s. Everything is written atomically into one folder
(``docs/positional_study``), so ``docs/positional.md`` can include the numbers mechanically.

Spreads over seeds are written "mean [min, max]" (n seeds): with three seeds the range says more
than a standard deviation would; the induction runs' abruptness and long-range tables (five seeds)
give "mean [95% t-interval] (n)" instead (``interval``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.positional.common import nan_if_none, pyplot, save_figure, scalars, spread
from analyses.positional.study import SCHEMES
from analyses.positional.text_report import anchor_table, text_claim, text_report
from interp.display import md_table
from interp.io import atomic_save, atomic_write

CLAIMS_COLUMNS = ["claim", "what the seeds say", "what we measured", "agrees?"]


# --------------------------------------------------------------------------------------------------
# One table per claim


def order_table(results: list[dict]) -> pd.DataFrame:
    rows = []
    for s in SCHEMES:
        row = {"scheme": s}
        for att in ("bidirectional", "causal"):
            rs = [r for r in results if r["kind"] == "order" and r["scheme"] == s and r["attention"] == att]
            row[f"{att} accuracy"] = spread([nan_if_none(r["accuracy"]) for r in rs], 3)
            row[f"{att} twins answered differently"] = spread([nan_if_none(r["twins_differ"]) for r in rs], 3)
            row[f"{att} seeds"] = len(rs)
        rows.append(row)
    return pd.DataFrame(rows)


def extrapolation_table(results: list[dict]) -> pd.DataFrame:
    rows = []
    for s in SCHEMES:
        rs = [r for r in results if r["kind"] == "copy_back" and r["scheme"] == s]
        if not rs:
            continue
        cols = sorted((k for k in rs[0] if k.startswith("acc_") and k.endswith("x")), key=lambda k: int(k[4:-1]))
        row = {"scheme": s, "seeds": len(rs), "train length": spread([nan_if_none(r["acc_train_len"]) for r in rs], 3)}
        for c in cols:
            row[c[4:].replace("x", "x L")] = spread([nan_if_none(r.get(c)) for r in rs], 3)
        rows.append(row)
    return pd.DataFrame(rows)


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, low, high, n) over the finite values: a ``level`` t-interval for the mean
    (``scipy.stats.t``); the interval is NaN with fewer than 2 values, everything NaN with none."""
    from scipy import stats

    v = np.array([x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))], dtype=float)
    if v.size == 0:
        return float("nan"), float("nan"), float("nan"), 0
    if v.size == 1:
        return float(v[0]), float("nan"), float("nan"), 1
    sem = float(stats.sem(v))
    if sem == 0:
        return float(v.mean()), float(v.mean()), float(v.mean()), int(v.size)
    lo, hi = stats.t.interval(level, v.size - 1, loc=v.mean(), scale=sem)
    return float(v.mean()), float(lo), float(hi), int(v.size)


def interval(values: Sequence[float], digits: int = 2) -> str:
    """ "mean [low, high] (n)": the 95% t-interval over the finite values; "n/a" when none."""
    m, lo, hi, n = t_interval(values)
    if n == 0:
        return "n/a"
    if n == 1:
        return f"{m:.{digits}f} (1)"
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}] ({n})"


def _ind_runs(results: list[dict], scheme: str) -> list[dict]:
    return [r for r in results if r["kind"] == "induction" and r["scheme"] == scheme]


def _formed(rs: list[dict], key: str) -> str:
    return f"{sum(r.get(key) is not None and not math.isnan(nan_if_none(r.get(key))) for r in rs)}/{len(rs)}"


def _routes(rs: list[dict]) -> str:
    """The route labels of the runs with their counts, most common first; head indices (which head
    of a layer takes the role differs by seed) and a positional head's attention are left out."""
    import re

    labels = [re.sub(r": \d\.\d+\)", ")", re.sub(r"L(\d+)H\d+", r"L\1", r.get("route", "n/a"))) for r in rs]
    counts = pd.Series(labels).value_counts()
    return "; ".join(f"{label} ({n}/{len(rs)})" for label, n in counts.items())


def induction_table(results: list[dict]) -> pd.DataFrame:
    """Per scheme: formation (criterion: the best head's induction score on the task's own
    sequences > 0.3; secondary: the repeated-random-token probe, a shifted induction head), final
    scores and losses (mean [min, max] over seeds), and the routes the runs copy by."""
    rows = []
    for s in SCHEMES:
        rs = _ind_runs(results, s)
        if not rs:
            continue
        rows.append(
            {
                "scheme": s,
                "seeds with a head formed (own sequences)": _formed(rs, "step_score_formed"),
                "step: own induction score > 0.3": spread([nan_if_none(r["step_score_formed"]) for r in rs], 0),
                "seeds formed (probe)": _formed(rs, "step_probe_formed"),
                "seeds formed (shifted head)": _formed(rs, "step_shift_formed"),
                "step: second-copy loss < ln(V)/2": spread([nan_if_none(r["step_loss_formed"]) for r in rs], 0),
                "final own induction score": spread([nan_if_none(r.get("task_induction_score")) for r in rs], 3),
                "final shifted-head score": spread([nan_if_none(r.get("task_shift_score")) for r in rs], 3),
                "final probe induction score": spread([nan_if_none(r["induction_score"]) for r in rs], 3),
                "final previous-token score (own)": spread(
                    [nan_if_none(r.get("task_prev_token_score")) for r in rs], 3
                ),
                "final loss, second copy": spread([nan_if_none(r["copy_loss"]) for r in rs], 3),
                "final loss, elsewhere": spread([nan_if_none(r["other_loss"]) for r in rs], 3),
                "route": _routes(rs),
            }
        )
    return pd.DataFrame(rows)


ABRUPT_RATIO = 0.25  # a rise is abrupt when its 10-90% width is under this fraction of its midpoint step
JUMP_WINDOW = 100  # steps: the window of formation.steepest_share
JUMP_SHARE = 0.5  # a rise has a jump when over half of it happens within JUMP_WINDOW steps


def abruptness_verdict(ratios: Sequence[float]) -> str:
    """The rule: over the seeds where the rise is defined, "abrupt" when the 95% t-interval of
    width / t50 lies wholly below ``ABRUPT_RATIO``, "gradual" when wholly above it, "undecided" when
    it straddles it, "n/a" with fewer than 2 seeds."""
    m, lo, hi, n = t_interval(ratios)
    if n < 2:
        return "n/a"
    return "abrupt" if hi < ABRUPT_RATIO else "gradual" if lo > ABRUPT_RATIO else "undecided"


def _jump_shares(rs: list[dict]) -> list[float]:
    """``formation.steepest_share`` of the own-distribution induction score, in the runs that formed."""
    from analyses.positional.formation import steepest_share

    return [
        steepest_share(r["history"], "task_induction_score", JUMP_WINDOW)
        if not math.isnan(nan_if_none(r.get("step_score_formed"))) and r.get("history")
        else float("nan")
        for r in rs
    ]


def jump_verdict(shares: Sequence[float]) -> str:
    """The second rule: "a jump" when the 95% t-interval of the share of the rise gained in the
    steepest ``JUMP_WINDOW`` steps lies wholly above ``JUMP_SHARE``, "no jump" when wholly below,
    "undecided" when it straddles, "n/a" with fewer than 2 formed seeds."""
    m, lo, hi, n = t_interval(shares)
    if n < 2:
        return "n/a"
    return "a jump" if lo > JUMP_SHARE else "no jump" if hi < JUMP_SHARE else "undecided"


def abruptness_table(results: list[dict]) -> pd.DataFrame:
    """Per scheme, for the own-distribution induction score's rise and the second-copy loss's fall
    (``formation.rise``; runs where it formed): t50 and the 10-90% width as mean [95% t-interval]
    (seeds), width / t50, and the verdict of ``abruptness_verdict``."""
    rows = []
    for s in SCHEMES:
        rs = _ind_runs(results, s)
        if not rs:
            continue
        row = {"scheme": s, "seeds": len(rs)}
        for prefix, what in (("score", "score"), ("loss", "loss")):
            row[f"{what}: t50"] = interval([nan_if_none(r.get(f"{prefix}_t50")) for r in rs], 0)
            row[f"{what}: width (t90 - t10)"] = interval([nan_if_none(r.get(f"{prefix}_width")) for r in rs], 0)
            ratios = [nan_if_none(r.get(f"{prefix}_width_over_t50")) for r in rs]
            row[f"{what}: width / t50"] = interval(ratios, 2)
            row[f"{what}: verdict"] = abruptness_verdict(ratios)
        shares = _jump_shares(rs)
        row[f"score: share of the rise in the steepest {JUMP_WINDOW} steps"] = interval(shares, 2)
        row["score: jump"] = jump_verdict(shares)
        rows.append(row)
    return pd.DataFrame(rows)


LONG_RANGE_BINS = ("1L", "2L", "4L", "8L")


NEAR_PREFIX = "control: d <= L in sequences of "  # + "8L": a near copy in the longest sequences


def long_range_table(results: list[dict]) -> pd.DataFrame:
    """Per scheme: top-1 accuracy on the second copy with the copy d after the first, d within the
    training length L ("d <= L") and in (L, 2L], (2L, 4L], (4L, 8L] on longer sequences; mean [95%
    t-interval] (seeds); n/a where a scheme cannot run (learned positions past their table)."""
    rows = []
    names = {"1L": "d <= L", "2L": "L < d <= 2L", "4L": "2L < d <= 4L", "8L": "4L < d <= 8L"}
    for s in SCHEMES:
        rs = _ind_runs(results, s)
        if not rs:
            continue
        row = {"scheme": s, "seeds": len(rs)}
        for b in LONG_RANGE_BINS:
            if any(f"lr_acc_{b}" in r for r in rs):
                row[names[b]] = interval([nan_if_none(r.get(f"lr_acc_{b}")) for r in rs], 3)
        for key in sorted({k for r in rs for k in r if k.startswith("lr_acc_near")}):
            row[NEAR_PREFIX + key[len("lr_acc_near") :]] = interval([nan_if_none(r.get(key)) for r in rs], 3)
        rows.append(row)
    return pd.DataFrame(rows)


def induction_claims(results: list[dict]) -> list[dict]:
    """The claims table's induction rows: formation (abruptly? at a scheme-dependent step?) and the
    route each scheme copies by; each verdict by the rule in its text."""
    from scipy import stats

    abr = abruptness_table(results)
    if abr.empty:
        return []
    ind = induction_table(results)
    t50s = {
        s: [x for x in (nan_if_none(r.get("score_t50")) for r in _ind_runs(results, s)) if not math.isnan(x)]
        for s in SCHEMES
    }
    groups = [v for v in t50s.values() if len(v) >= 2]
    if len(groups) >= 2 and len({x for g in groups for x in g}) > 1:
        p = float(stats.kruskal(*groups).pvalue)
        depends = f"{'yes' if p < 0.05 else 'no'}: Kruskal-Wallis over the schemes' t50, p = {p:.3g} (yes when < 0.05)"
    else:
        depends = "n/a (fewer than two schemes with 2+ formed seeds)"
    verdicts = "; ".join(f"{row.scheme}: {row['score: verdict']}" for _, row in abr.iterrows())
    jumps = "; ".join(f"{row.scheme}: {row['score: jump']}" for _, row in abr.iterrows())
    share = f"score: share of the rise in the steepest {JUMP_WINDOW} steps"
    rows = [
        {
            "claim": "induction heads form abruptly, at a step that depends on the positional scheme",
            "what the seeds say": "(not in the seeds: the issue's claim, after Olsson et al. 2022)",
            "what we measured": "; ".join(
                f"{row.scheme}: formed {_get(ind, row.scheme, 'seeds with a head formed (own sequences)')}, t50 "
                f"{row['score: t50']}, width/t50 {row['score: width / t50']}, steepest {JUMP_WINDOW} steps "
                f"{row[share]} of the rise"
                for _, row in abr.iterrows()
            ),
            "agrees?": f"abrupt (95% interval of width/t50 below {ABRUPT_RATIO}): {verdicts}; a jump (interval of the "
            f"steepest {JUMP_WINDOW} steps' share above {JUMP_SHARE}): {jumps}; scheme-dependent step: " + depends,
        }
    ]
    textbook = "previous-token L0"
    rows.append(
        {
            "claim": "induction: every scheme copies by a previous-token head feeding an induction head",
            "what the seeds say": "(not in the seeds: the textbook circuit, Olsson et al. 2022)",
            "what we measured": "; ".join(f"{s}: {_get(ind, s, 'route')}" for s in SCHEMES if s in set(ind.scheme)),
            "agrees?": "; ".join(
                f"{s}: {sum(textbook in r.get('route', '') and '> induction' in r.get('route', '') for r in rs)}"
                f"/{len(rs)} seeds by the textbook route"
                for s in SCHEMES
                if (rs := _ind_runs(results, s))
            ),
        }
    )
    return rows


def long_range_claims(results: list[dict]) -> list[dict]:
    """The claims table's long-range row: does retrieval across the context survive distance (the
    lookup ALiBi's recency penalty should hurt)? Verdict per scheme by ``_verdict`` on the mean
    accuracy in the farthest bin it can run (yes >= 0.9, partly >= 0.5)."""
    lr = long_range_table(results)
    if lr.empty:
        return []
    bins = [c for c in lr.columns if c not in ("scheme", "seeds") and not c.startswith(NEAR_PREFIX)]
    near = next((c for c in lr.columns if c.startswith(NEAR_PREFIX)), None)
    far = bins[-1]
    b = LONG_RANGE_BINS[len(bins) - 1]
    chance = _mean(results, "induction", str(lr.scheme.iloc[0]), "lr_chance")
    verdicts = []
    for s in lr.scheme:
        m = _mean(results, "induction", s, f"lr_acc_{b}")
        verdicts.append(f"{s}: n/a" if math.isnan(m) else f"{s}: {_verdict(m)} ({m:.2f})")
    return [
        {
            "claim": "ALiBi (and every scheme): a lookup across the context still works far back (k >> 2)",
            "what the seeds say": "ALiBi subtracts a penalty linear in distance (a recency bias): copy-2-back suits it",
            "what we measured": "; ".join(
                f"{s}: d <= L {_get(lr, s, 'd <= L')}, {far} {_get(lr, s, far)}"
                + (f", near copy in {near[len(NEAR_PREFIX) :]} {_get(lr, s, near)}" if near else "")
                for s in lr.scheme
            )
            + ("" if math.isnan(chance) else f" (chance {chance:.3f})"),
            "agrees?": f"at {far}: " + ", ".join(verdicts),
        }
    ]


def _get(table: pd.DataFrame, scheme: str, column: str) -> str:
    hit = table.loc[table.scheme == scheme, column] if column in table.columns else pd.Series(dtype=object)
    return str(hit.iloc[0]) if len(hit) else "n/a"


def _mean(results: list[dict], kind: str, scheme: str, key: str, attention: str = "causal") -> float:
    v = [
        nan_if_none(r.get(key))
        for r in results
        if r["kind"] == kind and r["scheme"] == scheme and r["attention"] == attention
    ]
    v = [x for x in v if not math.isnan(x)]
    return float(np.mean(v)) if v else float("nan")


def claims_table(results: list[dict]) -> pd.DataFrame:
    """One row per claim: what the seeds (or the issue) say, what the runs measured for that claim,
    whether it agrees. Each verdict is computed by the rule written in its function, from the
    measurement of the claim it names, not by hand."""
    rows = []
    for claim in (_order_claim, _untrained_claim, _distance_claim, _extrapolation_claim):
        row = claim(results)
        if row is not None:
            rows.append(row)
    rows.extend(long_range_claims(results))
    rows.extend(induction_claims(results))
    text = text_claim(results)
    if text is not None:
        rows.append(text)
    return pd.DataFrame(rows, columns=CLAIMS_COLUMNS)


def _order_claim(results: list[dict]) -> dict | None:
    """Holds for bidirectional attention when every no-position run scores exactly 0.5 (the twins
    tie); the causal mask leaks order when causal no-position runs score above 0.75."""
    bi_none = _mean(results, "order", "none", "accuracy", "bidirectional")
    if math.isnan(bi_none):
        return None
    order = order_table(results)
    ca_none = _mean(results, "order", "none", "accuracy", "causal")
    bi_pos = [_mean(results, "order", s, "accuracy", "bidirectional") for s in SCHEMES if s != "none"]
    exact = all(
        r["accuracy"] == 0.5
        for r in results
        if r["kind"] == "order" and r["scheme"] == "none" and r["attention"] == "bidirectional"
    )
    return {
        "claim": "order: without positions attention cannot tell 'dog bites man' from 'man bites dog'",
        "what the seeds say": "単語をシャッフルしても、計算は同じ答えを返す (shuffle the words and the "
        "computation returns the same answer); only the coordinates tell the two apart",
        "what we measured": f"bidirectional, no positions: {_get(order, 'none', 'bidirectional accuracy')}; "
        f"bidirectional with positions: {min(bi_pos):.3f}-{max(bi_pos):.3f}; causal, no positions: "
        f"{_get(order, 'none', 'causal accuracy')}",
        "agrees?": ("yes for bidirectional attention (exactly chance)" if exact else "no")
        + ("; no for causal models: the mask leaks order" if ca_none > 0.75 else "; yes for causal models too"),
    }


def _copy_runs(results: list[dict], scheme: str) -> list[dict]:
    return [r for r in results if r["kind"] == "copy_back" and r["scheme"] == scheme]


def _lengths(results: list[dict]) -> list[str]:
    """The extrapolation columns of the copy task (acc_2x, acc_4x, ...), shortest first."""
    keys = {k for r in results if r["kind"] == "copy_back" for k in r if k.startswith("acc_") and k.endswith("x")}
    return sorted(keys, key=lambda k: int(k[4:-1]))


def _untrained_claim(results: list[dict]) -> dict | None:
    """Learned positions with a table longer than the training sequences: the rows past L never got a
    gradient (``untrained_rows_change`` exactly 0 in every seed, or the measurement is void). Holds when
    the accuracy at every test length past L is under half the accuracy inside it."""
    rs = [r for r in _copy_runs(results, "learned") if not math.isnan(nan_if_none(r.get("untrained_rows_change")))]
    cols = _lengths(results)
    if not rs or not cols or all(math.isnan(nan_if_none(r.get(cols[0]))) for r in rs):
        return None
    moved = max(nan_if_none(r["untrained_rows_change"]) for r in rs)
    inside = float(np.mean([nan_if_none(r["acc_train_len"]) for r in rs]))
    past = {c: float(np.nanmean([nan_if_none(r.get(c)) for r in rs])) for c in cols}
    if moved != 0:
        verdict = f"void: the untrained rows moved by {moved:.3g} (they must stay exactly at initialisation)"
    else:
        fails = all(v < inside / 2 for v in past.values())
        verdict = (
            ("yes" if fails else "no")
            + ": accuracy on untrained rows "
            + ", ".join(f"{v:.2f} at {c[4:].replace('x', 'x L')}" for c, v in past.items())
        )
        verdict += f" vs {inside:.2f} inside L"
    n_rows = max(int(r.get("table_rows") or 0) for r in rs) if any(r.get("table_rows") for r in rs) else None
    table = f"a table of {n_rows} rows" if n_rows else "a table longer than L"
    chance = _chance(results)
    return {
        "claim": "untrained positions: learned absolute positions fail where their vectors saw no training",
        "what the seeds say": "訓練時に10000番目の位置を見たことがなければ…長いテキストでは機能しません "
        "(a position never seen in training has an untrained vector: long texts fail)",
        "what we measured": f"copy 2 back, learned positions with {table}, trained on length L only "
        f"({len(rs)} seeds; rows past L moved by {moved:.3g} from initialisation, weight decay off for W_pos): "
        + ", ".join(f"{c[4:].replace('x', 'x L')} {spread([nan_if_none(r.get(c)) for r in rs], 3)}" for c in cols)
        + f" (inside L {spread([nan_if_none(r['acc_train_len']) for r in rs], 3)}; chance {chance:.3f})",
        "agrees?": verdict,
    }


def _chance(results: list[dict]) -> float:
    n = next((r.get("n_symbols") for r in results if r["kind"] == "copy_back" and r.get("n_symbols")), None)
    return 1 / n if n else float("nan")


DISTANCE_TOLERANCE = 1.0  # shift_ratio: the scores' change in units of its float32 tolerance


def distance_table(results: list[dict]) -> pd.DataFrame:
    """Per scheme: the shift check on the copy models (every layer, all positions shifted by s; worst
    change / tolerance over seeds and shifts; the guard's smallest ratio), and the verdict."""
    rows = []
    for s in SCHEMES:
        rs = [r for r in _copy_runs(results, s) if r.get("shift_ratio") is not None]
        if not rs:
            continue
        worst = max(nan_if_none(r["shift_ratio"]) for r in rs)
        rows.append(
            {
                "scheme": s,
                "seeds": len(rs),
                "shifts": ", ".join(str(x) for x in rs[0].get("shifts", [])),
                "worst change / tolerance": worst,
                "guard / tolerance (min)": min(nan_if_none(r["shift_guard_ratio"]) for r in rs),
                "scores depend on distance only": "yes" if worst <= DISTANCE_TOLERANCE else "no",
            }
        )
    return pd.DataFrame(rows)


def _distance_claim(results: list[dict]) -> dict | None:
    """Holds when RoPE and ALiBi models' scores stay within tolerance under every shift in every seed
    while the check, on absolute schemes, does see a change (else it could not fail)."""
    t = distance_table(results)
    if t.empty:
        return None
    d = t.set_index("scheme")
    rel = [s for s in ("rope", "alibi") if s in d.index]
    absolute = [s for s in ("learned", "sinusoidal") if s in d.index]
    holds = all(d.loc[s, "worst change / tolerance"] <= DISTANCE_TOLERANCE for s in rel)
    sees = all(d.loc[s, "worst change / tolerance"] > DISTANCE_TOLERANCE for s in absolute)
    text = [r for r in results if r["kind"] == "text" and r.get("shift_deviation_L0") is not None]
    text_note = (
        "; natural-text models, layer 0, max |difference| / std: "
        + ", ".join(
            f"{s} {spread([nan_if_none(r['shift_deviation_L0']) for r in text if r['scheme'] == s], 3)}"
            for s in SCHEMES
            if any(r["scheme"] == s for r in text)
        )
        if text
        else ""
    )
    return {
        "claim": "distance: relative schemes (RoPE, ALiBi) make attention scores depend on distance only",
        "what the seeds say": "結果は2つの単語の距離のみに依存します (the result depends only on the distance); "
        "ALiBi subtracts a penalty linear in distance",
        "what we measured": "every layer's scores with all positions shifted (copy models, "
        f"shifts {d.iloc[0]['shifts']}), worst change in units of the float32 tolerance: "
        + ", ".join(f"{s} {d.loc[s, 'worst change / tolerance']:.3g}" for s in d.index)
        + text_note,
        "agrees?": ("yes" if holds else "no")
        + f": {', '.join(rel)} within tolerance in every seed and shift" * holds
        + ("" if holds else f": {', '.join(s for s in rel if d.loc[s, 'worst change / tolerance'] > 1)} changed")
        + (
            f"; the check sees the absolute schemes move ({', '.join(absolute)})"
            if sees
            else "; the check saw no change on an absolute scheme: it could not have failed"
        ),
    }


def _extrapolation_claim(results: list[dict]) -> dict | None:
    """Per scheme and test length, the copy task's accuracy past the training length, with the verdict
    of each length (``_verdict``): whether a scheme carries over is a curve, not one number."""
    extra = extrapolation_table(results)
    if extra.empty:
        return None
    cols = [c for c in extra.columns if c.endswith("x L")]

    def per_length(s: str) -> str:
        parts = []
        for c in cols:
            v = _mean(results, "copy_back", s, f"acc_{c.split('x')[0]}x")
            parts.append(f"{c} n/a" if math.isnan(v) else f"{_verdict(v)} at {c} ({v:.2f})")
        return f"{s}: " + ", ".join(parts)

    return {
        "claim": "extrapolation: relative schemes carry over past the trained length (copy the token 2 back)",
        "what the seeds say": "(follows from the distance claim: the same distances recur at any position)",
        "what we measured": "; ".join(
            f"{s}: " + ", ".join(f"{c} {_get(extra, s, c)}" for c in cols) for s in SCHEMES if s in set(extra.scheme)
        ),
        "agrees?": "; ".join(per_length(s) for s in ("rope", "alibi", "none") if s in set(extra.scheme))
        + " (yes >= 0.9, partly >= 0.5)",
    }


def _verdict(accuracy: float) -> str:
    """Holds (>= 0.9 of the positions right), partly (>= 0.5), or not."""
    return "yes" if accuracy >= 0.9 else "partly" if accuracy >= 0.5 else "no"


# --------------------------------------------------------------------------------------------------
# Figures


def plot_order(results: list[dict], path: Path) -> Path:
    plt, sns = pyplot()
    t = scalars([r for r in results if r["kind"] == "order"])
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    sns.barplot(data=t, x="scheme", y="accuracy", hue="attention", order=list(SCHEMES), errorbar=("pi", 100), ax=ax)
    sns.stripplot(
        data=t,
        x="scheme",
        y="accuracy",
        hue="attention",
        order=list(SCHEMES),
        dodge=True,
        jitter=False,  # seaborn's jitter draws from an unseeded generator: the PNG would change every run
        palette="dark:k",
        size=3,
        ax=ax,
        legend=False,
    )
    ax.axhline(0.5, color="grey", ls="--", lw=1)
    ax.set_ylim(0, 1.05)
    ax.set_title("Order task: does A come before B? (bars: mean, whiskers: range over seeds)")
    fig.tight_layout()
    out = save_figure(fig, path)
    plt.close(fig)
    return out


def plot_extrapolation(results: list[dict], train_len: int, path: Path, bin_width: int = 8) -> Path:
    plt, sns = pyplot()
    frames = []
    for r in results:
        if r["kind"] == "copy_back":
            c = np.array([nan_if_none(x) for x in r["curve"]], dtype=float)
            frames.append(
                pd.DataFrame({"scheme": r["scheme"], "seed": r["seed"], "position": np.arange(c.size), "acc": c})
            )
    t = pd.concat(frames).dropna()
    t["position"] = t.position // bin_width * bin_width + bin_width / 2
    t = t.groupby(["scheme", "seed", "position"], as_index=False).acc.mean()
    fig, ax = plt.subplots(figsize=(8, 4))
    sns.lineplot(data=t, x="position", y="acc", hue="scheme", hue_order=list(SCHEMES), errorbar=("pi", 100), ax=ax)
    ax.axvline(train_len, color="grey", ls="--", lw=1)
    ax.text(train_len, 1.02, " training length", fontsize=8, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.08)
    ax.set(xlabel="position (log scale)", ylabel="accuracy (band: range over seeds)", title="Copy the token k back")
    fig.tight_layout()
    out = save_figure(fig, path)
    plt.close(fig)
    return out


def plot_induction(results: list[dict], path: Path) -> Path:
    """Three panels: the best induction score on the task's own sequences and the second-copy loss
    against the step, and the loss against the step minus each run's loss t50 (curves aligned at
    the middle of their fall, to show the width of the fall alone)."""
    plt, sns = pyplot()
    frames = []
    for r in results:
        if r["kind"] == "induction":
            h = pd.DataFrame(r["history"])
            if "task_induction_score" not in h:
                h["task_induction_score"] = np.nan
            t50 = nan_if_none(r.get("loss_t50"))
            frames.append(h.assign(scheme=r["scheme"], seed=r["seed"], aligned=h.step - t50))
    t = pd.concat(frames)
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    panels = (
        (axes[0], "step", "task_induction_score", "best induction score (task's own sequences)"),
        (axes[1], "step", "copy_loss", "loss on the second copy (nats)"),
        (axes[2], "aligned", "copy_loss", "the same, step minus each run's loss t50 (one line a run)"),
    )
    for ax, x, col, title in panels:
        data = t.dropna(subset=[x])
        if len(data) and x == "aligned":  # steps differ by seed once shifted: one line per run
            kw = {"units": "seed", "estimator": None, "lw": 0.8}
            sns.lineplot(data=data, x=x, y=col, hue="scheme", hue_order=list(SCHEMES), ax=ax, **kw)
        elif len(data):
            sns.lineplot(data=data, x=x, y=col, hue="scheme", hue_order=list(SCHEMES), errorbar=("pi", 100), ax=ax)
        ax.set_title(title, fontsize=10)
    axes[0].axhline(0.3, color="grey", ls="--", lw=1)
    axes[2].axvline(0, color="grey", ls="--", lw=1)
    fig.suptitle("Induction heads forming: 2-layer attention-only models (band: range over seeds)")
    fig.tight_layout()
    out = save_figure(fig, path)
    plt.close(fig)
    return out


# --------------------------------------------------------------------------------------------------
# Everything


def write_report(results: list[dict], out_dir: str | Path, copy_train_len: int | None = None) -> dict:
    """Write every table (markdown and CSV) and figure into ``out_dir``; returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    runs = scalars(results)
    files["runs"] = atomic_save(out / "runs.csv", lambda t: runs.to_csv(t, index=False))
    kinds = set(runs.kind) if len(runs) else set()
    tables = {"claims": claims_table(results)}
    if "order" in kinds:
        tables["order"] = order_table(results)
        files["order_figure"] = plot_order(results, out / "order.png")
    if "copy_back" in kinds:
        tables["extrapolation"] = extrapolation_table(results)
        tables["distance"] = distance_table(results)
        files["extrapolation_figure"] = plot_extrapolation(results, copy_train_len or 1, out / "extrapolation.png")
    if "induction" in kinds:
        tables["induction"] = induction_table(results)
        tables["induction_abruptness"] = abruptness_table(results)
        tables["long_range"] = long_range_table(results)
        files["induction_figure"] = plot_induction(results, out / "induction.png")
    anchor = next((r for r in results if r["kind"] == "anchor"), None)
    if anchor is not None:
        from analyses.positional.anchor import plot_char_frame

        tables["anchor"] = anchor_table(anchor)
        files["anchor_figure"] = plot_char_frame(anchor, out / "anchor.png")
    if "text" in kinds:
        files.update(text_report(results, out, tables, anchor))
    cpu = runs
    if len(runs):
        # a run that only measured a reused checkpoint records the checkpoint's training time: its cost
        # here is its wall time; "measured only" counts those runs
        measured = runs["measured_only"] if "measured_only" in runs else pd.Series(False, index=runs.index)
        cpu = runs.assign(measured_only=measured.fillna(False).astype(bool)).groupby("kind", as_index=False)
        # min_count=1: a kind whose runs never recorded a column (results older than it) shows n/a, not 0
        sums = {
            c: (c, lambda x: x.sum(min_count=1)) for c in ("train_seconds", "wall_seconds", "cpu_seconds") if c in runs
        }
        cpu = cpu.agg(runs=("id", "count"), measured_only=("measured_only", "sum"), **sums)
        cpu = cpu.rename(columns={"measured_only": "measured only"})
    tables["cpu"] = cpu
    for name, table in tables.items():
        files[name] = atomic_write(out / f"{name}.md", md_table(table, digits=3) + "\n")
    return files


def fill_doc(doc: str | Path, study_dir: str | Path) -> list[str]:
    """Replace each block ``<!-- begin NAME.md -->`` ... ``<!-- end NAME.md -->`` of ``doc`` with
    the current ``study_dir/NAME.md`` (how docs/positional.md gets the study's numbers). Blocks whose
    table does not exist are left as they are. Returns the names filled in."""
    import re

    doc, study_dir = Path(doc), Path(study_dir)
    text = doc.read_text()
    filled = []

    def put(m: re.Match) -> str:
        name = m.group(1)
        table = study_dir / name
        if not table.exists():
            return m.group(0)
        filled.append(name)
        return f"<!-- begin {name} -->\n{table.read_text().strip()}\n<!-- end {name} -->"

    new = re.sub(r"<!-- begin ([\w.-]+\.md) -->\n.*?<!-- end \1 -->", put, text, flags=re.S)
    if new != text:
        atomic_write(doc, new)
    return filled
