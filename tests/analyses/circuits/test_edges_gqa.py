"""Edge scores under grouped-query attention, checked against exact edge patching: the EAP score of
an edge is the derivative of the metric when that one edge is moved from its clean towards its
corrupted writer output (``patch_edges(patch=[edge], scale=s)`` at s = 0), so a central finite
difference of exact single-edge patching must equal it (float64, relative 1e-6). The edge into a
kv head's k or v input is one edge whose patch reaches every query head of the group. And each
writer's edges add up to its node score (the residual is a sum: the gradient at a writer's output
is the sum of the gradients at the inputs of the readers after it)."""

from __future__ import annotations

import pytest
import torch

from analyses.circuits import Pairs, edge_graph, edge_scores, logit_diff, node_scores, patch_edges, patch_nodes
from tests.factories import TINY, randomized, tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def gqa():
    # Llama-like GQA (RoPE, gated MLP, 4 query heads over 2 kv heads) but LayerNorm: our RMSNorm computes
    # in fp32 whatever the model's dtype (as Hugging Face does), which would spoil a float64 derivative
    cfg = tiny_config(name="gqa64", positional="rope", mlp="gated", act="silu", n_kv_heads=2)
    model = randomized(cfg, seed=7).double()
    assert (model.cfg.n_heads, model.cfg.kv_heads) == (4, 2)
    gen = torch.Generator().manual_seed(2)
    clean = torch.randint(0, 50, (4, 6), generator=gen)
    corrupted = clean.clone()
    corrupted[:, 1:3] = torch.randint(0, 50, (4, 2), generator=gen)
    pairs = Pairs(clean, corrupted, right=clean[:, 0], wrong=corrupted[:, 1], position=torch.full((4,), 5))
    return model, pairs, edge_scores(model, pairs, batch_size=4).set_index(["upstream", "downstream"]).score


@pytest.mark.parametrize(
    "edge",
    [
        ("a0.h1", "a1.kv1<k>"),  # a kv head's keys: shared by query heads 2 and 3
        ("input", "a1.kv0<v>"),  # a kv head's values
        ("a0.h3", "a1.h2<q>"),
        ("m0", "a1.kv0<k>"),
        ("a1.h0", "m1"),
        ("input", "a0.kv1<k>"),
        ("m1", "logits"),
    ],
)
def test_an_edge_score_is_the_derivative_of_exact_patching_of_that_edge(gqa, edge):
    model, pairs, scores = gqa
    eps = 1e-5
    up = logit_diff(patch_edges(model, pairs, patch=[edge], scale=eps), pairs).mean()
    down = logit_diff(patch_edges(model, pairs, patch=[edge], scale=-eps), pairs).mean()
    derivative = float(up - down) / (2 * eps)
    score = float(scores[edge])
    assert abs(score) > 1e-4, f"{edge}: a vanishing edge would check nothing ({score})"
    assert abs(derivative - score) <= 1e-6 * max(abs(score), 1e-3), (edge, derivative, score)


def test_patching_a_kv_edge_moves_every_query_head_of_its_group(gqa):
    model, pairs, _ = gqa
    seen = {}

    def keep(x, hook):
        seen.setdefault(hook.name, []).append(x.detach().clone())

    with model.hooks(fwd_hooks=[("blocks.1.attn.hook_attn_scores", keep)]):
        patch_edges(model, pairs, patch=[])
        patch_edges(model, pairs, patch=[("a0.h1", "a1.kv1<k>")])
    _, before, _, after = seen["blocks.1.attn.hook_attn_scores"]  # each patch_edges runs the corrupted prompt first
    finite = before.isfinite()
    moved = (after - before).where(finite, 0).abs().amax(dim=(0, 2, 3))
    assert (moved[:2] < 1e-12).all() and (moved[2:] > 1e-6).all(), moved


def test_each_writers_edges_add_up_to_its_node_score(gqa):
    model, pairs, scores = gqa
    nodes = node_scores(model, pairs, batch_size=4).set_index("node").score
    summed = scores.groupby(level="upstream").sum()
    for node in nodes.index:
        assert abs(summed[node] - nodes[node]) <= 1e-9 * max(1.0, abs(nodes[node])), node


