"""The probe's figures (seaborn, as PNG bytes): per-role heatmaps, the role map with its sink layer,
the norm lens beside attention weight, and token-level example patterns. ``analyses.heads.report``
writes them into the report's folder."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analyses.heads.roles import IDLE, NOOP_IDLE, READING_ROLES, READINGS, RETRIEVAL_THRESHOLD, ROLES, SINK_WRITER
from interp.display import figure_label, png_bytes

__all__ = ["role_colours", "role_grid", "heatmap_figure", "role_map_figure", "lens_figure", "pattern_figure"]

# the idle kinds and unclassified: greys (a sink writer the darkest: it moves something), never a tab20 hue
FIXED_COLOURS = {SINK_WRITER: "#8f8f8f", NOOP_IDLE: "#cfcfcf", IDLE: "#b0b0b0", "unclassified": "#ededed"}


def role_colours(roles: Sequence[str]) -> dict[str, str]:
    """The role map's colours (hex), one for the figure, the page and the explorer: tab20 in the
    order of ``roles``, the idle kinds and unclassified in fixed greys (``FIXED_COLOURS``)."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps["tab20"]
    hued = [r for r in roles if r not in FIXED_COLOURS]
    return {**{r: to_hex(cmap(i % 20)) for i, r in enumerate(hued)}, **FIXED_COLOURS}


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def role_grid(
    df: pd.DataFrame, role: str, value: str = "score", reading: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """[layer, head] best ``value`` over directions, and [layer, head] bool: labelled in some direction.
    ``reading``: only the rows of that reading (``df`` with a ``reading`` column: ``labels.headline``)."""
    L, H = int(df["layer"].max()) + 1, int(df["head"].max()) + 1
    g = df[df["role"] == role]
    if reading is not None:
        g = g[g["reading"] == reading]
    grid = np.full((L, H), np.nan)
    lab = np.zeros((L, H), dtype=bool)
    if not g.empty:
        best = g.groupby(["layer", "head"])[value].max()
        for (l, h), v in best.items():
            grid[int(l), int(h)] = v
        for (l, h), v in g.groupby(["layer", "head"])["label"].any().items():
            lab[int(l), int(h)] = bool(v)
    return grid, lab


def _score_panel(ax, grid: np.ndarray, lab: np.ndarray, title: str, cbar: bool) -> None:
    """One layer x head panel: scores on a fixed 0..1 viridis scale, labelled heads as red dots."""
    import seaborn as sns

    L, H = grid.shape
    sns.heatmap(
        grid,
        ax=ax,
        vmin=0,
        vmax=1,
        cmap="viridis",
        cbar=cbar,
        square=False,
        xticklabels=max(1, H // 6),
        yticklabels=max(1, L // 8),
    )
    ys, xs = np.nonzero(lab)
    ax.scatter(xs + 0.5, ys + 0.5, s=10, c="red", marker="o")
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("head", fontsize=7)
    ax.set_ylabel("layer", fontsize=7)
    ax.tick_params(labelsize=6)


def _panels(df: pd.DataFrame, roles: Sequence[str]) -> list[tuple[str, str | None]]:
    """(role, reading) per heatmap panel: one per role the table has, one per reading it has for the
    roles read both ways (``READING_ROLES``: the predictive and ioi panels where the table has them)."""
    out = []
    for role in [r for r in roles if r in set(df["role"])]:
        if role in READING_ROLES and "reading" in df:
            have = set(df.loc[df["role"] == role, "reading"])
            out += [(role, x) for x in READINGS if x in have]
        else:
            out.append((role, None))
    return out


def heatmap_figure(df: pd.DataFrame, roles: Sequence[str] = ROLES, title: str = "") -> bytes:
    """One seaborn layer x head heatmap per role (best score over directions), one per reading for the
    roles read both ways (``df``: ``labels.headline``'s rows); labelled heads are marked with a dot.
    Returns PNG bytes."""

    plt = _plt()
    panels = _panels(df, roles)
    L, H = int(df["layer"].max()) + 1, int(df["head"].max()) + 1
    ncol = 4
    nrow = int(np.ceil(len(panels) / ncol))
    cell_h = max(2.2, 0.16 * L + 0.8)
    fig, axes = plt.subplots(nrow, ncol, figsize=(ncol * max(2.4, 0.24 * H + 1.0), nrow * cell_h), squeeze=False)
    # fixed spacing: constrained/tight layout re-measures every tick label many times (slow)
    fig.subplots_adjust(left=0.05, right=0.97, bottom=0.06, top=0.92, wspace=0.35, hspace=0.6)
    for i, (ax, (role, reading)) in enumerate(zip(axes.ravel(), panels)):
        # seaborn draws the whole figure inside every heatmap() call (to check tick overlap); with
        # only this panel visible that stays one panel's work instead of growing with the grid
        for other in axes.ravel():
            other.set_visible(other is ax)
        grid, lab = role_grid(df, role, reading=reading)
        metric = df.loc[df["role"] == role, "metric"].iloc[0]
        name = f"{role} ({reading}, {metric})" if reading else f"{role} ({metric})"
        # one shared colour scale (0..1) and one colour bar, drawn with the last panel
        _score_panel(ax, grid, lab, f"{name}; {int(lab.sum())} labelled", cbar=i == len(panels) - 1)
    for ax in axes.ravel()[: len(panels)]:
        ax.set_visible(True)
    if title:
        fig.suptitle(title, fontsize=10)
    return png_bytes(fig)


def role_map_figure(heads_map: pd.DataFrame, title: str = "") -> bytes:
    """Two seaborn layer x head grids side by side. Left, the primary role (``labels.role_map``):
    colour = the role, number = its ceiling-normalised effect in % (``relative``), a dark frame =
    the head holds a sink label. Right, the sink layer: attention on the sink by weight (colour),
    with the norm-weighted value as the number where the norm lens ran. Returns PNG bytes."""
    import seaborn as sns
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch, Rectangle

    plt = _plt()
    cats = list(heads_map["primary"].cat.categories)
    present = [c for c in cats if (heads_map["primary"] == c).any()]
    colour = role_colours(cats)
    L, H = int(heads_map["layer"].max()) + 1, int(heads_map["head"].max()) + 1
    codes = np.full((L, H), np.nan)
    annot = np.full((L, H), "", dtype=object)
    sink_w, sink_n = np.full((L, H), np.nan), np.full((L, H), "", dtype=object)
    framed = []
    rel = heads_map["relative"] if "relative" in heads_map else pd.Series(np.nan, index=heads_map.index)
    for r, x in zip(heads_map.itertuples(), rel):
        codes[r.layer, r.head] = present.index(r.primary)
        annot[r.layer, r.head] = "" if not np.isfinite(x) else f"{100 * x:.0f}"
        if "sink_weight" in heads_map:
            sink_w[r.layer, r.head] = r.sink_weight
            sink_n[r.layer, r.head] = "" if not np.isfinite(r.sink_norm) else f"{100 * r.sink_norm:.0f}"
        if getattr(r, "sink", ""):
            framed.append((r.layer, r.head))
    cell_w = max(0.45 * H, 1.5)
    width, height = 2 * cell_w + 3.4, max(2.5, 0.3 * L + 1.4)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(width, height))
    sns.heatmap(
        codes,
        ax=ax,
        cmap=ListedColormap([colour[c] for c in present]),
        vmin=-0.5,
        vmax=len(present) - 0.5,
        cbar=False,
        annot=annot,
        fmt="",
        annot_kws={"fontsize": 6},
        linewidths=0.3,
        linecolor="white",
    )
    for l, h in framed:
        ax.add_patch(Rectangle((h + 0.06, l + 0.06), 0.88, 0.88, fill=False, edgecolor="#333", lw=1.0))
    if "retrieval_head" in heads_map:  # retrieval heads: a dark triangle in the cell's top-right corner
        from matplotlib.patches import Polygon

        for r in heads_map[heads_map["retrieval_head"]].itertuples():
            h, l = r.head, r.layer
            ax.add_patch(Polygon([(h + 0.6, l), (h + 1, l), (h + 1, l + 0.4)], closed=True, color="#111"))
    sns.heatmap(
        sink_w,
        ax=ax2,
        vmin=0,
        vmax=1,
        cmap="Greys",
        cbar=False,
        annot=sink_n,
        fmt="",
        annot_kws={"fontsize": 5},  # seaborn picks black or white per cell: readable on light and dark grey
        linewidths=0.3,
        linecolor="white",
    )
    left = "primary role (number: % of baseline-to-ceiling)"
    if "retrieval_head" in heads_map:
        left += f"; corner: retrieval > {RETRIEVAL_THRESHOLD:g}"
    for a_, t in ((ax, left), (ax2, "sink: weight (grey), norm (%)")):
        a_.set_xlabel("head")
        a_.set_ylabel("layer")
        a_.tick_params(labelsize=7)
        a_.set_title(t, fontsize=7)
    ax2.legend(
        handles=[Patch(color=colour[c], label=c) for c in present],
        bbox_to_anchor=(1.03, 1),
        loc="upper left",
        fontsize=7,
        frameon=False,
    )
    # margins in inches, not fractions: a fraction of a tall map (SmolLM2: 30 layers) left a blank
    # band above and below it on the index page
    if title:
        fig.suptitle(title, fontsize=9, y=1 - 0.05 / height, va="top")
    fig.subplots_adjust(
        left=0.6 / width, right=1 - 1.9 / width, bottom=0.55 / height, top=1 - 0.5 / height, wspace=0.9 / cell_w
    )
    return png_bytes(fig)


def lens_figure(df: pd.DataFrame, role: str = "delimiter") -> bytes:
    """Two seaborn layer x head heatmaps side by side: ``role``'s score by attention weight and by
    norm weight (dots: labelled under that weighting). Returns PNG bytes."""

    plt = _plt()
    L, H = int(df["layer"].max()) + 1, int(df["head"].max()) + 1
    fig, axes = plt.subplots(1, 2, figsize=(2 * max(2.6, 0.26 * H + 1.2), max(2.2, 0.18 * L + 1.0)))
    for ax, weighting in zip(axes, ("attention", "norm")):
        g = df[(df["role"] == role) & (df["weighting"] == weighting) & (df["source"] == "all")]
        grid, lab = role_grid(g, role)
        _score_panel(ax, grid, lab, f"{role} by {weighting} ({int(lab.sum())} labelled)", cbar=weighting == "norm")
    fig.subplots_adjust(left=0.08, right=0.95, bottom=0.15, top=0.88, wspace=0.3)
    return png_bytes(fig)


def pattern_figure(example: dict) -> bytes:
    """A token-level attention pattern (seaborn heatmap) with the query row boxed and the gold key
    column outlined. Masked (future) positions of a causal model are exactly 0 and show as such."""
    import seaborn as sns
    from matplotlib.patches import Rectangle

    plt = _plt()
    p = np.asarray(example["pattern"])
    toks = [figure_label(t) for t in example["tokens"]]
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
    where = figure_label(f"{example['sentence']!r}: row of {example.get('query_word')!r}")
    ax.set_title(f"{figure_label(example['title'])}\n{where}", fontsize=9)
    ax.tick_params(labelsize=7)
    fig.subplots_adjust(left=0.18, bottom=0.18, right=0.98, top=0.88)
    return png_bytes(fig)
