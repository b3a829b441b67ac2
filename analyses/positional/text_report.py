"""The positional study's natural-text tables, criteria and figures (``analyses.positional.report``
writes them beside the synthetic claims'): the gain (loss at positions 1-7 minus the last quarter of
the context) per scheme, size and window kind with bootstrap intervals over seeds and
windows (``text_stats``), paired differences to the no-position model, the issue's criteria decided
on those intervals, the gain against model size, SmolLM2's anchor (``anchor``) beside the study's
models, and the natural-text row of the claims table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

import analyses.positional.text_stats as T
from analyses.positional.common import nan_if_none, pyplot, save_figure, scalars
from analyses.positional.study import SCHEMES, plot_heads, plot_loss_by_position
from interp.io import atomic_save

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
    t = scalars(rs)
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
        arrays = {
            k: np.array([[nan_if_none(x) for x in p[k]] for p in per], dtype=float) for k in ("pos_1_7", "last_quarter")
        }
        curve = np.array([[[nan_if_none(x) for x in row] for row in p["curve"]] for p in per], dtype=float)
        out[scheme] = {"seeds": seeds, **arrays, "curve": curve}
    shapes = {s: v["pos_1_7"].shape for s, v in out.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"{kind} {windows} windows: schemes have different [seeds, windows] shapes {shapes}")
    return out


def text_estimates(results: list[dict], n_boot: int = T.N_BOOT, seed: int = 0) -> pd.DataFrame:
    """Every interval the natural-text criteria need, from the bootstrap over seeds and windows
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
    bootstrap over seeds and windows (``text_estimates``): "met" when the whole interval
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


def text_claim(results: list[dict]) -> dict | None:
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
    scheme with a 95% band from the bootstrap over seeds and windows (crossed; the same draws for
    every scheme); one column of panels per model size. Below, when there is a no-position model,
    each scheme's paired difference to it (same seeds and windows: the shared jitter cancels).
    ``extra_curves``: {label: DataFrame with position and loss (and optionally lo, hi)} drawn on
    every top panel in black (e.g. SmolLM2's anchor curve, ``analyses.positional.anchor``)."""
    plt, sns = pyplot()
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
    out = save_figure(fig, path)
    plt.close(fig)
    return out


def _band(ax, b: pd.DataFrame, colour, label: str, ls: str = "-") -> None:
    """A line (position, loss) with its band (lo, hi) when the table has one."""
    ax.plot(b["position"], b["loss"], color=colour, ls=ls, label=label)
    if {"lo", "hi"} <= set(b.columns):
        ax.fill_between(b["position"], b["lo"], b["hi"], color=colour, alpha=0.2, lw=0)


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


def text_report(results: list[dict], out: Path, tables: dict, anchor: dict | None = None) -> dict:
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
                "loss": [nan_if_none(x) for x in r["curve"]],
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
