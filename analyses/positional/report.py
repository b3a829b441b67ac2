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

import analyses.positional.text_stats as T
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
        if not math.isnan(_nan(r.get("step_score_formed"))) and r.get("history")
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
            row[f"{what}: t50"] = interval([_nan(r.get(f"{prefix}_t50")) for r in rs], 0)
            row[f"{what}: width (t90 - t10)"] = interval([_nan(r.get(f"{prefix}_width")) for r in rs], 0)
            ratios = [_nan(r.get(f"{prefix}_width_over_t50")) for r in rs]
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
                row[names[b]] = interval([_nan(r.get(f"lr_acc_{b}")) for r in rs], 3)
        for key in sorted({k for r in rs for k in r if k.startswith("lr_acc_near")}):
            row[NEAR_PREFIX + key[len("lr_acc_near") :]] = interval([_nan(r.get(key)) for r in rs], 3)
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


TEXT_COLUMNS = [
    "kind",
    "scheme",
    "seed",
    "n_layers",
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
    "measured_only",
]
TEXT_KINDS = ("text", "text_large")
WINDOWS = ("stream", "passage")
THRESHOLD_GAIN = 0.3  # the condition: last quarter >= 0.3 nats below positions 1-7
THRESHOLD_NONE = 0.05  # best positional scheme this far below no positions over the last quarter
THRESHOLD_SINUSOIDAL = 0.3  # sinusoidal within this of the best positional scheme


def text_table(results: list[dict]) -> pd.DataFrame:
    """One row per natural-text run (both sizes, every seed): its scalar measurements."""
    rs = [r for r in results if r["kind"] in TEXT_KINDS]
    if not rs:
        return pd.DataFrame(columns=TEXT_COLUMNS)
    t = _scalars(rs)
    t["context_gain"] = t["loss_pos_1_7"] - t["loss_last_quarter_ctx"]
    return t[[c for c in TEXT_COLUMNS if c in t.columns]]


def window_arrays(results: list[dict], kind: str, windows: str = "stream") -> dict:
    """{scheme: {"seeds", "pos_1_7" [k, n], "last_quarter" [k, n], "curve" [k, n, n_ctx - 1]}} from the
    runs of one natural-text ``kind`` that stored per-window losses, over the seeds every scheme has
    (so that the bootstrap can pair schemes by seed and window)."""
    if windows not in WINDOWS:
        raise ValueError(f"windows={windows!r}; choose from {WINDOWS}")
    rs = [r for r in results if r["kind"] == kind and windows in (r.get("per_window") or {})]
    by_scheme: dict[str, dict[int, dict]] = {}
    for r in rs:
        by_scheme.setdefault(r["scheme"], {})[r["seed"]] = r["per_window"][windows]
    if not by_scheme:
        return {}
    seeds = sorted(set.intersection(*(set(v) for v in by_scheme.values())))
    out = {}
    for scheme in [s for s in SCHEMES if s in by_scheme]:
        per = [by_scheme[scheme][seed] for seed in seeds]
        arrays = {k: np.array([[_nan(x) for x in p[k]] for p in per], dtype=float) for k in ("pos_1_7", "last_quarter")}
        curve = np.array([[[_nan(x) for x in row] for row in p["curve"]] for p in per], dtype=float)
        out[scheme] = {"seeds": seeds, **arrays, "curve": curve}
    shapes = {s: v["pos_1_7"].shape for s, v in out.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"{kind} {windows} windows: schemes have different [seeds, windows] shapes {shapes}")
    return out


