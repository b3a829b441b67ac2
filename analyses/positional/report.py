"""Tables and figures of the second-round positional study, from the runs' results
(``analyses.positional.runs``): one markdown table and one figure per claim, the claims table,
a CSV of every run. Everything is written atomically into one folder (``docs/positional_study``),
so ``docs/positional.md`` can include the numbers mechanically.

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

from analyses.positional.study import SCHEMES, plot_heads, plot_loss_by_position
from interp.io import atomic_save, atomic_write, md_table

CLAIMS_COLUMNS = ["claim", "what the seeds say", "what we measured", "agrees?"]


def spread(values: Sequence[float], digits: int = 2) -> str:
    """ "mean [min, max]" over the finite values; "n/a" when there are none; one value alone."""
    v = np.array([x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))], dtype=float)
    if v.size == 0:
        return "n/a"
    if v.size == 1 or np.ptp(v) == 0:
        return f"{v.mean():.{digits}f}"
    return f"{v.mean():.{digits}f} [{v.min():.{digits}f}, {v.max():.{digits}f}]"


def _scalars(results: list[dict]) -> pd.DataFrame:
    keep = []
    for r in results:
        keep.append({k: v for k, v in r.items() if not isinstance(v, (list, dict))})
    return pd.DataFrame(keep)


def _nan(x):
    return np.nan if x is None else x


# --------------------------------------------------------------------------------------------------
# One table per claim


def order_table(results: list[dict]) -> pd.DataFrame:
    rows = []
    for s in SCHEMES:
        row = {"scheme": s}
        for att in ("bidirectional", "causal"):
            rs = [r for r in results if r["kind"] == "order" and r["scheme"] == s and r["attention"] == att]
            row[f"{att} accuracy"] = spread([_nan(r["accuracy"]) for r in rs], 3)
            row[f"{att} twins answered differently"] = spread([_nan(r["twins_differ"]) for r in rs], 3)
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
        row = {"scheme": s, "seeds": len(rs), "train length": spread([_nan(r["acc_train_len"]) for r in rs], 3)}
        for c in cols:
            row[c[4:].replace("x", "x L")] = spread([_nan(r.get(c)) for r in rs], 3)
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
    return f"{sum(r.get(key) is not None and not math.isnan(_nan(r.get(key))) for r in rs)}/{len(rs)}"


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
                "step: own induction score > 0.3": spread([_nan(r["step_score_formed"]) for r in rs], 0),
                "seeds formed (probe)": _formed(rs, "step_probe_formed"),
                "seeds formed (shifted head)": _formed(rs, "step_shift_formed"),
                "step: second-copy loss < ln(V)/2": spread([_nan(r["step_loss_formed"]) for r in rs], 0),
                "final own induction score": spread([_nan(r.get("task_induction_score")) for r in rs], 3),
                "final shifted-head score": spread([_nan(r.get("task_shift_score")) for r in rs], 3),
                "final probe induction score": spread([_nan(r["induction_score"]) for r in rs], 3),
                "final previous-token score (own)": spread([_nan(r.get("task_prev_token_score")) for r in rs], 3),
                "final loss, second copy": spread([_nan(r["copy_loss"]) for r in rs], 3),
                "final loss, elsewhere": spread([_nan(r["other_loss"]) for r in rs], 3),
                "route": _routes(rs),
            }
        )
    return pd.DataFrame(rows)


ABRUPT_RATIO = 0.25  # a rise is abrupt when its 10-90% width is under this fraction of its midpoint step


def abruptness_verdict(ratios: Sequence[float]) -> str:
    """The rule: over the seeds where the rise is defined, "abrupt" when the 95% t-interval of
    width / t50 lies wholly below ``ABRUPT_RATIO``, "gradual" when wholly above it, "undecided" when
    it straddles it, "n/a" with fewer than 2 seeds."""
    m, lo, hi, n = t_interval(ratios)
    if n < 2:
        return "n/a"
    return "abrupt" if hi < ABRUPT_RATIO else "gradual" if lo > ABRUPT_RATIO else "undecided"


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
            row[f"{what}: t50"] = interval([_nan(r.get(f"{prefix}_t50")) for r in rs], 0)
            row[f"{what}: width (t90 - t10)"] = interval([_nan(r.get(f"{prefix}_width")) for r in rs], 0)
            ratios = [_nan(r.get(f"{prefix}_width_over_t50")) for r in rs]
            row[f"{what}: width / t50"] = interval(ratios, 2)
            row[f"{what}: verdict"] = abruptness_verdict(ratios)
        rows.append(row)
    return pd.DataFrame(rows)


LONG_RANGE_BINS = ("1L", "2L", "4L", "8L")


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
                row[names[b]] = interval([_nan(r.get(f"lr_acc_{b}")) for r in rs], 3)
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
        s: [x for x in (_nan(r.get("score_t50")) for r in _ind_runs(results, s)) if not math.isnan(x)] for s in SCHEMES
    }
    groups = [v for v in t50s.values() if len(v) >= 2]
    if len(groups) >= 2 and len({x for g in groups for x in g}) > 1:
        p = float(stats.kruskal(*groups).pvalue)
        depends = f"{'yes' if p < 0.05 else 'no'}: Kruskal-Wallis over the schemes' t50, p = {p:.3g} (yes when < 0.05)"
    else:
        depends = "n/a (fewer than two schemes with 2+ formed seeds)"
    verdicts = "; ".join(f"{row.scheme}: {row['score: verdict']}" for _, row in abr.iterrows())
    rows = [
        {
            "claim": "induction heads form abruptly, at a step that depends on the positional scheme",
            "what the seeds say": "(not in the seeds: the issue's claim, after Olsson et al. 2022)",
            "what we measured": "; ".join(
                f"{row.scheme}: formed {_get(ind, row.scheme, 'seeds with a head formed (own sequences)')}, t50 "
                f"{row['score: t50']}, width/t50 {row['score: width / t50']}"
                for _, row in abr.iterrows()
            ),
            "agrees?": f"abrupt (95% interval of width/t50 below {ABRUPT_RATIO}): {verdicts}; scheme-dependent step: "
            + depends,
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
    far = [c for c in lr.columns if c not in ("scheme", "seeds")][-1]
    b = LONG_RANGE_BINS[len([c for c in lr.columns if c not in ("scheme", "seeds")]) - 1]
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
                f"{s}: d <= L {_get(lr, s, 'd <= L')}, {far} {_get(lr, s, far)}" for s in lr.scheme
            )
            + ("" if math.isnan(chance) else f" (chance {chance:.3f})"),
            "agrees?": f"at {far}: " + ", ".join(verdicts),
        }
    ]


TEXT_COLUMNS = [
    "scheme",
    "heldout_loss",
    "loss_pos_1_7",
    "loss_last_quarter_ctx",
    "context_gain",
    "passage_loss_pos_1_7",
    "passage_loss_last_quarter",
    "loss_1x_2x",
    "loss_3x_4x",
    "shuffle_increase",
    "best_prev_token_head",
    "prev_token_score",
    "induction_score",
    "loss_first_half",
    "loss_repeated_half",
    "shift_deviation_L0",
    "train_seconds",
]


def text_table(results: list[dict]) -> pd.DataFrame:
    rs = [r for r in results if r["kind"] == "text"]
    if not rs:
        return pd.DataFrame(columns=TEXT_COLUMNS)
    t = _scalars(rs)
    t["context_gain"] = t["loss_pos_1_7"] - t["loss_last_quarter_ctx"]
    return t[[c for c in TEXT_COLUMNS if c in t.columns]]


def text_criteria(text: pd.DataFrame) -> pd.DataFrame:
    """The issue's three conditions on the natural-text models, each with its numbers and a verdict,
    on held-out stream windows (position 0 anywhere in a passage) and, when measured, on windows
    that start at a passage's start (position t = t tokens of the same passage before it)."""
    if text.empty:
        return pd.DataFrame(columns=["windows", "condition", "measured", "met?"])
    t = text.set_index("scheme")
    positional = [s for s in t.index if s != "none"]
    rows = []
    kinds = [("stream", "loss_pos_1_7", "loss_last_quarter_ctx")]
    if "passage_loss_pos_1_7" in t.columns:
        kinds.append(("passage start", "passage_loss_pos_1_7", "passage_loss_last_quarter"))
    for windows, early, late in kinds:
        gains = t.loc[positional, early] - t.loc[positional, late]
        rows.append(
            {
                "windows": windows,
                "condition": "positional schemes: last quarter of the context >= 0.3 nats below positions 1-7",
                "measured": ", ".join(f"{s} {g:.3f}" for s, g in gains.items()),
                "met?": "yes" if bool((gains >= 0.3).all()) else f"no ({int((gains < 0.3).sum())} below)",
            }
        )
        if "none" in t.index and positional:
            best = t.loc[positional, late].idxmin()
            margin = t.loc["none", late] - t.loc[best, late]
            rows.append(
                {
                    "windows": windows,
                    "condition": "best positional scheme >= 0.05 nats below no positions over the last quarter",
                    "measured": f"{best} {t.loc[best, late]:.3f} vs none {t.loc['none', late]:.3f} "
                    f"(margin {margin:.3f})",
                    "met?": "yes" if margin >= 0.05 else "no",
                }
            )
        if "sinusoidal" in t.index and positional:
            gap = t.loc["sinusoidal", late] - t.loc[positional, late].min()
            rows.append(
                {
                    "windows": windows,
                    "condition": "sinusoidal within 0.3 nats of the best positional scheme (last quarter)",
                    "measured": f"{gap:.3f} above the best",
                    "met?": "yes" if gap <= 0.3 else "no",
                }
            )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# The claims table: the seeds' words, our numbers


