"""Faithfulness curves and MIB's CPR / CMD: areas of known curves, the exact endpoints (empty circuit =
the corrupted run, full circuit = the clean run), and a planted model whose one carrying head is found."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from analyses.circuits import Pairs
from analyses.circuits.exact import exact_head_effects, exact_patching, rank_agreement
from analyses.circuits.faithfulness import MIB_PROPORTIONS, cmd, cpr, faithfulness_curve, summarise_curve
from analyses.circuits.nodes import INPUT, all_nodes, parse_node, scores_to_series, top_nodes
from analyses.circuits.runner import circuit_metrics, run_circuits
from analyses.validation.planted import planted_model

pytestmark = pytest.mark.usefixtures("one_thread")


def test_cpr_cmd_of_known_curves():
    x = np.array(MIB_PROPORTIONS)
    a = x[0]
    # f = 1 everywhere: the whole area under it, nothing between it and 1
    assert cpr(x, np.ones_like(x)) == pytest.approx(1 - a, abs=1e-12)
    assert cmd(x, np.ones_like(x)) == pytest.approx(0.0, abs=1e-12)
    # f = p (linear: the trapezoids are exact): integral of p from a to 1, and of 1 - p
    assert cpr(x, x) == pytest.approx((1 - a**2) / 2, abs=1e-12)
    assert cmd(x, x) == pytest.approx((1 - a) - (1 - a**2) / 2, abs=1e-12)
    # overshooting counts against CMD: |1 - 1.5| = 0.5 everywhere
    assert cmd(x, np.full_like(x, 1.5)) == pytest.approx(0.5 * (1 - a), abs=1e-12)
    # a hand trapezoid on three points, log axis too
    assert cpr([0.25, 0.5, 1.0], [0.0, 1.0, 1.0]) == pytest.approx(0.25 * 0.5 + 0.5 * 1.0)
    assert cpr([0.25, 0.5, 1.0], [0.0, 1.0, 1.0], log_scale=True) == pytest.approx(np.log(2) * 0.5 + np.log(2))


@pytest.mark.parametrize(
    "x, f", [([0.5, 0.2], [1, 1]), ([0.0, 1.0], [0, 1]), ([0.5, 1.5], [0, 1]), ([0.5], [1]), ([0.1, 1], [1])]
)
def test_bad_curves_are_refused(x, f):
    with pytest.raises(ValueError, match="proportions|curve needs"):
        cpr(x, f)


def _planted_pairs(n: int = 24, length: int = 8, vocab: int = 12, seed: int = 0) -> Pairs:
    """Period-2 sequences whose last token is predicted from the token before it (head A copies it);
    the corrupted prompt changes that token, so its answer is the clean prompt's wrong one."""
    rng = np.random.default_rng(seed)
    clean, corrupted, right, wrong = [], [], [], []
    for _ in range(n):
        a, b, c = rng.choice(vocab, 3, replace=False)
        row = [a if i % 2 == 0 else b for i in range(length)]
        bad = list(row)
        bad[-2] = c
        clean.append(row), corrupted.append(bad), right.append(row[-2]), wrong.append(c)
    t = torch.as_tensor
    pos = torch.full((n,), length - 1)
    return Pairs(t(clean), t(corrupted), t(right), t(wrong), pos)


@pytest.fixture(scope="module")
def planted():
    model, heads = planted_model(n_layers=2, n_heads=8, vocab=12, n_ctx=12)
    return model, heads, _planted_pairs()


def test_empty_circuit_is_the_corrupted_run_and_full_is_clean(planted):
    model, _, pairs = planted
    nodes = all_nodes(model)
    v = circuit_metrics(model, pairs, {"empty": [], "full": [INPUT, *nodes], "no_input": nodes}, batch_size=7)
    assert v["clean"] > 1 and v["corrupted"] < -1  # the planted behaviour, both ways
    assert v["empty"] == v["corrupted"]  # exactly: everything patched from the corrupted run
    assert v["full"] == v["clean"]  # exactly: nothing patched
    assert v["no_input"] == pytest.approx(v["clean"], abs=1e-5)  # every node clean: the input is not read again


def test_streaming_matches_one_batch(planted):
    model, heads, pairs = planted
    circuits = {"a": [INPUT, "a0.h0"], "b": [INPUT, "a0.h1", "m0"]}
    one = circuit_metrics(model, pairs, circuits, batch_size=len(pairs))
    streamed = circuit_metrics(model, pairs, circuits, batch_size=5)
    for k in one:
        assert streamed[k] == pytest.approx(one[k], abs=1e-5)


