"""Round three: each claim's measurement. Untrained position rows get exactly no gradient and stay
at their initialisation; the shift check separates relative from absolute schemes; the claims'
verdicts follow from those measurements (and turn when the measurement does)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from analyses.positional import report as R
from analyses.positional import synthetic as S
from analyses.positional.tasks import CopyBackTask
from models.training import TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread")

L = 8


def _copy_spec(table_factor: int = 4, steps: int = 6) -> S.TaskSpec:
    tc = TrainConfig(steps=steps, batch_size=8, lr=1e-2, warmup_steps=1, eval_every=0, weight_decay=0.1)
    return S.TaskSpec(
        CopyBackTask(length=L, k=1, n_symbols=6), tc, d_model=16, n_heads=2, d_mlp=16, table_factor=table_factor
    )


def test_rows_past_the_training_length_get_exactly_zero_gradient():
    spec = _copy_spec()
    model = spec.model("learned", "causal", seed=0)
    assert model.W_pos.shape[0] == 4 * L  # the table is longer than the training sequences
    tokens, targets = spec.task.sample(8, torch.Generator().manual_seed(0))
    S._loss(model, tokens, targets).backward()
    grad = model.W_pos.grad
    assert torch.count_nonzero(grad[L:]) == 0
    assert torch.count_nonzero(grad[:L]) > 0  # the trained rows do get one (the check above can fail)


def test_untrained_rows_stay_at_initialisation_only_without_weight_decay():
    spec = _copy_spec()
    assert spec.no_decay("learned") == ("W_pos",) and spec.no_decay("rope") == ()
    run = S.train_task(spec, "learned", "causal", seed=1)
    init = spec.model("learned", "causal", seed=1).W_pos.detach()
    assert S.untrained_rows_change(spec, run.model, seed=1) == 0.0
    assert torch.equal(run.model.W_pos.detach()[L:], init[L:])
    assert not torch.equal(run.model.W_pos.detach()[:L], init[:L])  # the trained rows moved
    # the same training with W_pos decayed: AdamW's decoupled decay moves the untrained rows although
    # their gradient is zero, which is why the study turns it off for this run
    model = spec.model("learned", "causal", seed=1)
    _, optimizer, _ = S._optimizer(model, spec.train, no_decay=())
    tokens, targets = spec.task.sample(8, torch.Generator().manual_seed(0))
    S._loss(model, tokens, targets).backward()
    optimizer.step()
    assert torch.count_nonzero(model.W_pos.grad[L:]) == 0
    assert not torch.equal(model.W_pos.detach()[L:], init[L:])
    with pytest.raises(ValueError, match="no trainable parameter"):
        S._optimizer(spec.model("rope", "causal", seed=1), spec.train, no_decay=("W_pos",))
    with pytest.raises(ValueError, match="table_factor"):
        dataclasses.replace(spec, table_factor=0).model("learned", "causal", 0)


def test_copy_measure_reads_the_learned_table_as_far_as_it_goes():
    spec = dataclasses.replace(_copy_spec(table_factor=4), extrapolate=(2, 4, 8))
    model = spec.model("learned", "causal", seed=0)
    row, curve = S.copy_measure(spec, model, batch=8)
    assert not torch.isnan(torch.tensor(row["acc_4x"])) and torch.isnan(torch.tensor(row["acc_8x"]))
    assert torch.isnan(torch.tensor(curve[4 * L :])).all() and not torch.isnan(torch.tensor(curve[L : 4 * L])).any()


@pytest.mark.parametrize("scheme,invariant", [("rope", True), ("alibi", True), ("none", True), ("learned", False)])
def test_the_shift_check_separates_relative_from_absolute_schemes(scheme, invariant):
    spec = _copy_spec(table_factor=8)
    model = spec.model(scheme, "causal", seed=2)
    got = S.shift_check(spec, model, shifts=(1, 5))
    assert got["shifts"] == [1, 5]
    assert (got["shift_ratio"] <= R.DISTANCE_TOLERANCE) is invariant
    assert got["shift_guard_ratio"] > R.DISTANCE_TOLERANCE  # the guard moves: the check can fail


def _copy_result(scheme, seed, acc, ratio=0.0, moved=0.0):
    return {
        "kind": "copy_back",
        "scheme": scheme,
        "attention": "causal",
        "seed": seed,
        "acc_train_len": 1.0,
        "acc_2x": acc,
        "acc_4x": acc / 2,
        "untrained_rows_change": moved if scheme == "learned" else None,
        "shift_ratio": ratio,
        "shift_guard_ratio": 1e5,
        "shifts": [1, 8],
        "n_symbols": 16,
        "table_rows": 32,
    }


def _claims(results):
    return R.claims_table(results).set_index("claim")["agrees?"]


def test_verdicts_follow_the_measurement_of_their_claim():
    base = [_copy_result("learned", s, 0.1, ratio=1e6) for s in (0, 1)]
    base += [_copy_result("rope", s, 0.95, ratio=0.02) for s in (0, 1)]
    base += [_copy_result("alibi", s, 0.95) for s in (0, 1)]
    got = _claims(base)
    untrained = next(v for k, v in got.items() if k.startswith("untrained"))
    distance = next(v for k, v in got.items() if k.startswith("distance"))
    extrapolation = next(v for k, v in got.items() if k.startswith("extrapolation"))
    assert untrained.startswith("yes") and distance.startswith("yes")
    assert "yes at 2x L (0.95)" in extrapolation and "no at 4x L (0.47)" in extrapolation  # per length
    # learned positions that still copy on untrained rows: the claim fails
    flipped = _claims([_copy_result("learned", s, 0.9, ratio=1e6) for s in (0, 1)] + base[2:])
    assert next(v for k, v in flipped.items() if k.startswith("untrained")).startswith("no")
    # rows that moved void the measurement
    moved = _claims([_copy_result("learned", 0, 0.1, ratio=1e6, moved=1e-3)] + base[2:])
    assert next(v for k, v in moved.items() if k.startswith("untrained")).startswith("void")
    # a RoPE model whose scores change under a shift refutes the distance claim
    broken = _claims(base[:2] + [_copy_result("rope", 0, 0.95, ratio=3.0)] + base[4:])
    assert next(v for k, v in broken.items() if k.startswith("distance")).startswith("no")
    # and a check that never sees an absolute scheme move could not have failed: it says so
    blind = _claims([_copy_result("learned", s, 0.1, ratio=0.5) for s in (0, 1)] + base[2:])
    assert "could not have failed" in next(v for k, v in blind.items() if k.startswith("distance"))


@pytest.mark.slow
def test_the_anchor_run_measures_smollm2_beside_the_seed0_text_models(tmp_path):
    """One anchor run in the plan; it finds the seed-0 text checkpoint trained under the budget, puts
    SmolLM2 and that model on the same passages, and the report gets its table, figure and claim."""
    from analyses.positional import runs as U

    quick = U.study_budget("quick")
    budget = dataclasses.replace(quick, anchor=U.AnchorSpec(n_passages=3, max_chars=320, n_boot=20))
    assert [r.id for r in U.plan(budget, kinds=("anchor",))] == ["anchor-causal-smollm2-s0"]
    assert U.plan(quick, kinds=("anchor",)) == []  # the quick budget has none
    work, ckpt = tmp_path / "work", tmp_path / "ckpt"
    results = U.run_all(budget, work, ckpt, kinds=("text", "anchor"), schemes=("rope",), progress=False)
    anchor = next(r for r in results if r["kind"] == "anchor")
    assert set(anchor["study"]) == {"rope"}  # the text run's checkpoint, measured on the same passages
    assert anchor["token_frame"]["passages"] == anchor["study"]["rope"]["token_frame"]["passages"] == 3
    files = R.write_report(results, tmp_path / "report")
    table = files["anchor"].read_text()
    assert "SmolLM2-135M" in table and "| rope |" in table
    assert files["anchor_figure"].stat().st_size > 0
    assert (
        "natural text" in files["claims"].read_text() and "SmolLM2-135M on the same axes" in files["claims"].read_text()
    )
