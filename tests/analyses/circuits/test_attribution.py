"""Node attribution: streamed scores equal one large batch's (fp32: within 1e-5 of the largest
score), EAP-IG with one step is EAP exactly, and bad input is refused clearly."""

from __future__ import annotations

import pytest
import torch

from analyses.circuits import Pairs, edge_scores, node_scores
from tests.factories import TINY, randomized, tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


def _pairs(n: int = 10, pos: int = 7, padded: bool = True) -> Pairs:
    gen = torch.Generator().manual_seed(4)
    clean = torch.randint(0, 50, (n, pos), generator=gen)
    corrupted = clean.clone()
    corrupted[:, 2] = torch.randint(0, 50, (n,), generator=gen)
    position = torch.full((n,), pos - 1)
    mask = None
    if padded:  # the second half is two tokens shorter (right padding)
        mask = torch.ones(n, pos, dtype=torch.long)
        mask[n // 2 :, -2:] = 0
        position[n // 2 :] = pos - 3
    return Pairs(clean, corrupted, right=clean[:, 0], wrong=corrupted[:, 2], position=position, attention_mask=mask)


@pytest.fixture(scope="module")
def model():
    return randomized(tiny_config(name="llama_like", **TINY["llama_like"]), seed=3)


@pytest.mark.parametrize("method", ["eap", "eap-ig"])
def test_streamed_node_scores_equal_one_batch(model, method):
    pairs = _pairs()
    streamed = node_scores(model, pairs, method=method, steps=3, batch_size=3).score
    whole = node_scores(model, pairs, method=method, steps=3, batch_size=len(pairs)).score
    assert whole.abs().max() > 0
    assert (streamed - whole).abs().max() <= 1e-5 * whole.abs().max()


def test_streamed_edge_scores_equal_one_batch(model):
    pairs = _pairs()
    streamed = edge_scores(model, pairs, batch_size=4).score
    whole = edge_scores(model, pairs, batch_size=len(pairs)).score
    assert (streamed - whole).abs().max() <= 1e-5 * whole.abs().max()


def test_one_step_of_eap_ig_is_eap(model):
    pairs = _pairs(6, padded=False)
    eap = node_scores(model, pairs, method="eap").score
    assert torch.equal(
        torch.tensor(eap.values), torch.tensor(node_scores(model, pairs, method="eap-ig", steps=1).score.values)
    )
    assert not torch.equal(
        torch.tensor(eap.values), torch.tensor(node_scores(model, pairs, method="eap-ig", steps=4).score.values)
    )


def test_node_scores_on_an_encoder(model):
    """MiniLM-like (post-norm, no LM head): node level works, with a metric on the hidden state."""
    bert = randomized(tiny_config(name="bert_like", **TINY["bert_like"]), seed=3)
    pairs = _pairs(4, padded=False)
    scores = node_scores(bert, pairs, metric=lambda hidden, p: hidden[:, 0, :4].sum(-1))
    assert len(scores) == bert.cfg.n_layers * (bert.cfg.n_heads + 1) and scores.score.abs().max() > 0


def test_bad_input_is_refused(model):
    pairs = _pairs(4, padded=False)
    with pytest.raises(ValueError, match="method"):
        node_scores(model, pairs, method="acdc")
    with pytest.raises(ValueError, match="steps"):
        node_scores(model, pairs, method="eap-ig", steps=0)
    with pytest.raises(ValueError, match="one number per pair"):
        node_scores(model, pairs, metric=lambda logits, p: logits.sum())
    with pytest.raises(ValueError, match="same shape"):
        Pairs(torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long), [0, 0], [1, 1], [4, 4])
    with pytest.raises(ValueError, match="position"):
        Pairs(torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 5, dtype=torch.long), [0, 0], [1, 1], [4, 5])
    with pytest.raises(ValueError, match="vocabulary"):
        node_scores(model, Pairs(torch.full((1, 3), 99), torch.zeros(1, 3, dtype=torch.long), [0], [1], [2]))