def text_estimates(results: list[dict], n_boot: int = T.N_BOOT, seed: int = 0) -> pd.DataFrame:
    """Every interval the natural-text criteria need, from the hierarchical bootstrap
    (``text_stats``; one set of draws per kind and windows, shared by all schemes: paired). One row
    per (kind, windows, scheme, quantity) with mean, lo, hi. Quantities: loss_pos_1_7,
    last_quarter, gain (= loss_pos_1_7 - last_quarter), and paired differences last_quarter_minus_none,
    gain_minus_none, last_quarter_minus_best (the best positional scheme by mean last-quarter loss)."""
    rows = []
    for kind in TEXT_KINDS:
        for windows in WINDOWS:
            arr = window_arrays(results, kind, windows)
            if not arr:
                continue
            k, n = next(iter(arr.values()))["pos_1_7"].shape
            d = T.draws(k, n, n_boot, seed)
            q = {s: {"loss_pos_1_7": v["pos_1_7"], "last_quarter": v["last_quarter"]} for s, v in arr.items()}
            for v in q.values():
                v["gain"] = v["loss_pos_1_7"] - v["last_quarter"]
            positional = [s for s in q if s != "none"]
            best = min(positional, key=lambda s: q[s]["last_quarter"].mean()) if positional else None
            for s, v in q.items():
                if "none" in q and s != "none":
                    v["last_quarter_minus_none"] = v["last_quarter"] - q["none"]["last_quarter"]
                    v["gain_minus_none"] = v["gain"] - q["none"]["gain"]
                if best is not None and s in positional:
                    v["last_quarter_minus_best"] = v["last_quarter"] - q[best]["last_quarter"]
                for name, x in v.items():
                    e = T.estimate(x, d)
                    rows.append(
                        {
                            "kind": kind,
                            "windows": windows,
                            "scheme": s,
                            "seeds": k,
                            "n_windows": n,
                            "quantity": name,
                            **e,
                            "best": best,
                        }
                    )
    return pd.DataFrame(
        rows, columns=["kind", "windows", "scheme", "seeds", "n_windows", "quantity", "mean", "lo", "hi", "best"]
    )


def _pick(est: pd.DataFrame, kind: str, windows: str, scheme: str, quantity: str) -> dict | None:
    hit = est[(est.kind == kind) & (est.windows == windows) & (est.scheme == scheme) & (est.quantity == quantity)]
    return None if hit.empty else hit.iloc[0].to_dict()


def _size(kind: str, results: list[dict]) -> str:
    layers = {r.get("n_layers") for r in results if r["kind"] == kind} - {None}
    return f"{kind} ({'/'.join(str(x) for x in sorted(layers))} layers)" if layers else kind


def text_criteria(results: list[dict], est: pd.DataFrame | None = None) -> pd.DataFrame:
    """The issue's conditions on the natural-text models, each decided on a 95% interval of the
    hierarchical bootstrap over seeds and windows (``text_estimates``): "met" when the whole interval
    is on the right side of the threshold, "not met" when it is wholly on the wrong side, else
    "undecided". On held-out stream windows (position 0 anywhere in a passage) and on windows that
    start at a passage's start (position t = t tokens of the same passage before it)."""
    if isinstance(results, pd.DataFrame):
        raise TypeError("text_criteria takes the runs' results (a list of dicts with per_window losses), not a table")
    est = text_estimates(results) if est is None else est
    cols = ["windows", "model", "condition", "measured (mean [95% interval], seeds x windows)", "met?"]
    rows = []
    if est.empty:
        return pd.DataFrame(columns=cols)

    def row(kind, windows, condition, e, threshold, above):
        rows.append(
            {
                "windows": windows,
                "model": _size(kind, results),
                "condition": condition,
                cols[3]: f"{T.fmt(e)} ({int(e['seeds'])} x {int(e['n_windows'])})",
                "met?": T.verdict(e["lo"], e["hi"], threshold, above),
            }
        )

    for windows in WINDOWS:
        for kind in TEXT_KINDS:
            schemes = [s for s in SCHEMES if _pick(est, kind, windows, s, "gain") is not None]
            for s in schemes:
                cond = f"{s}: last quarter of the context >= {THRESHOLD_GAIN} nats below positions 1-7"
                row(kind, windows, cond, _pick(est, kind, windows, s, "gain"), THRESHOLD_GAIN, True)
            e = next((_pick(est, kind, windows, s, "gain") for s in schemes), None)
            best = e["best"] if e is not None else None
            paired = None if best is None else _pick(est, kind, windows, best, "last_quarter_minus_none")
            if paired is not None:
                cond = (
                    f"best positional scheme ({best}) >= {THRESHOLD_NONE} nats below no positions, last quarter "
                    "(paired: best - none)"
                )
                row(kind, windows, cond, paired, -THRESHOLD_NONE, False)
            sin = _pick(est, kind, windows, "sinusoidal", "last_quarter_minus_best")
            if sin is not None and best != "sinusoidal":
                cond = f"sinusoidal within {THRESHOLD_SINUSOIDAL} nats of the best ({best}), last quarter (paired)"
                row(kind, windows, cond, sin, THRESHOLD_SINUSOIDAL, False)
    return pd.DataFrame(rows, columns=cols)


