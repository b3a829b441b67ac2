"""Tables and figures of the second-round positional study, from the runs' results
(``analyses.positional.runs``): one markdown table and one figure per claim, the claims table,
a CSV of every run. Everything is written atomically into one folder (``docs/positional_study``),
so ``docs/positional.md`` can include the numbers mechanically.

Spreads over seeds are written "mean [min, max]" (n seeds): with three seeds the range says more
than a standard deviation would.
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


def induction_table(results: list[dict]) -> pd.DataFrame:
    rows = []
    for s in SCHEMES:
        rs = [r for r in results if r["kind"] == "induction" and r["scheme"] == s]
        if not rs:
            continue
        formed = [_nan(r["step_score_formed"]) for r in rs]
        rows.append(
            {
                "scheme": s,
                "seeds with a head formed": f"{sum(not math.isnan(x) for x in formed)}/{len(rs)}",
                "step: induction score > 0.3": spread(formed, 0),
                "step: second-copy loss < ln(V)/2": spread([_nan(r["step_loss_formed"]) for r in rs], 0),
                "final induction score": spread([_nan(r["induction_score"]) for r in rs], 3),
                "final previous-token score": spread([_nan(r["prev_token_score"]) for r in rs], 3),
                "final loss, second copy": spread([_nan(r["copy_loss"]) for r in rs], 3),
                "final loss, elsewhere": spread([_nan(r["other_loss"]) for r in rs], 3),
            }
        )
    return pd.DataFrame(rows)


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
    """One row per claim: what the seeds (or the issue) say, what the runs measured for that claim,
    whether it agrees. Each verdict is computed by the rule written in its function, from the
    measurement of the claim it names, not by hand."""
    rows = []
    for claim in (_order_claim, _untrained_claim, _distance_claim, _extrapolation_claim):
        row = claim(results)
        if row is not None:
            rows.append(row)
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


def _formation_verdict(ind: pd.DataFrame) -> str:
    """Which schemes formed an induction head in every seed, in some, in none."""
    groups: dict[str, list[str]] = {"every seed": [], "some seeds": [], "no seed": []}
    for _, row in ind.iterrows():
        formed, total = (int(x) for x in row["seeds with a head formed"].split("/"))
        key = "every seed" if formed == total else "no seed" if formed == 0 else "some seeds"
        groups[key].append(row["scheme"])
    return "; ".join(f"{k}: {', '.join(v)}" for k, v in groups.items() if v)


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
    plt, sns = _plt()
    frames = []
    for r in results:
        if r["kind"] == "induction":
            h = pd.DataFrame(r["history"])
            frames.append(h.assign(scheme=r["scheme"], seed=r["seed"]))
    t = pd.concat(frames)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, col, title in (
        (axes[0], "induction_score", "best induction score"),
        (axes[1], "copy_loss", "loss on the second copy (nats)"),
    ):
        sns.lineplot(data=t, x="step", y=col, hue="scheme", hue_order=list(SCHEMES), errorbar=("pi", 100), ax=ax)
        ax.set_title(title)
    axes[0].axhline(0.3, color="grey", ls="--", lw=1)
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
