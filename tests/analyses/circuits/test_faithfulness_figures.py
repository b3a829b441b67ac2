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
    # a node circuit (no edges): every node joined to the logits
    assert set(circuit_graph(nodes).edges) == {(n, "logits") for n in nodes[1:]}
    png = circuit_figure(nodes, edges, scores=pd.Series({"a0.h1": 1.0, "a2.h0": -0.5}), n_layers=3, n_heads=4)
    assert png[:4] == b"\x89PNG"


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
