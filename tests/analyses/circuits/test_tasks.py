"""The circuits' tasks: the model's accuracy is measured first, only solved pairs are kept, the
held-out split is carried through, and a task the model does not solve says so."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from analyses.circuits import Pairs
from analyses.circuits.tasks import TASKS, check_task, circuit_task, task_accuracy
from analyses.validation.planted import planted_model

pytestmark = pytest.mark.usefixtures("one_thread")


def _generator(flip_every: int):
    """Period-2 pairs for the planted model (head A copies the token before the last one); every
    ``flip_every``-th pair has right and wrong swapped, so the model gets exactly those wrong."""

    def make(task, tokenizer, n, seed):
        rng = np.random.default_rng(seed)
        rows, bad, right, wrong = [], [], [], []
        for i in range(n):
            a, b, c = rng.choice(12, 3, replace=False)
            row = [a if j % 2 == 0 else b for j in range(8)]
            other = list(row)
            other[-2] = c
            rows.append(row), bad.append(other)
            r, w = (row[-2], c) if i % flip_every else (c, row[-2])
            right.append(r), wrong.append(w)
        t = torch.as_tensor
        # the generator's held-out flag (what contrastive_pairs returns has one)
        return Pairs(t(rows), t(bad), t(right), t(wrong), torch.full((n,), 7), held_out=t(np.arange(n) % 3 == 0))

    return make


@pytest.fixture(scope="module")
def model():
    m, _ = planted_model(n_layers=1, n_heads=4, vocab=12, n_ctx=12)
    m.tokenizer = object()  # the stand-in generator reads no text; circuit tasks insist on a tokenizer
    return m


def test_accuracy_first_then_only_solved_pairs(model):
    ct = circuit_task(model, "induction", n=40, generator=_generator(flip_every=4), min_pairs=10)
    assert ct.n_generated == 40
    assert ct.accuracy == pytest.approx(0.75)  # every 4th pair is wrong by construction
    assert len(ct.pairs) == 30 and ct.solved
    # the generator's held-out flag survives the filter: rows i % 3 == 0 among the kept rows i % 4 != 0
    kept = [i for i in range(40) if i % 4]
    assert ct.held_out.tolist() == [i % 3 == 0 for i in kept]
    assert len(ct.evaluation) == sum(i % 3 == 0 for i in kept) and len(ct.discovery) + len(ct.evaluation) == 30
    assert torch.equal(ct.evaluation.right, ct.pairs.right[torch.as_tensor(ct.held_out)])


def test_a_task_the_model_does_not_solve_says_so(model):
    table, built = task_accuracy(model, ("induction", "ioi"), n=20, generator=_generator(flip_every=2))
    assert list(table.task) == ["induction", "ioi"]
    assert (table.accuracy == 0.5).all() and not table.solved.any()
    assert "does not show the behaviour" in built["ioi"].why_not()
    few = circuit_task(model, "induction", n=20, generator=_generator(flip_every=100))
    assert few.accuracy > 0.9 and not few.solved and "only 19 pairs solved (need 100)" in few.why_not()


def test_unknown_task_lists_the_known_ones(model):
    with pytest.raises(ValueError, match="unknown task 'bogus'; known tasks: " + ", ".join(TASKS)):
        check_task("bogus")
    with pytest.raises(ValueError, match="known tasks"):
        circuit_task(model, "bogus", generator=_generator(2))


def test_role_labels_take_the_predictive_reading_for_a_causal_model():
    """Issue 35: a task's role heads from a heads table with both readings: the predictive one for a
    causal model (where the task's logit difference is read), the retrospective one for an encoder or
    when asked; an old table (no reading column) is retrospective; the choice is in ``attrs``."""
    from analyses.circuits.run import role_labels
    from tests.analyses.heads.planted_tables import planted_heads

    df = planted_heads()
    got = role_labels(df, "subject_verb")
    assert got.attrs["reading"] == "predictive" and set(got["reading"]) == {"predictive"}
    assert set(zip(got.loc[got["label"], "layer"], got.loc[got["label"], "head"])) == {(0, 0), (1, 1)}
    enc = role_labels(df, "subject_verb", causal=False)
    assert enc.attrs["reading"] == "retrospective"
    assert set(zip(enc.loc[enc["label"], "layer"], enc.loc[enc["label"], "head"])) == {(1, 1)}
    assert role_labels(df, "subject_verb", reading="retrospective").equals(enc)
    old = role_labels(planted_heads(old=True), "subject_verb")
    assert old.attrs["reading"] == "retrospective" and set(old["reading"]) == {"retrospective"}
    ioi = role_labels(df, "ioi")  # the probe's ioi heads join the task's duplicate-token and induction heads
    assert set(ioi.loc[ioi["label"], "role"]) == {"ioi"} and ioi.attrs["reading"] == "predictive"
    induction = role_labels(df.assign(role=df["role"].replace({"previous_token": "induction"})), "induction")
    assert induction.attrs["reading"] == "-"
    with pytest.raises(ValueError, match="reading must be one of"):
        role_labels(df, "subject_verb", reading="both")