def _get(table: pd.DataFrame, scheme: str, column: str) -> str:
    hit = table.loc[table.scheme == scheme, column] if column in table.columns else pd.Series(dtype=object)
    return str(hit.iloc[0]) if len(hit) else "n/a"


def _mean(results: list[dict], kind: str, scheme: str, key: str, attention: str = "causal") -> float:
    v = [
        _nan(r.get(key)) for r in results if r["kind"] == kind and r["scheme"] == scheme and r["attention"] == attention
    ]
    v = [x for x in v if not math.isnan(x)]
    return float(np.mean(v)) if v else float("nan")


def claims_table(results: list[dict]) -> pd.DataFrame:
    """One row per claim of the seeds: what they say, what the runs measured, whether it agrees
    (decided by the rule written next to each verdict, from the numbers, not by hand)."""
    order, extra = order_table(results), extrapolation_table(results)
    rows = []
    bi_none = _mean(results, "order", "none", "accuracy", "bidirectional")
    ca_none = _mean(results, "order", "none", "accuracy", "causal")
    bi_pos = [_mean(results, "order", s, "accuracy", "bidirectional") for s in SCHEMES if s != "none"]
    if not math.isnan(bi_none):
        exact = bi_none == 0.5
        leak = ca_none > 0.75
        rows.append(
            {
                "claim": "order: without positions attention cannot tell 'dog bites man' from 'man bites dog'",
                "what the seeds say": "単語をシャッフルしても、計算は同じ答えを返す (shuffle the words and the "
                "computation returns the same answer); only the coordinates tell the two apart",
                "what we measured": f"bidirectional, no positions: {_get(order, 'none', 'bidirectional accuracy')}; "
                f"bidirectional with positions: {min(bi_pos):.3f}-{max(bi_pos):.3f}; causal, no positions: "
                f"{_get(order, 'none', 'causal accuracy')}",
                "agrees?": ("yes for bidirectional attention (exactly chance)" if exact else "no")
                + ("; no for causal models: the mask leaks order" if leak else "; yes for causal models too"),
            }
        )
    if not extra.empty:
        cols = [c for c in extra.columns if c.endswith("x L")]
        last = cols[-1] if cols else None

        def acc(s: str, c: str | None) -> float:
            return _mean(results, "copy_back", s, f"acc_{c.split('x')[0]}x") if c else float("nan")

        learned_na = all(math.isnan(acc("learned", c)) for c in cols)
        rel = {s: acc(s, last) for s in ("rope", "alibi")}
        rows.append(
            {
                "claim": "extrapolation: learned absolute positions fail past the trained length",
                "what the seeds say": "訓練時に10000番目の位置を見たことがなければ…長いテキストでは機能しません "
                "(a position never seen in training has an untrained vector: long texts fail)",
                "what we measured": "learned: "
                + ", ".join(f"{c} {_get(extra, 'learned', c)}" for c in cols)
                + f" (train length {_get(extra, 'learned', 'train length')}); sinusoidal at {last}: "
                f"{_get(extra, 'sinusoidal', last)}",
                "agrees?": "yes: learned cannot run at all (no embedding to look up)"
                if learned_na
                else "check the table",
            }
        )
        rows.append(
            {
                "claim": "extrapolation: relative schemes (RoPE, ALiBi) depend on distance only, so they carry over",
                "what the seeds say": "結果は2つの単語の距離のみに依存します "
                "(the result depends only on the distance); ALiBi subtracts a penalty linear in distance",
                "what we measured": ", ".join(
                    f"{s} at {last}: {_get(extra, s, last)}" for s in ("rope", "alibi", "none")
                )
                + f" (train length: rope {_get(extra, 'rope', 'train length')}, alibi "
                f"{_get(extra, 'alibi', 'train length')})",
                "agrees?": ", ".join(
                    f"{s}: n/a" if math.isnan(v) else f"{s}: {_verdict(v)} ({v:.2f} at {last})" for s, v in rel.items()
                ),
            }
        )
    rows.extend(induction_claims(results))
    rows.extend(long_range_claims(results))
    return pd.DataFrame(rows, columns=CLAIMS_COLUMNS)


