"""Head-probing reports: ``heads.csv``, ``report.md``, a self-contained ``report.html`` (figures
embedded as base64 PNG), seaborn figures, and a cross-model comparison. Every file is written
through ``interp.io.atomic_write``, so a reader never sees half a report."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.heads.probe import head_summary
from analyses.heads.roles import COLUMNS, ROLES
from interp.io import atomic_write, fmt, md_table, png_bytes

__all__ = ["write_csv", "write_report", "write_comparison", "heatmap_figure", "pattern_figure", "role_layers"]

STATS_TEXT = (
    "Each (head, role, direction) is tested with a paired one-sided t-test of the per-sentence score "
    "minus the per-sentence baseline against a minimum effect (margin {margin} of accuracy for "
    "`subject_verb`/`anaphora`, {mass_margin} of attention mass for the mass roles; for `broad` the fixed "
    "threshold {broad} with no margin). Holm-Bonferroni over all {n_tests} tests of the model keeps the "
    "family-wise error rate at or below {alpha}: the chance that this report holds even one false label "
    "is at most {alpha}, whatever the dependence between heads. FWER rather than FDR because a label is "
    "a claim about one specific head that later work (ablations, circuits) acts on. Intervals are 95% "
    "Poisson-bootstrap percentile intervals over sentences ({n_boot} replicates), per head. A head gets "
    "a label only where the Holm-adjusted p <= {alpha}, the interval's lower end is above the baseline, "
    "and (except `broad`) above the same head's score in a randomly initialised model of the same "
    "architecture (`null_score`)."
)


def write_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """``heads.csv`` with the stable column order of ``analyses.heads.COLUMNS`` first."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"heads table lacks columns {missing}; it must have {COLUMNS}")
    cols = COLUMNS + [c for c in df.columns if c not in COLUMNS]
    return atomic_write(path, df[cols].to_csv(index=False, float_format="%.6g"))


# --------------------------------------------------------------------------------------------------
# Figures


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def role_grid(df: pd.DataFrame, role: str, value: str = "score") -> tuple[np.ndarray, np.ndarray]:
    """[layer, head] best ``value`` over directions, and [layer, head] bool: labelled in some direction."""
    L, H = int(df["layer"].max()) + 1, int(df["head"].max()) + 1
    g = df[df["role"] == role]
    grid = np.full((L, H), np.nan)
    lab = np.zeros((L, H), dtype=bool)
    if not g.empty:
        best = g.groupby(["layer", "head"])[value].max()
        for (l, h), v in best.items():
            grid[int(l), int(h)] = v
        for (l, h), v in g.groupby(["layer", "head"])["label"].any().items():
            lab[int(l), int(h)] = bool(v)
    return grid, lab