def test_planted_head_is_found_and_recovers_the_gap(planted):
    model, heads, pairs = planted
    exact = exact_head_effects(model, pairs, batch_size=10)
    a = exact.set_index(["layer", "head"]).loc[heads["A"]]
    assert a["normalised"] < -0.9  # patching A alone removes (almost) the whole gap
    b = exact.set_index(["layer", "head"]).loc[heads["B"]]
    assert abs(b["normalised"]) < 0.05  # the decoy writes nothing
    scores = exact.assign(score=exact["effect"])[["layer", "head", "score"]]
    assert top_nodes(scores_to_series(scores), 1) == ["a0.h0"]
    # pattern labels: A and its decoy B share the attention pattern; label B only (the pattern cannot tell)
    labels = pd.DataFrame(dict(layer=[0, 0], head=[1, 0], label=[True, False], score=[0.9, 0.8]))
    curve = faithfulness_curve(model, pairs, scores, proportions=(0.05, 0.5, 1.0), n_random=20, labels=labels)
    n_nodes = curve.attrs["n_nodes"]
    assert n_nodes == len(all_nodes(model)) == 2 * (8 + 1)
    at = curve[curve.proportion == 0.05]  # int(0.05 * 18) = 0: the empty circuit
    assert (at.k == 0).all() and np.allclose(at.faithfulness, 0.0)
    top = curve[(curve.method == "attribution") & (curve.proportion == 0.5)].faithfulness.item()
    assert top >= 0.95
    rand = curve[(curve.method == "random") & (curve.proportion == 0.5)].faithfulness
    assert len(rand) == 20 and rand.median() < 0.5 < top  # 9 of 18 nodes: about half the draws miss A
    full = curve[curve.proportion == 1.0].faithfulness
    assert np.allclose(full, 1.0)
    summary = summarise_curve(curve).set_index("method")
    assert summary.loc["attribution", "cpr"] > summary.loc["random", "cpr"]
    assert summary.loc["attribution", "cmd"] < summary.loc["random", "cmd"]
    assert summary.loc["random", "draws"] == 20


def test_rank_agreement():
    exact = pd.DataFrame(dict(layer=[0, 0, 1, 1], head=[0, 1, 0, 1], effect=[-3.0, -1.0, 0.5, 2.0]))
    same = pd.DataFrame(dict(layer=[0, 0, 1, 1], head=[0, 1, 0, 1], score=[-30.0, -2.0, 0.7, 9.0]))
    assert rank_agreement(same, exact)[0] == pytest.approx(1.0)
    assert rank_agreement(same.assign(score=-same.score), exact)[0] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match=">= 3 heads"):
        rank_agreement(same.iloc[:2], exact)


def test_nodes_and_pairs_are_checked(planted):
    model, _, pairs = planted
    assert parse_node("a3.h2") == ("head", 3, 2) and parse_node("m4") == ("mlp", 4, None)
    with pytest.raises(ValueError, match="not a node name"):
        parse_node("L3H2")
    with pytest.raises(ValueError, match="does not exist"):
        circuit_metrics(model, pairs, {"x": ["a9.h0"]})
    with pytest.raises(ValueError, match="same shape"):
        Pairs(pairs.clean, pairs.corrupted[:, :-1], pairs.right, pairs.wrong, pairs.position)


def test_per_pair_values_average_to_the_means(planted):
    model, heads, pairs = planted
    runs = run_circuits(model, pairs, {"a": [INPUT, "a0.h0"], "b": ["a0.h1", "m0"]}, batch_size=7)
    for key in ("clean", "corrupted", "a", "b"):
        assert runs.per_pair[key].shape == (len(pairs),)
        assert runs.per_pair[key].mean() == pytest.approx(runs.mean[key], abs=1e-5)
    assert circuit_metrics(model, pairs, {"a": [INPUT, "a0.h0"]}, batch_size=7)["a"] == runs.mean["a"]
    effects = exact_patching(model, pairs, batch_size=10)
    assert effects.per_pair.shape == (len(pairs), len(effects.table))
    assert np.allclose(effects.per_pair.mean(0), effects.table["effect"], atol=1e-5)
    assert np.allclose(effects.clean.mean(), effects.table.attrs["clean"], atol=1e-5)
    a = list(zip(effects.table["layer"], effects.table["head"])).index(heads["A"])
    assert (effects.per_pair[:, a] < 0).all()  # head A carries the behaviour on every pair
    scores = effects.table.assign(score=effects.table["effect"])[["layer", "head", "score"]]
    curve, per = faithfulness_curve(model, pairs, scores, proportions=(0.05, 0.5, 1.0), n_random=3, per_pair=True)
    assert per.shape == (len(curve), len(pairs))
    assert np.allclose(per.mean(1), curve.faithfulness, atol=1e-5)
