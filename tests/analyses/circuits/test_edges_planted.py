"""A planted two-head circuit (hand-set weights): EAP-IG finds its heads and edges first, and the
circuit of those edges recovers the whole clean-corrupted gap while random circuits of the same
size do not.

The model (pre-norm, RMSNorm, learned positions, 2 layers x 4 heads, d_model 40 in five blocks of
8: token, position, S1, S2, junk). Head A = a0.h0 is a previous-token head: its value copies the
token identity into S1. Head B = a1.h0 attends to its own position and copies S1 into S2. The
unembedding reads S2 only. Every other head and both MLPs have random weights that write into the
junk block, which nothing reads (it reaches the logits only through the norms' scale). The task:
the answer at the last position is the token before it; the corrupted prompt changes that token.
So the gap travels along input -> A<v>, A -> B<v>, B -> logits and nowhere else.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import models
from analyses.circuits import Pairs, edge_graph, edge_scores, gap_recovered, node_scores
from analyses.circuits.faithfulness import _readers_of, greedy_edges, top_nodes

V = P = 8  # vocabulary, context (one block of d_model each)
TOK, POS, S1, S2, JUNK = (slice(i * 8, (i + 1) * 8) for i in range(5))
A, B = "a0.h0", "a1.h0"
pytestmark = pytest.mark.usefixtures("one_thread")

CIRCUIT = [("input", "a0.kv0<v>"), ("a0.h0", "a1.kv0<v>"), ("a1.h0", "logits")]  # k/v inputs are per kv head


def planted_circuit_model(seed: int = 0) -> models.Transformer:
    cfg = models.Config(
        d_model=40, n_layers=2, n_heads=4, d_head=8, d_mlp=16, d_vocab=V, n_ctx=P, norm="rmsnorm",
        act="relu", name="planted_circuit",
    )  # fmt: skip
    model = models.Transformer(cfg, seed=seed).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    eye, d = torch.eye(8), cfg.d_head
    with torch.no_grad():
        for p in model.parameters():
            p.zero_() if p.ndim > 1 else None
        model.W_E[:, TOK] = eye  # token t -> e_t in the token block
        model.W_pos[:, POS] = eye  # position i -> e_i in the position block
        for layer, block in enumerate(model.blocks):
            attn = block.attn
            q, k, v, o = attn.q_weight, attn.k_weight, attn.v_weight, attn.o_weight  # HF storage
            # head 0: A (layer 0) attends from i to i-1; B (layer 1) attends to itself
            shift = torch.roll(eye, 1, dims=0) if layer == 0 else eye  # row i -> key i-1 (A) or i (B)
            q[0:d, POS] = 3.0 * shift.T
            k[0:d, POS] = eye
            v[0:d, TOK if layer == 0 else S1] = eye
            o[S1 if layer == 0 else S2, 0:d] = 0.25 * eye if layer == 0 else eye
            for h in range(1, cfg.n_heads):  # distractors: read everything, write junk
                rows = slice(h * d, (h + 1) * d)
                q[rows] = 0.3 * torch.randn(d, 40, generator=gen)
                k[rows] = 0.3 * torch.randn(d, 40, generator=gen)
                v[rows] = 0.3 * torch.randn(d, 40, generator=gen)
                o[JUNK, rows] = 0.1 * torch.randn(8, d, generator=gen)
            block.mlp.in_weight.copy_(0.3 * torch.randn(16, 40, generator=gen))
            block.mlp.out_weight[JUNK] = 0.1 * torch.randn(8, 16, generator=gen)
        model.unembed_weight[:, S2] = 4.0 * eye  # logit t reads S2's t
    return model


def planted_pairs(n: int, seed: int) -> Pairs:
    gen = torch.Generator().manual_seed(seed)
    clean = torch.randint(0, V, (n, 6), generator=gen)
    corrupted = clean.clone()
    corrupted[:, -2] = (clean[:, -2] + torch.randint(1, V, (n,), generator=gen)) % V  # a different token
    return Pairs(clean, corrupted, right=clean[:, -2], wrong=corrupted[:, -2], position=torch.full((n,), 5))


@pytest.fixture(scope="module")
def planted():
    return planted_circuit_model(), planted_pairs(16, seed=1)


def test_the_planted_model_does_the_task(planted):
    model, pairs = planted
    logits = model(pairs.clean)[:, -1]
    assert (logits.argmax(-1) == pairs.right).float().mean() == 1.0
    assert (model(pairs.corrupted)[:, -1].argmax(-1) == pairs.wrong).float().mean() == 1.0


def test_eap_ig_ranks_the_planted_heads_first(planted):
    model, pairs = planted
    nodes = node_scores(model, pairs, method="eap-ig", steps=5, batch_size=16)
    top = nodes.reindex(nodes.score.abs().sort_values(ascending=False).index).node.tolist()
    assert set(top[:2]) == {A, B}, nodes
    # both are needed: the corrupted value of either one turns the answer around
    assert (nodes.set_index("node").score[[A, B]] < 0).all()


def test_eap_ig_ranks_the_planted_edges_first(planted):
    model, pairs = planted
    edges = edge_scores(model, pairs, method="eap-ig", steps=5, batch_size=16)
    ranked = edges.reindex(edges.score.abs().sort_values(ascending=False).index)
    top = list(zip(ranked.upstream, ranked.downstream))
    assert set(top[:3]) == set(CIRCUIT), ranked.head(6)
    between_heads = ranked[(ranked.up_head >= 0) & ranked.down_input.isin(["q", "k", "v"])]
    assert (between_heads.upstream.iloc[0], between_heads.downstream.iloc[0]) == ("a0.h0", "a1.kv0<v>")


def test_the_planted_circuit_recovers_the_gap_and_random_circuits_do_not(planted):
    model, pairs = planted
    assert gap_recovered(model, pairs, edges=CIRCUIT) >= 0.95
    everything = edge_graph(model).edges()
    rng = np.random.default_rng(0)
    random = [
        gap_recovered(model, pairs, edges=[everything[i] for i in rng.choice(len(everything), 3, replace=False)])
        for _ in range(20)
    ]
    assert np.median(random) < 0.5, random
    # node level too: keeping the input, A and B (everything else from the corrupted run) recovers the gap
    assert gap_recovered(model, pairs, nodes=["input", A, B]) >= 0.95
    assert gap_recovered(model, pairs, nodes=["input", "a0.h1", "a1.h2"]) < 0.5


def test_greedy_selection_grows_the_planted_circuit_from_the_logits(planted):
    model, pairs = planted
    edges = edge_scores(model, pairs, method="eap-ig", steps=5, batch_size=16)
    scores = edges.set_index(["upstream", "downstream"]).score
    group = model.cfg.n_heads // model.cfg.kv_heads
    assert greedy_edges(scores, 3, group) == [("a1.h0", "logits"), ("a0.h0", "a1.kv0<v>"), ("input", "a0.kv0<v>")]
    # every edge of a larger greedy circuit reaches the logits through the circuit's own edges
    chosen = greedy_edges(scores, 25, group)
    assert len(chosen) == 25 == len(set(chosen))
    reached = {"logits"}
    for up, down in chosen:  # in the order chosen: each edge's reader was reached before it
        assert down in reached, (up, down)
        reached |= set(_readers_of(up, group))


def test_greedy_selection_skips_edges_nothing_downstream_reads():
    # a big edge into a head's q input that no chosen edge leaves from: top-k takes it, greedy does not
    scores = pd.Series(
        {("a0.h1", "a1.h0<q>"): 9.0, ("a1.h2", "logits"): 5.0, ("a0.h0", "a1.h2<q>"): -2.0, ("m0", "logits"): 1.0}
    )
    assert top_nodes(scores, 2) == [("a0.h1", "a1.h0<q>"), ("a1.h2", "logits")]
    assert greedy_edges(scores, 2, group=2) == [("a1.h2", "logits"), ("a0.h0", "a1.h2<q>")]
    assert greedy_edges(scores, 10, group=2) == [("a1.h2", "logits"), ("a0.h0", "a1.h2<q>"), ("m0", "logits")]
    with pytest.raises(ValueError, match="k >= 0"):
        greedy_edges(scores, -1)