def heatmap_figure(df: pd.DataFrame, roles: Sequence[str] = ROLES, title: str = "") -> bytes:
    """One seaborn layer x head heatmap per role (best score over directions); labelled heads are
    marked with a dot. Returns PNG bytes."""
    import seaborn as sns

    plt = _plt()
    roles = [r for r in roles if r in set(df["role"])]
    L, H = int(df["layer"].max()) + 1, int(df["head"].max()) + 1
    ncol = 4
    nrow = int(np.ceil(len(roles) / ncol))
    cell_h = max(2.2, 0.16 * L + 0.8)
    fig, axes = plt.subplots(nrow, ncol, figsize=(ncol * max(2.4, 0.24 * H + 1.0), nrow * cell_h), squeeze=False)
    # fixed spacing: constrained/tight layout re-measures every tick label many times (slow)
    fig.subplots_adjust(left=0.05, right=0.97, bottom=0.06, top=0.92, wspace=0.35, hspace=0.6)
    for i, (ax, role) in enumerate(zip(axes.ravel(), roles)):
        # seaborn draws the whole figure inside every heatmap() call (to check tick overlap); with
        # only this panel visible that stays one panel's work instead of growing with the grid
        for other in axes.ravel():
            other.set_visible(other is ax)
        grid, lab = role_grid(df, role)
        # one shared colour scale (0..1) and one colour bar, drawn with the last panel
        sns.heatmap(
            grid,
            ax=ax,
            vmin=0,
            vmax=1,
            cmap="viridis",
            cbar=i == len(roles) - 1,
            square=False,
            xticklabels=max(1, H // 6),
            yticklabels=max(1, L // 8),
        )
        ys, xs = np.nonzero(lab)
        ax.scatter(xs + 0.5, ys + 0.5, s=10, c="red", marker="o")
        metric = df.loc[df["role"] == role, "metric"].iloc[0]
        ax.set_title(f"{role} ({metric}); {int(lab.sum())} labelled", fontsize=8)
        ax.set_xlabel("head", fontsize=7)
        ax.set_ylabel("layer", fontsize=7)
        ax.tick_params(labelsize=6)
    for ax in axes.ravel()[: len(roles)]:
        ax.set_visible(True)
    if title:
        fig.suptitle(title, fontsize=10)
    return png_bytes(fig)


def pattern_figure(example: dict) -> bytes:
    """A token-level attention pattern (seaborn heatmap) with the query row boxed and the gold key
    column outlined. Masked (future) positions of a causal model are exactly 0 and show as such."""
    import seaborn as sns
    from matplotlib.patches import Rectangle

    plt = _plt()
    p = np.asarray(example["pattern"])
    toks = [t.replace("Ġ", "_") for t in example["tokens"]]
    n = len(toks)
    fig, ax = plt.subplots(figsize=(0.45 * n + 2.0, 0.4 * n + 1.2))
    sns.heatmap(
        p,
        ax=ax,
        vmin=0,
        vmax=1,
        cmap="magma",
        xticklabels=toks,
        yticklabels=toks,
        square=True,
        cbar_kws={"shrink": 0.6},
    )
    if example.get("row") is not None:
        ax.add_patch(Rectangle((0, example["row"]), n, 1, fill=False, edgecolor="cyan", lw=2))
    if example.get("col") is not None:
        ax.add_patch(Rectangle((example["col"], 0), 1, n, fill=False, edgecolor="lime", lw=1.5, ls="--"))
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(f"{example['title']}\n{example['sentence']!r}: row of {example.get('query_word')!r}", fontsize=9)
    ax.tick_params(labelsize=7)
    fig.subplots_adjust(left=0.18, bottom=0.18, right=0.98, top=0.88)
    return png_bytes(fig)


# --------------------------------------------------------------------------------------------------
# Tables and text


def fmt3(x) -> str:
    """Scores and accuracies: three decimals."""
    return fmt(x, 3, fixed=True)


def _labelled_table(df: pd.DataFrame) -> pd.DataFrame:
    lab = df[df["label"]].copy()
    lab["role"] = pd.Categorical(lab["role"], ROLES, ordered=True)
    lab = lab.sort_values(["role", "score"], ascending=[True, False])
    return pd.DataFrame(
        {
            "layer": lab["layer"],
            "head": lab["head"],
            "role": lab["role"].astype(str),
            "direction": lab["direction"],
            "metric": lab["metric"],
            "score": lab["score"].map(fmt3),
            "95% CI": [f"[{fmt3(a)}, {fmt3(b)}]" for a, b in zip(lab["ci_low"], lab["ci_high"])],
            "baseline": [f"{fmt3(b)} ({k})" for b, k in zip(lab["baseline"], lab["baseline_kind"])],
            "null": lab["null_score"].map(fmt3),
            "p (Holm)": lab["p_adjusted"].map(lambda p: f"{p:.1e}"),
            "n": lab["n"],
        }
    )


def role_layers(df: pd.DataFrame) -> pd.DataFrame:
    """Per role: how many heads are labelled, in which layers, and their mean relative depth
    (layer / (n_layers - 1), 0 = first layer, 1 = last)."""
    L = int(df["layer"].max()) + 1
    rows = []
    for role in ROLES:
        g = df[(df["role"] == role) & df["label"]].drop_duplicates(["layer", "head"])
        layers = sorted(g["layer"].astype(int))
        rows.append(
            {
                "role": role,
                "heads": len(g),
                "layers": ", ".join(
                    f"{l}x{layers.count(l)}" if layers.count(l) > 1 else str(l) for l in sorted(set(layers))
                ),
                "mean_depth": float(np.mean(layers) / max(L - 1, 1)) if layers else np.nan,
            }
        )
    return pd.DataFrame(rows)


def _data_text(attrs: dict) -> str:
    src = attrs.get("sources", {})
    parts = [
        f"{attrs.get('n_items', '?')} sentences ("
        + ", ".join(f"{k}: {v}" for k, v in attrs.get("relations", {}).items())
        + "), sources "
        + ", ".join(f"{k}: {v}" for k, v in src.items())
        + f"; {attrs.get('n_repeat', 0)} random token sequences of length {attrs.get('repeat_length', '?')} "
        "repeated once (duplicate-token and induction roles)."
    ]
    if "spacy-silver" in src or "spacy" in src:
        parts.append("Subject-verb arcs from spaCy (`en-core-web-sm`) are **silver**, parser output, not gold.")
    if any(str(k).startswith("conllu") for k in src):
        parts.append("CoNLL-U `nsubj` arcs come from the user's treebank (gold as far as the treebank is).")
    if "winobias" in src:
        parts.append("WinoBias anaphora items are gold (hand-annotated).")
    return " ".join(parts)


def write_report(
    df: pd.DataFrame,
    out_dir: str | Path,
    examples: Sequence[dict] = (),
    title: str | None = None,
    command: str | None = None,
) -> dict:
    """Write ``heads.csv``, ``report.md``, ``report.html`` and PNG figures into ``out_dir``.
    ``examples`` come from ``analyses.heads.example_patterns``. Returns {name: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    attrs = dict(df.attrs)
    model = attrs.get("model", str(df["model"].iloc[0]) if len(df) else "model")
    title = title or f"Head roles of {model}"
    paths = {"csv": write_csv(df, out / "heads.csv")}
    figs = {"heatmaps.png": heatmap_figure(df, title=f"{model}: best score per head (red dot: labelled)")}
    for ex in examples:
        figs[f"pattern_{ex['role']}.png"] = pattern_figure(ex)
    for name, png in figs.items():
        paths[name] = atomic_write(out / name, png)

    n_tests = int(df["p_value"].notna().sum())
    stats_text = STATS_TEXT.format(
        margin=attrs.get("margin", "?"),
        mass_margin=attrs.get("mass_margin", "?"),
        broad=0.9,
        n_tests=n_tests,
        alpha=attrs.get("alpha", 0.05),
        n_boot=attrs.get("n_boot", "?"),
    )
    lab = _labelled_table(df)
    layers = role_layers(df)
    summary = head_summary(df)
    unclassified = summary[summary["roles"] == "unclassified"]
    L, H = attrs.get("n_layers", df["layer"].max() + 1), attrs.get("n_heads", df["head"].max() + 1)
    kind = "causal (a token sees only earlier tokens)" if attrs.get("causal") else "bidirectional"
    intro = f"Model `{model}`: {L} layers x {H} heads, {kind}. Seed {attrs.get('seed', '?')}." + (
        f" Command: `{command}`." if command else ""
    )
    null_note = (
        ""
        if attrs.get("null_model")
        else " No randomly initialised null model was run for this model, so `null_score` is empty."
    )
    layer_tbl = layers.assign(mean_depth=layers["mean_depth"].map(fmt3))

    method = (
        "Word-level attention (Clark et al., 2019): attention *to* a word sums over its tokens, *from* "
        "a word averages over them; special tokens are their own columns. `subject_verb` and `anaphora` "
        "score accuracy (the row word's largest weight, self excluded, lands on the gold word) against "
        "the best fixed word offset (and, for anaphora, the nearest preceding candidate noun); the other "
        "roles score attention mass against a head attending uniformly to what it may see. "
        "Bidirectional models are scored in both directions (`direction` column); causal models only "
        "looking back."
    )
    md = [
        f"# {title}\n",
        intro + "\n",
        "## Data\n",
        _data_text(attrs) + "\n",
        "## Method\n",
        method + "\n",
        stats_text + null_note + "\n",
        "## Where the roles live\n",
        md_table(layer_tbl),
        f"{len(unclassified)} of {len(summary)} heads earned no role (unclassified).\n",
        "## Heatmaps\n",
        "![heatmaps](heatmaps.png)\n",
        f"## Labelled heads ({len(lab)} labels)\n",
        md_table(lab),
        "## Example patterns\n",
    ]
    for ex in examples:
        r, c = ex.get("row"), ex.get("col")
        w = float(np.asarray(ex["pattern"])[r, c]) if r is not None and c is not None else float("nan")
        md.append(
            f"**{ex['title']}** on {ex['sentence']!r}: the row of {ex['query_word']!r} puts "
            f"{fmt3(w)} on {ex['gold_word']!r} (token level)."
            + (" The upper triangle is empty: the model is causal." if ex.get("causal") else "")
            + "\n"
        )
        md.append(f"![{ex['role']}](pattern_{ex['role']}.png)\n")
    md.append(
        "## Files\n`heads.csv` holds one row per (layer, head, role, direction) with columns "
        + ", ".join(f"`{c}`" for c in COLUMNS)
        + ".\n"
    )
    paths["report.md"] = atomic_write(out / "report.md", "\n".join(md))

    def img(name):
        return f'<img alt="{name}" src="data:image/png;base64,{base64.b64encode(figs[name]).decode()}"/>'

    def table(t):
        return t.to_html(index=False, escape=True, border=0, classes="t") if not t.empty else "<p><i>(none)</i></p>"

    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{html.escape(intro)}</p>",
        "<h2>Data</h2>",
        f"<p>{html.escape(_data_text(attrs))}</p>",
        "<h2>Method</h2>",
        f"<p>{html.escape(method)}</p><p>{html.escape(stats_text + null_note)}</p>",
        "<h2>Where the roles live</h2>",
        table(layer_tbl),
        f"<p>{len(unclassified)} of {len(summary)} heads earned no role (unclassified).</p>",
        "<h2>Heatmaps</h2>",
        img("heatmaps.png"),
        f"<h2>Labelled heads ({len(lab)} labels)</h2>",
        table(lab),
        "<h2>Example patterns</h2>",
    ]
    for ex in examples:
        body += [f"<h3>{html.escape(ex['title'])}</h3>", img(f"pattern_{ex['role']}.png")]
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>" + html.escape(title) + "</title><style>"
        "body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}img{max-width:100%}"
        "table.t{border-collapse:collapse;font-size:12px}table.t td,table.t th{padding:2px 6px;"
        "border-bottom:1px solid #ddd}</style></head><body>" + "\n".join(body) + "</body></html>"
    )
    paths["report.html"] = atomic_write(out / "report.html", page)
    return paths


def write_comparison(dfs: Mapping[str, pd.DataFrame] | Sequence[pd.DataFrame], out_dir: str | Path) -> Path:
    """``comparison.md``: which roles live in which layers of each model (counts of labelled heads,
    their layers and mean relative depth), e.g. the encoder (minilm) beside the causal LM (smollm2)."""
    if not isinstance(dfs, Mapping):
        dfs = {str(d.attrs.get("model", d["model"].iloc[0])): d for d in dfs}
    if not dfs:
        raise ValueError("write_comparison needs at least one heads table")
    per = {name: role_layers(df).set_index("role") for name, df in dfs.items()}
    names = list(per)
    rows = []
    for role in ROLES:
        row = {"role": role}
        for name in names:
            r = per[name].loc[role]
            row[f"{name} heads"] = int(r["heads"])
            row[f"{name} depth"] = fmt(r["mean_depth"], 2, fixed=True)
            row[f"{name} layers"] = r["layers"] or "-"
        rows.append(row)
    table = pd.DataFrame(rows)
    lines = [
        "# Where head roles live: " + " vs ".join(names) + "\n",
        "Labelled heads per role (Holm-controlled labels, see each model's report), the layers they sit "
        "in (`3x2`: two heads in layer 3) and their mean relative depth (0 = first layer, 1 = last).\n",
        md_table(table),
    ]
    for name, df in dfs.items():
        kind = "causal" if df.attrs.get("causal") else ("bidirectional" if "causal" in df.attrs else "")
        t = per[name]
        present = t[t["heads"] > 0].sort_values("mean_depth")
        if present.empty:
            lines.append(f"- **{name}** ({kind}): no labelled heads.")
            continue
        shallow = ", ".join(f"{r} ({d:.2f})" for r, d in present["mean_depth"].items())
        lines.append(f"- **{name}** ({kind}), roles from shallow to deep: {shallow}.")
    return atomic_write(Path(out_dir) / "comparison.md", "\n".join(lines) + "\n")