def _verdict(accuracy: float) -> str:
    """Holds (>= 0.9 of the positions right), partly (>= 0.5), or not."""
    return "yes" if accuracy >= 0.9 else "partly" if accuracy >= 0.5 else "no"


# --------------------------------------------------------------------------------------------------
# Figures


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    return plt, sns


def _save(fig, path: Path) -> Path:
    atomic_save(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    return path


def plot_order(results: list[dict], path: Path) -> Path:
    plt, sns = _plt()
    t = _scalars([r for r in results if r["kind"] == "order"])
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    sns.barplot(data=t, x="scheme", y="accuracy", hue="attention", order=list(SCHEMES), errorbar=("pi", 100), ax=ax)
    sns.stripplot(
        data=t,
        x="scheme",
        y="accuracy",
        hue="attention",
        order=list(SCHEMES),
        dodge=True,
        palette="dark:k",
        size=3,
        ax=ax,
        legend=False,
    )
    ax.axhline(0.5, color="grey", ls="--", lw=1)
    ax.set_ylim(0, 1.05)
    ax.set_title("Order task: does A come before B? (bars: mean, whiskers: range over seeds)")
    fig.tight_layout()
    out = _save(fig, path)
    plt.close(fig)
    return out


def plot_extrapolation(results: list[dict], train_len: int, path: Path, bin_width: int = 8) -> Path:
    plt, sns = _plt()
    frames = []
    for r in results:
        if r["kind"] == "copy_back":
            c = np.array([_nan(x) for x in r["curve"]], dtype=float)
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
    out = _save(fig, path)
    plt.close(fig)
    return out


def plot_induction(results: list[dict], path: Path) -> Path:
    """Three panels: the best induction score on the task's own sequences and the second-copy loss
    against the step, and the loss against the step minus each run's loss t50 (curves aligned at
    the middle of their fall, to show the width of the fall alone)."""
    plt, sns = _plt()
    frames = []
    for r in results:
        if r["kind"] == "induction":
            h = pd.DataFrame(r["history"])
            if "task_induction_score" not in h:
                h["task_induction_score"] = np.nan
            t50 = _nan(r.get("loss_t50"))
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
    out = _save(fig, path)
    plt.close(fig)
    return out


# --------------------------------------------------------------------------------------------------
# Everything


def write_report(results: list[dict], out_dir: str | Path, copy_train_len: int | None = None) -> dict:
    """Write every table (markdown and CSV) and figure into ``out_dir``; returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    runs = _scalars(results)
    files["runs"] = atomic_save(out / "runs.csv", lambda t: runs.to_csv(t, index=False))
    kinds = set(runs.kind) if len(runs) else set()
    tables = {"claims": claims_table(results)}
    if "order" in kinds:
        tables["order"] = order_table(results)
        files["order_figure"] = plot_order(results, out / "order.png")
    if "copy_back" in kinds:
        tables["extrapolation"] = extrapolation_table(results)
        files["extrapolation_figure"] = plot_extrapolation(results, copy_train_len or 1, out / "extrapolation.png")
    if "induction" in kinds:
        tables["induction"] = induction_table(results)
        tables["induction_abruptness"] = abruptness_table(results)
        tables["long_range"] = long_range_table(results)
        files["induction_figure"] = plot_induction(results, out / "induction.png")
    if "text" in kinds:
        text = text_table(results)
        tables["text"] = text
        tables["text_criteria"] = text_criteria(text)
        curves = pd.concat(
            pd.DataFrame(
                {"scheme": r["scheme"], "position": np.arange(len(r["curve"])), "loss": [_nan(x) for x in r["curve"]]}
            )
            for r in results
            if r["kind"] == "text"
        )
        heads = pd.concat(pd.DataFrame(r["heads"]).assign(scheme=r["scheme"]) for r in results if r["kind"] == "text")
        files["text_curves"] = atomic_save(out / "loss_by_position.csv", lambda t: curves.to_csv(t, index=False))
        files["text_heads"] = atomic_save(out / "heads.csv", lambda t: heads.to_csv(t, index=False))
        n_ctx = int(next(r["n_ctx"] for r in results if r["kind"] == "text" and "n_ctx" in r) or 0) or None
        files["text_figure"] = plot_loss_by_position(curves, n_ctx or len(curves) // 4, out / "loss_by_position.png")
        files["heads_figure"] = plot_heads(heads, out / "heads.png")
    cpu = (
        runs.groupby("kind", as_index=False).agg(
            runs=("id", "count"), train_seconds=("train_seconds", "sum"), wall_seconds=("wall_seconds", "sum")
        )
        if len(runs)
        else runs
    )
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
