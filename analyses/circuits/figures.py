"""The circuits' figures, as PNG bytes: the faithfulness curves (seaborn) and the top circuit as a
layer-ordered graph (networkx for the graph and its layout, matplotlib to draw it; graphviz would
need a system binary)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from analyses.circuits.nodes import INPUT, parse_node
from interp.display import png_bytes

__all__ = ["faithfulness_figure", "circuit_graph", "circuit_figure", "edge_endpoint"]

_COLOURS = {"attribution": "#1f77b4", "eap": "#1f77b4", "eap-ig": "#2ca02c", "random": "#7f7f7f"}


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def faithfulness_figure(curve: pd.DataFrame, title: str = "") -> bytes:
    """Faithfulness against circuit size (proportion of nodes or edges, log axis) per method, one
    panel per ``level`` (node, edge) where the table has that column; random circuits as their mean
    with a band of one standard deviation over draws; f = 0 and f = 1 (the corrupted and the clean
    run) as dashed lines."""
    import seaborn as sns

    plt = _plt()
    if not {"method", "proportion", "faithfulness"} <= set(curve.columns):
        raise ValueError("a faithfulness curve needs columns method, proportion, faithfulness (faithfulness_curve)")
    levels = list(dict.fromkeys(curve["level"])) if "level" in curve.columns else [None]
    fig, axes = plt.subplots(1, len(levels), figsize=(6.0 * len(levels), 3.8), squeeze=False)
    methods = list(dict.fromkeys(curve["method"]))
    palette = {m: _COLOURS.get(m, c) for m, c in zip(methods, sns.color_palette("tab10", len(methods) + 3)[3:])}
    for ax, level in zip(axes[0], levels):
        part = curve if level is None else curve[curve["level"] == level]
        order = [m for m in methods if m in set(part["method"])]
        sns.lineplot(
            data=part, x="proportion", y="faithfulness", hue="method", hue_order=order,
            palette=palette, errorbar="sd", marker="o", ax=ax,
        )  # fmt: skip
        ax.set_xscale("log")
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.axhline(0.0, color="black", lw=0.8, ls=":")
        what = "edges" if level == "edge" else "heads and MLPs"
        ax.set_xlabel(f"circuit size (proportion of {what})")
        ax.set_ylabel("faithfulness f (share of the gap)")
        if level is not None:
            ax.set_title(f"{level} level", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return png_bytes(fig)


_SUFFIX = re.compile(r"^(a\d+\.h\d+|m\d+|input|logits)")


def edge_endpoint(name: str) -> str:
    """The node an edge endpoint belongs to: ``"a5.h1<q>"``, ``"a5.h1.q"`` -> ``"a5.h1"``; a kv
    head's input (``"a5.kv0<k>"``, shared by its query heads) keeps its own name; ``"m3"``,
    ``"input"``, ``"logits"`` as they are."""
    m = _SUFFIX.match(str(name))
    if m:
        return m.group(1)
    return str(name).split("<")[0]


def _position(node: str, n_layers: int, n_heads: int) -> tuple[float, float]:
    if node == INPUT:
        return -1.0, (n_heads - 1) / 2
    if node == "logits":
        return float(n_layers), (n_heads - 1) / 2
    try:
        kind, layer, head = parse_node(node)
    except ValueError:  # another endpoint (a kv head's shared input): beside its layer's heads
        m = re.match(r"^a(\d+)\.kv(\d+)", node)
        layer, head = (int(m.group(1)), int(m.group(2)) - 1.5) if m else (0, -2)
        return layer - 0.3, float(head)
    return (layer + (0.3 if kind == "mlp" else 0.0)), float(n_heads if kind == "mlp" else head)


def circuit_graph(
    nodes: Sequence[str], edges: pd.DataFrame | None = None, n_layers: int | None = None, n_heads: int | None = None
):
    """A networkx DiGraph of a circuit: its nodes with a ``pos`` (x = layer, y = head; MLPs above
    the heads, the input left, the logits right) and, from ``edges`` (columns upstream, downstream,
    score), the edges whose endpoints are both in it. Without edges (None: a node-level run,
    ``interp circuit --no-edges``) the graph has no edges at all, and ``g.graph["edges"]`` says
    "not scored": a node circuit says which components matter, not how they connect, so nothing is
    drawn that could be read as a scored connection. With a scored table it says "scored"."""
    import networkx as nx

    parsed = [parse_node(n) for n in nodes if n != INPUT]
    n_layers = n_layers if n_layers is not None else 1 + max((p[1] for p in parsed), default=0)
    n_heads = n_heads if n_heads is not None else 1 + max((p[2] or 0 for p in parsed), default=0)
    g = nx.DiGraph(edges="not scored" if edges is None else "scored")
    for n in [*nodes, "logits"]:
        g.add_node(n, pos=_position(n, n_layers, n_heads))
    if edges is not None:
        keep = set(g.nodes)
        for r in edges.itertuples():
            u, v = edge_endpoint(r.upstream), edge_endpoint(r.downstream)
            if u in keep and v in keep and u != v:
                g.add_edge(u, v, score=float(r.score))
    return g


def circuit_figure(
    nodes: Sequence[str],
    edges: pd.DataFrame | None = None,
    scores: pd.Series | None = None,
    n_layers: int | None = None,
    n_heads: int | None = None,
    title: str = "",
) -> bytes:
    """The circuit graph drawn layer by layer (left to right): heads as circles, MLPs as squares,
    coloured by score (red positive, blue negative) where ``scores`` has them; edge width by |score|.
    Without ``edges`` the nodes stand alone, under a note that edges were not scored."""
    import networkx as nx

    plt = _plt()
    g = circuit_graph(nodes, edges, n_layers, n_heads)
    pos = nx.get_node_attributes(g, "pos")
    fig, ax = plt.subplots(figsize=(max(5.0, 0.45 * (len({p[0] for p in pos.values()}) + 2)), 4.2))
    w = np.array([abs(d["score"]) for *_, d in g.edges(data=True)], dtype=float)
    widths = 0.5 + 2.5 * w / w.max() if len(w) and w.max() > 0 else 1.0
    nx.draw_networkx_edges(g, pos, ax=ax, width=widths, alpha=0.45, arrows=True, arrowsize=8)
    vmax = float(np.nanmax(np.abs(scores.to_numpy()))) if scores is not None and len(scores) else 1.0
    for shape, kind in (("o", "head"), ("s", "mlp"), ("D", "other")):
        members = [n for n in g.nodes if _kind(n) == kind]
        if not members:
            continue
        colour = [float(scores.get(n, 0.0)) if scores is not None else 0.0 for n in members]
        nx.draw_networkx_nodes(
            g,
            pos,
            nodelist=members,
            node_shape=shape,
            node_color=colour,
            cmap="RdBu_r",
            vmin=-vmax,
            vmax=vmax,
            edgecolors="black",
            linewidths=0.6,
            node_size=260,
            ax=ax,
        )
    nx.draw_networkx_labels(g, pos, font_size=6, ax=ax)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("layer (input left, logits right)")
    ax.set_ylabel("head (MLPs on top)")
    ax.tick_params(left=True, bottom=True, labelleft=True, labelbottom=True)
    if g.graph["edges"] == "not scored":
        title = f"{title}\n" if title else ""
        title += "nodes only: edges not scored (node-level run)"
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return png_bytes(fig)


def _kind(node: str) -> str:
    try:
        kind = parse_node(node)[0]
    except ValueError:
        return "other"
    return kind if kind in ("head", "mlp") else "other"
