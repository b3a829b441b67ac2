"""EAP-IG's integration path, pinned by IG's completeness (Sundararajan et al. 2017): along the
straight path e(alpha) = e_corrupted + alpha (e_clean - e_corrupted) of the input embeddings,

    integral_0^1 (e_corrupted - e_clean) . grad m(e(alpha)) d alpha = m(corrupted) - m(clean)

exactly (the fundamental theorem of calculus). The edges out of ``input`` read the embeddings, and
the gradient at the embeddings is the sum of the gradients at every reader's copy of the residual,
so the sum of the ``input`` writer's EAP-IG edge scores is the right Riemann sum of that integral
with ``steps`` points. A right sum's error is (f(1) - f(0)) / (2 m) + O(1 / m^2) for a smooth
integrand f; f(1) is EAP's sum (``steps=1``) and f(0) the same at the corrupted run (EAP on the
swapped pairs, negated). With that end correction the error must fall about 4x per doubling of m
and vanish. A path that moves the embeddings by alpha^2 (or any other reparametrisation without
its Jacobian) converges to another number, and the error stops falling. float64 throughout."""

from __future__ import annotations

import pytest
import torch

from analyses.circuits import Pairs, edge_scores, logit_diff, node_scores
from tests.factories import randomized, tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setting():
    # LayerNorm, not RMSNorm: our RMSNorm computes in fp32 whatever the model's dtype (as HF does)
    cfg = tiny_config(name="gqa64", positional="rope", mlp="gated", act="silu", n_kv_heads=2)
    model = randomized(cfg, seed=7).double()
    gen = torch.Generator().manual_seed(2)
    clean = torch.randint(0, 50, (4, 6), generator=gen)
    corrupted = clean.clone()
    corrupted[:, 1:3] = torch.randint(0, 50, (4, 2), generator=gen)
    kw = dict(right=clean[:, 0], wrong=corrupted[:, 1], position=torch.full((4,), 5))
    return model, Pairs(clean, corrupted, **kw), Pairs(corrupted, clean, **kw)


def _input_sum(model, pairs: Pairs, steps: int) -> float:
    """Sum of the ``input`` writer's edge scores: (e_corrupted - e_clean) . mean_k grad m(e(k / m))."""
    table = edge_scores(model, pairs, method="eap-ig", steps=steps, batch_size=len(pairs))
    return float(table.loc[table["upstream"] == "input", "score"].sum())


def test_eap_ig_is_complete_along_the_straight_embedding_path(setting):
    model, pairs, swapped = setting
    with torch.no_grad():
        target = float((logit_diff(model(pairs.corrupted), pairs) - logit_diff(model(pairs.clean), pairs)).mean())
    f1 = _input_sum(model, pairs, 1)  # the integrand at the clean end (EAP)
    f0 = -_input_sum(model, swapped, 1)  # at the corrupted end: EAP from the other side
    assert abs(f1 - f0) > 10 * abs(target), "a nearly linear integrand would not tell paths apart"
    errors = {m: _input_sum(model, pairs, m) - (f1 - f0) / (2 * m) - target for m in (32, 64, 128)}
    assert abs(errors[64]) * 3 <= abs(errors[32]) and abs(errors[128]) * 3 <= abs(errors[64]), errors
    assert abs(errors[128]) <= 0.01 * abs(target), (errors, target)


@pytest.mark.parametrize("method", ["eap", "eap-ig"])
def test_each_writers_edges_add_up_to_its_node_score_on_the_same_path(setting, method):
    """Node and edge scores share the path: a writer's edges sum to its node score under EAP-IG too."""
    model, pairs, _ = setting
    nodes = node_scores(model, pairs, method=method, steps=3, batch_size=4).set_index("node").score
    edges = edge_scores(model, pairs, method=method, steps=3, batch_size=4)
    summed = edges.groupby("upstream").score.sum()
    assert nodes.abs().max() > 1e-3
    for node in nodes.index:
        assert abs(summed[node] - nodes[node]) <= 1e-9 * max(1.0, abs(nodes[node])), node
