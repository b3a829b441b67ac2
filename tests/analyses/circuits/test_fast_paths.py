"""The fast paths of faithfulness and exact patching give the straightforward paths' numbers.

``circuit_metrics(fast=True)`` stacks circuits along the batch axis and unembeds only the answer
position; ``exact_head_effects(fast=True)`` patches every head of a layer in one stacked run from
that layer. Both change only how many rows one matmul sees and which logits are computed, so they
agree with one circuit (head) per forward and full logits to float32 rounding: within 1e-5 of the
largest value compared (relative), on a padded batch of a random GQA model and on the planted one.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from analyses.circuits import Pairs
from analyses.circuits.exact import exact_head_effects
from analyses.circuits.nodes import INPUT, all_nodes, random_circuits
from analyses.circuits.runner import STACK_ROWS, circuit_metrics
from analyses.validation.planted import planted_model
from tests.factories import randomized, tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = 1e-5  # relative to the largest |value| compared: float32 rounding of different matmul shapes


def _padded_pairs(n: int = 11, pos: int = 7) -> Pairs:
    gen = torch.Generator().manual_seed(5)
    clean = torch.randint(0, 50, (n, pos), generator=gen)
    corrupted = clean.clone()
    corrupted[:, 1:3] = torch.randint(0, 50, (n, 2), generator=gen)
    mask = torch.ones(n, pos, dtype=torch.long)
    mask[n // 2 :, -2:] = 0  # right padding: the answer moves with it
    position = torch.full((n,), pos - 1)
    position[n // 2 :] = pos - 3
    return Pairs(clean, corrupted, right=clean[:, 0], wrong=corrupted[:, 1], position=position, attention_mask=mask)


@pytest.fixture(scope="module")
def gqa():
    cfg = tiny_config(name="gqa_fast", positional="rope", mlp="gated", act="silu", n_kv_heads=2)
    model = randomized(cfg, seed=11).eval()
    assert model.cfg.n_heads > model.cfg.kv_heads
    return model, _padded_pairs()


def _close(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    scale = max(abs(v) for v in b.values())
    for k in b:
        assert a[k] == pytest.approx(b[k], abs=TOL * scale), k


def test_stacked_circuits_equal_one_circuit_a_forward(gqa):
    model, pairs = gqa
    nodes = all_nodes(model)
    circuits = {f"r{i}": [INPUT, *c] for i, c in enumerate(random_circuits(nodes, 3, 9, seed=1))}
    circuits |= {"empty": [], "heads_only": [n for n in nodes if n.startswith("a")], "no_input": nodes}
    circuits |= {"one": [INPUT, nodes[0]], "full": [INPUT, *nodes]}
    # batches of 4 pairs: 32 circuits a forward, so the 14 circuits share one stacked run per batch
    fast = circuit_metrics(model, pairs, circuits, batch_size=4, fast=True)
    slow = circuit_metrics(model, pairs, circuits, batch_size=4, fast=False)
    _close(fast, slow)
    assert fast["empty"] == pytest.approx(fast["corrupted"], abs=TOL * abs(fast["corrupted"]))
    assert len({round(v, 4) for v in slow.values()}) > 5  # the circuits differ: a real comparison


def test_more_circuits_than_one_stacked_run_holds(gqa):
    model, pairs = gqa
    nodes = all_nodes(model)
    n = STACK_ROWS // 2 + 3  # batch of 2 pairs: 64 circuits a run, so two runs
    circuits = {f"r{i}": [INPUT, *c] for i, c in enumerate(random_circuits(nodes, 2, n, seed=2))}
    fast = circuit_metrics(model, pairs[slice(0, 2)], circuits, batch_size=2, fast=True)
    slow = circuit_metrics(model, pairs[slice(0, 2)], circuits, batch_size=2, fast=False)
    _close(fast, slow)


@pytest.mark.parametrize("which", ["gqa", "planted"])
def test_stacked_exact_patching_equals_head_by_head(gqa, which):
    if which == "gqa":
        model, pairs = gqa
    else:
        model, _ = planted_model(n_layers=2, n_heads=8, vocab=12, n_ctx=12)
        gen = torch.Generator().manual_seed(0)
        clean = torch.randint(0, 12, (6, 8), generator=gen)
        corrupted = clean.clone()
        corrupted[:, -2] = (clean[:, -2] + 1) % 12
        pairs = Pairs(clean, corrupted, right=clean[:, -2], wrong=corrupted[:, -2], position=[7] * 6)
    fast = exact_head_effects(model, pairs, batch_size=4, fast=True)
    slow = exact_head_effects(model, pairs, batch_size=4, fast=False)
    assert fast[["layer", "head"]].equals(slow[["layer", "head"]])
    scale = np.abs(slow["effect"]).max()
    assert scale > 0
    np.testing.assert_allclose(fast["effect"], slow["effect"], rtol=0, atol=TOL * scale)
    assert fast.attrs["clean"] == pytest.approx(slow.attrs["clean"], rel=TOL)