def test_the_graph_has_one_edge_per_kv_head_and_refuses_post_norm():
    model = randomized(tiny_config(name="llama_like", **TINY["llama_like"]), seed=7)
    graph = edge_graph(model)
    readers = [r for r in graph.readers if r.startswith("a1.") and r.endswith("<k>")]
    assert readers == ["a1.kv0<k>", "a1.kv1<k>"]
    # a writer feeds only readers after it
    with pytest.raises(ValueError, match="does not come before"):
        graph.index(("a1.h0", "a1.kv0<k>"))
    bert = randomized(tiny_config(name="bert_like", **TINY["bert_like"]), seed=7)
    with pytest.raises(ValueError, match="post-norm"):
        edge_graph(bert)


def test_keeping_everything_is_the_clean_run_and_nothing_the_corrupted_run(gqa):
    """float64: within 1e-9 of the largest logit (the split path is the same function)."""
    model, pairs, _ = gqa
    clean, corrupted = model(pairs.clean), model(pairs.corrupted)
    bound = 1e-9 * clean.abs().max()
    every_edge, every_node = (
        edge_graph(model).edges(),
        [f"a{l}.h{h}" for l in range(2) for h in range(4)] + ["m0", "m1", "input"],
    )
    assert (patch_edges(model, pairs, keep=every_edge) - clean).abs().max() <= bound
    assert (patch_edges(model, pairs, keep=[]) - corrupted).abs().max() <= bound
    assert (patch_nodes(model, pairs, keep=every_node) - clean).abs().max() <= bound
    assert (patch_nodes(model, pairs, keep=[]) - corrupted).abs().max() <= bound
    # an effect travels only along kept edges: a0.h0's changed output reaches nothing without an edge out
    alone = patch_edges(model, pairs, keep=[("input", "a0.h0<q>")])
    assert (alone - corrupted).abs().max() <= bound
    path = patch_edges(model, pairs, keep=[("input", "a0.h0<q>"), ("a0.h0", "logits")])
    assert (path - corrupted).abs().max() > 1e-6 and (path - clean).abs().max() > 1e-6


def test_bad_circuits_are_refused(gqa):
    model, pairs, _ = gqa
    with pytest.raises(ValueError, match="no downstream reader 'a1.h0<k>'"):
        patch_edges(model, pairs, keep=[("a0.h0", "a1.h0<k>")])  # k inputs are per kv head: a1.kv0<k>
    with pytest.raises(ValueError, match="exactly one"):
        patch_edges(model, pairs, keep=[], patch=[])
    with pytest.raises(ValueError, match="not a node name"):
        patch_nodes(model, pairs, keep=["L0H1"])


def test_stacked_edge_circuits_are_the_circuits_run_one_by_one(gqa):
    """``patch_edges_stacked``: copy c of the stacked run is ``patch_edges(keep=keeps[c])``, within
    float64 rounding (1e-9 of the largest logit), for circuits of every size, the empty and the full
    one included (small ones take the kept writers' side of the sum, large ones the patched writers');
    the edge curve's per-pair rows average to its faithfulness."""
    import numpy as np

    from analyses.circuits.faithfulness import edge_faithfulness_curve
    from analyses.circuits.nodes import random_circuits
    from analyses.circuits.patching import patch_edges_stacked

    model, pairs, scores = gqa
    every = edge_graph(model).edges()
    big = int(0.9 * len(every))  # most writers kept: the correction sums the few patched ones
    keeps = [[], every, *random_circuits(every, 3, 2, seed=1), *random_circuits(every, 20, 2, seed=2),
             *random_circuits(every, big, 2, seed=3)]  # fmt: skip
    n = len(pairs)
    # which side of the sum a reader takes depends on the stack's union of kept (patched) writers: stack
    # the small circuits alone, the large ones alone, and all of them
    for group in (keeps[2:4], keeps[4:6], keeps[6:], keeps):
        stacked = patch_edges_stacked(model, pairs, group)
        assert stacked.shape[0] == len(group) * n
        bound = 1e-9 * stacked.abs().max()
        for c, keep in enumerate(group):
            assert (stacked[c * n : (c + 1) * n] - patch_edges(model, pairs, keep=keep)).abs().max() <= bound, c
    table = scores.reset_index().rename(columns={"score": "score"})
    curve, per_pair = edge_faithfulness_curve(
        model, pairs, {"eap": table}, proportions=(0.05, 0.2, 1.0), n_random=2, batch_size=3, per_pair=True
    )
    assert per_pair.shape == (len(curve), n)
    np.testing.assert_allclose(per_pair.mean(1), curve["faithfulness"].to_numpy(), rtol=1e-9, atol=1e-12)
    full = curve["k"] == curve.attrs["n_nodes"]
    assert np.allclose(per_pair[full.to_numpy()].sum(1), n)  # each pair's share of the gap, summing to 1 on average
