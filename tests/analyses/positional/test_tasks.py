"""The synthetic tasks: labels checked against the rule written out by hand, planted (hand-set)
models that solve each task, and the order task's exact-chance guarantee for order-blind models."""

from __future__ import annotations

import pytest
import torch

import models
from analyses.positional import tasks as T
from tests.factories import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_order_labels_follow_the_rule():
    task = T.OrderTask(length=12, n_fill=5)
    tokens, targets = task.sample(300, _gen())
    assert tokens.shape == targets.shape == (300, 12)
    yes = 0
    for row, target in zip(tokens.tolist(), targets.tolist()):
        assert row[-1] == task.QUERY and row.count(task.A) == 1 and row.count(task.B) == 1
        assert all(t < task.n_fill for t in row[:-1] if t not in (task.A, task.B))
        answer = task.YES if row.index(task.A) < row.index(task.B) else task.NO
        assert target[-1] == answer and set(target[:-1]) == {T.IGNORE}
        yes += answer == task.YES
    assert 100 < yes < 200  # both answers occur, about equally


def test_balanced_order_batch_pairs_each_sequence_with_its_swapped_twin():
    task = T.OrderTask()
    tokens, targets = task.sample(40, _gen(1), balanced=True)
    a, b = tokens[0::2], tokens[1::2]
    swapped = a.clone()
    swapped[a == task.A], swapped[a == task.B] = task.B, task.A
    assert torch.equal(b, swapped)
    assert (targets[0::2, -1] != targets[1::2, -1]).all()  # opposite answers
    assert torch.equal(a.sort(-1).values, b.sort(-1).values)  # same multiset of tokens
    with pytest.raises(ValueError, match="must be even"):
        task.sample(5, _gen(), balanced=True)


def test_copy_back_labels_follow_the_rule():
    task = T.CopyBackTask(length=10, k=3, n_symbols=7)
    tokens, targets = task.sample(20, _gen(), length=25)
    assert tokens.shape == (20, 25) and int(tokens.max()) < 7
    for row, target in zip(tokens.tolist(), targets.tolist()):
        assert target[:3] == [T.IGNORE] * 3
        assert all(target[t] == row[t - 3] for t in range(3, 25))


def test_induction_labels_and_copy_mask_follow_the_rule():
    task = T.InductionTask(length=30, segment=6, d_vocab=40, distinct=True)
    tokens, targets, mask = task.sample_with_mask(50, _gen())
    for row, target, m in zip(tokens.tolist(), targets.tolist(), mask.tolist()):
        assert target[:-1] == row[1:] and target[-1] == T.IGNORE
        masked = [t for t in range(30) if m[t]]
        assert len(masked) == 5 and masked == list(range(masked[0], masked[0] + 5))
        q = masked[0]
        # outside the second copy every token is distinct; the copy repeats an earlier segment
        outside = row[:q] + row[q + 6 :]
        assert len(set(outside)) == len(outside)
        p = row.index(row[q])
        assert p + 6 <= q and row[q : q + 6] == row[p : p + 6]
        # inside the copy, the next token is the one that followed the current token's first occurrence
        assert all(target[t] == row[row.index(row[t]) + 1] for t in masked)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: T.OrderTask(length=2), "at least 3"),
        (lambda: T.CopyBackTask(length=4, k=4), "smaller than length"),
        (lambda: T.InductionTask(length=20, segment=12, d_vocab=40), "do not fit"),
        (lambda: T.InductionTask(length=30, segment=5, d_vocab=20, distinct=True), "vocabulary"),
        (lambda: T.OrderTask(n_fill=0), "n_fill=0"),
    ],
)
def test_bad_task_settings_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# --------------------------------------------------------------------------------------------------
# Planted solutions


def test_planted_order_model_solves_it_through_the_causal_mask_alone():
    task = T.OrderTask()
    tokens, targets = task.sample(1000, _gen(2), balanced=True)
    causal = T.planted_order_model(task, "causal")
    assert causal.cfg.positional == "none"
    assert task.accuracy(causal, tokens, targets) >= 0.99
    # the same weights without the mask: B sees A either way, the answer is always YES
    bidirectional = T.planted_order_model(task, "bidirectional")
    assert task.accuracy(bidirectional, tokens, targets) == 0.5


def test_planted_copy_model_solves_copy_back():
    task = T.CopyBackTask(length=24, k=2, n_symbols=12)
    tokens, targets = task.sample(64, _gen(3))
    acc = task.accuracy_by_position(T.planted_copy_model(task), tokens, targets)
    assert torch.isnan(acc[:2]).all()
    assert float(acc[2:].min()) >= 0.99


def test_planted_induction_model_solves_the_second_copy():
    task = T.InductionTask(length=40, segment=10, d_vocab=48, distinct=True)
    tokens, targets, mask = task.sample_with_mask(64, _gen(4))
    model = T.planted_induction_model(task)
    pred = model(tokens, return_type="logits").argmax(-1)
    assert float((pred == targets)[mask].float().mean()) >= 0.99
    # outside the copy it has nothing to go on: near chance there, which shows the mask is right
    outside = (~mask) & (targets != T.IGNORE)
    assert float((pred == targets)[outside].float().mean()) < 0.2


# --------------------------------------------------------------------------------------------------
# Order-blindness, exactly


def _bidirectional(positional, seed):
    cfg = tiny_config(d_vocab=T.OrderTask().d_vocab, n_ctx=16, attention="bidirectional", positional=positional)
    return models.Transformer(cfg, seed=seed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bidirectional_no_position_model_is_exactly_at_chance(seed):
    """Permutation equivariance: swapping A and B permutes the inputs, the query's output is the
    same, so each twin pair gets one right answer and one wrong one. Exactly 0.5, any weights."""
    task = T.OrderTask()
    tokens, targets = task.sample(400, _gen(seed), balanced=True)
    model = _bidirectional("none", seed)
    with torch.no_grad():  # make the weights large so that the logits differ clearly between pairs
        for p in model.parameters():
            p.mul_(20.0)
    assert task.accuracy(model, tokens, targets) == 0.5
    with torch.no_grad():
        logits = model.double()(tokens, return_type="logits")[:, -1]
    torch.testing.assert_close(logits[0::2], logits[1::2], rtol=0, atol=1e-9)


def test_bidirectional_model_with_positions_answers_twins_differently():
    """The check above can fail: with learned positions the twins are told apart."""
    task = T.OrderTask()
    tokens, _ = task.sample(400, _gen(5), balanced=True)
    model = _bidirectional("learned", 0)
    with torch.no_grad():
        logits = model.double()(tokens, return_type="logits")[:, -1]
    margin = logits[:, task.YES] - logits[:, task.NO]
    assert (margin[0::2] - margin[1::2]).abs().max() > 1e-4
