"""The one node-circuit runner's input rule, pinned on the planted two-head circuit
(``test_edges_planted``): the input belongs to every non-empty circuit, named or not, so every head
and MLP (without ``"input"``) is the clean run (f = 1) and the empty circuit the corrupted run
(f = 0), where CPR puts the curve's ends (MIB's convention, docs/circuits.md). Under the other rule
(the embeddings patched unless ``"input"`` is kept) every head and MLP would be the corrupted run
and the planted pair of heads would recover nothing: each test here would fail."""

from __future__ import annotations

import pytest
import torch

from analyses.circuits import all_nodes, faithfulness_curve, gap_recovered, patch_nodes, run_circuits
from tests.analyses.circuits.test_edges_planted import A, B, planted_circuit_model, planted_pairs

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def planted():
    return planted_circuit_model(), planted_pairs(16, seed=1)


def test_every_head_and_mlp_without_input_is_the_clean_run(planted):
    model, pairs = planted
    runs = run_circuits(model, pairs, {"all": all_nodes(model), "empty": []}, batch_size=5)
    gap = runs.mean["clean"] - runs.mean["corrupted"]
    assert gap > 1  # the planted behaviour
    f_all = (runs.mean["all"] - runs.mean["corrupted"]) / gap
    f_empty = (runs.mean["empty"] - runs.mean["corrupted"]) / gap
    assert f_all == pytest.approx(1.0, abs=1e-5)  # the other rule gives 0 here
    assert f_empty == pytest.approx(0.0, abs=1e-6)
    assert torch.allclose(torch.as_tensor(runs.per_pair["all"]), torch.as_tensor(runs.per_pair["clean"]), atol=1e-5)
    clean, corrupted = model(pairs.clean), model(pairs.corrupted)
    assert (patch_nodes(model, pairs, keep=all_nodes(model)) - clean).abs().max() < 1e-5
    assert (patch_nodes(model, pairs, keep=[]) - corrupted).abs().max() < 1e-5


def test_the_planted_heads_recover_the_gap_with_the_input_unnamed(planted):
    model, pairs = planted
    assert gap_recovered(model, pairs, nodes=[A, B]) >= 0.95  # the other rule: about 0 (A reads the corrupted token)
    assert gap_recovered(model, pairs, nodes=[A, B]) == pytest.approx(
        gap_recovered(model, pairs, nodes=["input", A, B])
    )


def test_the_curve_ends_where_cpr_puts_them(planted):
    model, pairs = planted
    scores = {A: -2.0, B: -1.0}
    curve = faithfulness_curve(model, pairs, scores, proportions=(0.01, 0.2, 1.0), n_random=2)
    ends = curve.groupby("proportion").faithfulness
    assert (curve[curve.proportion == 0.01].k == 0).all()
    assert ends.min()[0.01] == pytest.approx(0.0, abs=1e-6) and ends.max()[0.01] == pytest.approx(0.0, abs=1e-6)
    assert ends.min()[1.0] == pytest.approx(1.0) and ends.max()[1.0] == pytest.approx(1.0)
    assert curve[(curve.method == "attribution") & (curve.proportion == 0.2)].faithfulness.item() >= 0.95
