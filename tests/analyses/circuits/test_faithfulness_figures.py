"""The circuits' figures: the graph is layer-ordered and keeps only edges inside the circuit; the
curve figure is a PNG and refuses a table that is not a curve."""

from __future__ import annotations

import pandas as pd
import pytest

from analyses.circuits.figures import circuit_figure, circuit_graph, edge_endpoint, faithfulness_figure


def test_edge_endpoints_map_to_their_node():
    assert edge_endpoint("a5.h1<q>") == "a5.h1"
    assert edge_endpoint("a5.h1.k") == "a5.h1"
    assert edge_endpoint("m3") == "m3" and edge_endpoint("logits") == "logits" and edge_endpoint("input") == "input"


def test_circuit_graph_is_layer_ordered_and_keeps_inside_edges():
    nodes = ["input", "a0.h1", "m0", "a2.h0"]
    edges = pd.DataFrame(
        dict(
            upstream=["input", "a0.h1", "a0.h1", "a1.h3"],
            downstream=["a0.h1<q>", "a2.h0<v>", "logits", "a2.h0<k>"],
            score=[0.5, 2.0, -1.0, 9.0],
        )
    )
    g = circuit_graph(nodes, edges, n_layers=3, n_heads=4)
    pos = {n: g.nodes[n]["pos"] for n in g.nodes}
    assert pos["input"][0] < pos["a0.h1"][0] < pos["a2.h0"][0] < pos["logits"][0]
    assert pos["m0"][1] == 4  # MLPs above the heads
    assert set(g.edges) == {("input", "a0.h1"), ("a0.h1", "a2.h0"), ("a0.h1", "logits")}  # a1.h3 is outside
    assert g.edges["a0.h1", "a2.h0"]["score"] == 2.0
    assert g.graph["edges"] == "scored"
    png = circuit_figure(nodes, edges, scores=pd.Series({"a0.h1": 1.0, "a2.h0": -0.5}), n_layers=3, n_heads=4)
    assert png[:4] == b"\x89PNG"


def test_a_node_circuit_is_drawn_without_edges(monkeypatch):
    """``interp circuit --no-edges``: no edge was scored, so the graph has none (it used to join every
    node to the logits, which looked like scored edges) and says so; the figure draws no arrow."""
    from matplotlib.patches import FancyArrowPatch

    import analyses.circuits.figures as F

    nodes = ["input", "a0.h1", "m0", "a2.h0"]
    g = circuit_graph(nodes, None, n_layers=3, n_heads=4)
    assert set(g.nodes) == {*nodes, "logits"} and g.number_of_edges() == 0
    assert g.graph["edges"] == "not scored"
    # scored edges of which none lies inside the circuit: still no edge, and not called unscored
    outside = pd.DataFrame(dict(upstream=["a1.h3"], downstream=["a2.h0<k>"], score=[9.0]))
    g = circuit_graph(nodes, outside, n_layers=3, n_heads=4)
    assert g.number_of_edges() == 0 and g.graph["edges"] == "scored"
    drawn = {}

    def keep(fig):
        import matplotlib.pyplot as plt

        ax = fig.axes[0]
        drawn["arrows"] = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
        drawn["title"] = ax.get_title()
        plt.close(fig)
        return b"\x89PNG"

    monkeypatch.setattr(F, "png_bytes", keep)
    circuit_figure(nodes, None, n_layers=3, n_heads=4, title="top circuit: ioi")
    assert drawn["arrows"] == [] and "edges not scored" in drawn["title"]
    one = pd.DataFrame(dict(upstream=["a0.h1"], downstream=["a2.h0<v>"], score=[1.0]))
    circuit_figure(nodes, one, n_layers=3, n_heads=4, title="top circuit: ioi")
    assert len(drawn["arrows"]) == 1 and "not scored" not in drawn["title"]


def test_faithfulness_figure():
    curve = pd.DataFrame(
        dict(
            method=["eap", "eap", "random", "random", "random", "random"],
            proportion=[0.1, 1.0, 0.1, 0.1, 1.0, 1.0],
            faithfulness=[0.8, 1.0, 0.1, 0.3, 1.0, 1.0],
        )
    )
    assert faithfulness_figure(curve, title="t")[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="method, proportion, faithfulness"):
        faithfulness_figure(curve.rename(columns={"faithfulness": "f"}))
