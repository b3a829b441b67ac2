"""One vocabulary: one ``Pairs`` type (the generator's ``PairSet`` is one, with its text), one
logit difference, one task list, and the old names as deprecated aliases that warn."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import analyses.circuits as circuits
import analyses.circuits.faithfulness as faithfulness
from analyses.tasks import TASKS, check_task
from analyses.validation.prompts import PAIR_TASKS, PairSet
from interp.pairs import Pairs, logit_diff


def _pairs(n: int = 6) -> Pairs:
    gen = torch.Generator().manual_seed(0)
    clean = torch.randint(0, 9, (n, 5), generator=gen)
    mask = torch.ones(n, 5, dtype=torch.long)
    mask[0, -1] = 0
    return Pairs(clean, clean.flip(1), clean[:, 0], clean[:, 1], torch.tensor([3] + [4] * (n - 1)), mask,
                 held_out=torch.arange(n) % 2 == 0)  # fmt: skip


def test_one_pair_type_with_its_text():
    base = _pairs()
    texts = [f"t{i}" for i in range(len(base))]
    ps = PairSet(base.clean, base.corrupted, base.right, base.wrong, base.position, base.attention_mask,
                 held_out=base.held_out, task="ioi", attractor=torch.zeros(6, dtype=torch.bool), template=texts,
                 clean_texts=texts, corrupted_texts=texts)  # fmt: skip
    assert isinstance(ps, Pairs) and circuits.Pairs is Pairs
    picked = ps[torch.tensor([4, 1])]
    assert isinstance(picked, PairSet) and picked.clean_texts == ["t4", "t1"] and picked.task == "ioi"
    assert torch.equal(picked.held_out, torch.tensor([True, False]))
    assert ps.subset(np.arange(6) > 3).clean_texts == ["t4", "t5"]
    assert [len(b) for b in ps.batches(4)] == [4, 2] and ps[0:2].template == ["t0", "t1"]
    logits = torch.randn(6, 5, 9, dtype=torch.bfloat16)
    diff = logit_diff(logits, ps)
    assert diff.dtype == torch.float32  # widened before the subtraction
    rows = torch.arange(6)
    want = logits[rows, ps.position].float()[rows, ps.right] - logits[rows, ps.position].float()[rows, ps.wrong]
    assert torch.equal(diff, want) and torch.equal(ps.logit_diff(logits), want)
    with pytest.raises(ValueError, match="padding"):
        Pairs(base.clean, base.corrupted, base.right, base.wrong, torch.full((6,), 4), base.attention_mask)


def test_one_task_list():
    assert PAIR_TASKS is TASKS and circuits.TASKS is TASKS and circuits.check_task is check_task
    with pytest.raises(ValueError, match="unknown task 'sv'; known tasks: " + ", ".join(TASKS)):
        check_task("sv")


def test_old_names_warn():
    p = _pairs()
    with pytest.warns(DeprecationWarning, match="PairBatch"):
        old = circuits.PairBatch(p.clean, p.corrupted, p.attention_mask, p.position, p.right, p.wrong)
    assert isinstance(old, Pairs) and torch.equal(old.position, p.position)
    with pytest.warns(DeprecationWarning, match="as_batch"):
        assert faithfulness.as_batch(p) is p
    with pytest.warns(DeprecationWarning, match="to_pairs"):
        assert faithfulness.to_pairs(p) is p
    with pytest.warns(DeprecationWarning, match="position"):
        assert p.answer_pos is p.position
    with pytest.warns(DeprecationWarning, match="position"):
        assert p.pos is p.position
    with pytest.raises(AttributeError):
        circuits.no_such_name  # noqa: B018