def text_paired_table(est: pd.DataFrame) -> pd.DataFrame:
    """Paired differences against the no-position model, per kind, windows and scheme."""
    rows = []
    for (kind, windows, scheme), g in est.groupby(["kind", "windows", "scheme"], sort=False):
        by = {q: T.fmt(r) for q, r in zip(g.quantity, g.to_dict("records"))}
        if "last_quarter_minus_none" not in by:
            continue
        rows.append(
            {
                "kind": kind,
                "windows": windows,
                "scheme": scheme,
                "seeds": int(g.seeds.iloc[0]),
                "gain": by["gain"],
                "last quarter - none": by["last_quarter_minus_none"],
                "gain - gain(none)": by["gain_minus_none"],
            }
        )
    return pd.DataFrame(rows)


def gain_by_size_table(
    results: list[dict], est: pd.DataFrame, schemes: Sequence[str] = ("rope", "none")
) -> pd.DataFrame:
    """The context gain (positions 1-7 minus the last quarter) of each scheme at both model sizes, and
    the paired gain difference against no positions, with 95% intervals: one column per size."""
    labels = {}
    for kind in TEXT_KINDS:
        params = {r.get("n_params") for r in results if r["kind"] == kind and r["scheme"] in schemes} - {None}
        labels[kind] = _size(kind, results) + (f", {min(params):,} params" if params else "")
    rows = []
    for windows in WINDOWS:
        wanted = [(s, "gain", s) for s in schemes]
        wanted += [(s, "gain_minus_none", f"{s} - none (paired)") for s in schemes if s != "none"]
        for scheme, quantity, name in wanted:
            row = {"windows": windows, "scheme": name}
            for kind in TEXT_KINDS:
                e = _pick(est, kind, windows, scheme, quantity)
                row[labels[kind]] = "n/a" if e is None else T.fmt(e)
            rows.append(row)
    t = pd.DataFrame(rows)
    return t[[c for c in t.columns if not (t[c] == "n/a").all()]] if len(t) else t


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
    text = _text_claim(results)
    if text is not None:
        rows.append(text)
    return pd.DataFrame(rows, columns=CLAIMS_COLUMNS)


def _text_claim(results: list[dict]) -> dict | None:
    """Natural text, stream windows: the gain (loss at positions 1-7 minus the last quarter of the
    context) per scheme and size with its 95% interval over seeds and windows, each scheme's paired
    gain over the no-position model, and SmolLM2's gain on the same axes (the anchor). The verdict
    of each scheme is ``text_stats.verdict`` on the 0.3-nat threshold (the whole interval above:
    met; wholly below: not met; else undecided)."""
    est = text_estimates(results)
    if est.empty:
        return None
    measured, verdicts = [], []
    for kind in TEXT_KINDS:
        for s in SCHEMES:
            g = _pick(est, kind, "stream", s, "gain")
            if g is None:
                continue
            d = _pick(est, kind, "stream", s, "gain_minus_none")
            size = _size(kind, results)
            measured.append(f"{size} {s} {T.fmt(g)}" + (f" (minus none: {T.fmt(d)})" if d else ""))
            if s != "none":
                verdicts.append(f"{size} {s}: {T.verdict(g['lo'], g['hi'], THRESHOLD_GAIN, True)}")
    anchor = next((r for r in results if r["kind"] == "anchor"), None)
    smol = ((anchor or {}).get("token_frame") or {}).get("gain")
    if smol:
        measured.append(
            f"SmolLM2-135M on the same axes (passage starts, nats per study token) {_est(smol)}, first token left out "
            f"{_est(anchor['token_frame'].get('gain_first_token_zeroed', {}))}"
        )
    return {
        "claim": f"natural text: a model with positions uses its context (loss over the last quarter >= "
        f"{THRESHOLD_GAIN} nats below positions 1-7)",
        "what the seeds say": "(the issue's condition for a model that uses its context; SmolLM2 is the anchor)",
        "what we measured": "; ".join(measured),
        "agrees?": "; ".join(verdicts),
    }


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
    rs = [r for r in _copy_runs(results, "learned") if not math.isnan(_nan(r.get("untrained_rows_change")))]
    cols = _lengths(results)
    if not rs or not cols or all(math.isnan(_nan(r.get(cols[0]))) for r in rs):
        return None
    moved = max(_nan(r["untrained_rows_change"]) for r in rs)
    inside = float(np.mean([_nan(r["acc_train_len"]) for r in rs]))
    past = {c: float(np.nanmean([_nan(r.get(c)) for r in rs])) for c in cols}
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
        + ", ".join(f"{c[4:].replace('x', 'x L')} {spread([_nan(r.get(c)) for r in rs], 3)}" for c in cols)
        + f" (inside L {spread([_nan(r['acc_train_len']) for r in rs], 3)}; chance {chance:.3f})",
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
        worst = max(_nan(r["shift_ratio"]) for r in rs)
        rows.append(
            {
                "scheme": s,
                "seeds": len(rs),
                "shifts": ", ".join(str(x) for x in rs[0].get("shifts", [])),
                "worst change / tolerance": worst,
                "guard / tolerance (min)": min(_nan(r["shift_guard_ratio"]) for r in rs),
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
            f"{s} {spread([_nan(r['shift_deviation_L0']) for r in text if r['scheme'] == s], 3)}"
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


def binned_bands(curve: np.ndarray, d: T.Draws, bin_width: int = 8) -> pd.DataFrame:
    """Mean loss per bin of ``bin_width`` positions with its 95% interval, from per-window curves
    [seeds, windows, positions] and shared bootstrap draws: columns position (bin centre), loss, lo, hi."""
    k, n, length = curve.shape
    edges = np.arange(0, length, bin_width)
    binned = np.stack([np.nanmean(curve[:, :, b : b + bin_width], axis=2) for b in edges], axis=2)
    lo, hi = T.interval(T.boot_means(binned, d))
    centre = (edges + np.minimum(edges + bin_width, length) - 1) / 2  # the mean position in each bin
    return pd.DataFrame({"position": centre, "loss": binned.mean(axis=(0, 1)), "lo": lo, "hi": hi})


def plot_text_bands(
    results: list[dict],
    path: Path,
    windows: str = "stream",
    bin_width: int = 8,
    extra_curves: dict[str, pd.DataFrame] | None = None,
    n_boot: int = 1000,
) -> Path:
    """Held-out loss by position inside the context, bins of ``bin_width`` positions, one line per
    scheme with a 95% band from the hierarchical bootstrap (seeds, then windows; the same draws for
    every scheme); one column of panels per model size. Below, when there is a no-position model,
    each scheme's paired difference to it (same seeds and windows: the shared jitter cancels).
    ``extra_curves``: {label: DataFrame with position and loss (and optionally lo, hi)} drawn on
    every top panel in black (e.g. SmolLM2's anchor curve, ``analyses.positional.anchor``)."""
    plt, sns = _plt()
    kinds = [k for k in TEXT_KINDS if window_arrays(results, k, windows)]
    if not kinds:
        raise ValueError(f"no natural-text result holds per-window losses on {windows!r} windows")
    arrays = {k: window_arrays(results, k, windows) for k in kinds}
    paired = any("none" in a and len(a) > 1 for a in arrays.values())
    fig, axes = plt.subplots(
        1 + paired, len(kinds), figsize=(7.5 * len(kinds), 4.3 * (1 + paired)), squeeze=False, sharey="row"
    )
    colours = dict(zip(SCHEMES, sns.color_palette(n_colors=len(SCHEMES))))
    for col, kind in enumerate(kinds):
        arr = arrays[kind]
        k, n = next(iter(arr.values()))["pos_1_7"].shape
        d = T.draws(k, n, n_boot, seed=0)
        top = axes[0, col]
        for scheme, v in arr.items():
            _band(top, binned_bands(v["curve"], d, bin_width), colours[scheme], scheme)
            if paired and "none" in arr and scheme != "none":
                diff = binned_bands(v["curve"] - arr["none"]["curve"], d, bin_width)
                _band(axes[1, col], diff, colours[scheme], f"{scheme} - none")
        for label, c in (extra_curves or {}).items():
            _band(top, c, "black", label, ls="--")
        seeds = f"{k} seed{'s' if k > 1 else ''}"
        top.set(
            ylabel=f"next-token loss (nats, bins of {bin_width})",
            title=f"{_size(kind, results)}: {seeds} x {n} {windows} windows",
        )
        if paired:
            axes[1, col].axhline(0, color="grey", lw=1)
            axes[1, col].set(ylabel="paired difference to no positions (nats)")
        for ax in axes[:, col]:
            ax.set_xlabel("position in the window (tokens)")
            ax.legend(fontsize=8)
    fig.suptitle("Held-out loss by position inside the context (bands: 95% bootstrap over seeds and windows)")
    fig.tight_layout()
    out = _save(fig, path)
    plt.close(fig)
    return out


def _band(ax, b: pd.DataFrame, colour, label: str, ls: str = "-") -> None:
    """A line (position, loss) with its band (lo, hi) when the table has one."""
    ax.plot(b["position"], b["loss"], color=colour, ls=ls, label=label)
    if {"lo", "hi"} <= set(b.columns):
        ax.fill_between(b["position"], b["lo"], b["hi"], color=colour, alpha=0.2, lw=0)


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
        files.update(_text_report(results, out, tables, anchor))
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


def anchor_table(anchor: dict) -> pd.DataFrame:
    """SmolLM2 and the study's seed-0 models on the same held-out passages, on the study's own token
    axes (``anchor.token_frame``): the gain (loss at positions 1-7 minus the last quarter of the
    context) with its passage-bootstrap interval, its lower bound with SmolLM2's first token left out,
    and the character frame's gain (nats per character)."""
    rows = []
    for name, r in [("SmolLM2-135M", anchor), *anchor.get("study", {}).items()]:
        tf = r.get("token_frame") or {}
        g, z, c = tf.get("gain", {}), tf.get("gain_first_token_zeroed", {}), r.get("gain_per_char", {})
        rows.append(
            {
                "model": name,
                "passages": tf.get("passages", r.get("passages")),
                "loss pos 1-7": g.get("early"),
                "loss last quarter": g.get("late"),
                "gain (nats per study token)": _est(g),
                "gain, first token left out": _est(z),
                "gain (nats per character)": _est(c),
            }
        )
    return pd.DataFrame(rows)


def _est(g: dict) -> str:
    if not g or g.get("gain") is None or math.isnan(float(g["gain"])):
        return "n/a"
    return f"{g['gain']:.3f} [{g['low']:.3f}, {g['high']:.3f}]"


def _anchor_curve(anchor: dict) -> pd.DataFrame:
    """SmolLM2's loss per study token by study-token position (bins), as ``plot_text_bands`` draws it."""
    c = pd.DataFrame(anchor["token_frame"]["curve"])
    return pd.DataFrame({"position": c.position_mid, "loss": c.loss, "lo": c.low, "hi": c.high})


def _text_report(results: list[dict], out: Path, tables: dict, anchor: dict | None = None) -> dict:
    """The natural-text tables (into ``tables``) and figures (SmolLM2's curve, when ``anchor`` holds it,
    on the passage-start figure: the same kind of window); returns name -> path of the files."""
    files = {}
    tables["text"] = text_table(results)
    est = text_estimates(results)
    tables["text_criteria"] = text_criteria(results, est)
    if not est.empty:
        tables["text_paired"] = text_paired_table(est)
        tables["text_gain_by_size"] = gain_by_size_table(results, est)
        files["text_estimates"] = atomic_save(out / "text_estimates.csv", lambda t: est.to_csv(t, index=False))
        for windows in WINDOWS:
            if any(window_arrays(results, k, windows) for k in TEXT_KINDS):
                extra = (
                    {"SmolLM2-135M (its loss per study token)": _anchor_curve(anchor)}
                    if anchor is not None and windows == "passage" and anchor.get("token_frame")
                    else None
                )
                files[f"text_bands_{windows}"] = plot_text_bands(
                    results, out / f"loss_in_context_{windows}.png", windows, extra_curves=extra
                )
    text = [r for r in results if r["kind"] == "text"]
    curves = pd.concat(
        pd.DataFrame(
            {
                "scheme": r["scheme"],
                "seed": r["seed"],
                "position": np.arange(len(r["curve"])),
                "loss": [_nan(x) for x in r["curve"]],
            }
        )
        for r in text
    )
    # heads are not aligned across seeds: the heatmap shows seed 0's (the committed models), the CSV all
    heads = pd.concat(
        pd.DataFrame(r["heads"]).assign(kind=r["kind"], scheme=r["scheme"], seed=r["seed"])
        for r in results
        if r["kind"] in TEXT_KINDS
    )
    first = min(r["seed"] for r in text)
    files["text_curves"] = atomic_save(out / "loss_by_position.csv", lambda t: curves.to_csv(t, index=False))
    files["text_heads"] = atomic_save(out / "heads.csv", lambda t: heads.to_csv(t, index=False))
    n_ctx = int(next((r["n_ctx"] for r in text if "n_ctx" in r), 0)) or None
    mean_curves = curves.groupby(["scheme", "position"], as_index=False).loss.mean()
    files["text_figure"] = plot_loss_by_position(mean_curves, n_ctx or len(curves) // 4, out / "loss_by_position.png")
    seed_heads = heads[(heads.kind == "text") & (heads.seed == first)].drop(columns=["kind", "seed"])
    files["heads_figure"] = plot_heads(seed_heads, out / "heads.png")
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
