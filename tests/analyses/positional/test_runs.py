"""The second-round study's machinery: training on a task resumes bit-identically, attention-only
models stay attention-only, formation steps, the resumable run list, the report's tables."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import numpy as np
import pytest
import torch

from analyses.positional import report as R
from analyses.positional import runs as U
from analyses.positional import synthetic as S
from analyses.positional.tasks import CopyBackTask, InductionTask, OrderTask
from models.training import TrainConfig
from tests.factories import tiny_text_budget

pytestmark = pytest.mark.usefixtures("one_thread")


def _spec(task=None, steps=12, d_mlp=32, checkpoint_every=5):
    tc = TrainConfig(
        steps=steps, batch_size=8, lr=3e-3, warmup_steps=2, eval_every=4, checkpoint_every=checkpoint_every
    )
    return S.TaskSpec(task or OrderTask(length=8, n_fill=4), tc, d_model=16, n_layers=2, n_heads=2, d_mlp=d_mlp)


def test_task_training_resumes_bit_identically(tmp_path):
    spec = _spec()

    def ev(model, step):
        return S.order_measure(spec.task, model, n_pairs=8)

    straight = S.train_task(spec, "rope", "causal", seed=3, evaluate=ev)
    state = tmp_path / "state.pt"
    S.train_task(spec, "rope", "causal", seed=3, evaluate=ev, state_path=state, stop_at=7)  # interrupted
    assert state.exists() and torch.load(state, weights_only=True)["step"] == 7  # tensors and plain data only
    resumed = S.train_task(spec, "rope", "causal", seed=3, evaluate=ev, state_path=state)
    for (name, a), (_, b) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(a, b), name
    assert resumed.history == straight.history
    # and a different seed gives different weights (the comparison above can fail)
    other = S.train_task(spec, "rope", "causal", seed=4)
    assert not torch.equal(other.model.W_E, straight.model.W_E)


class _Planted:
    """What an attacker plants in a resume state: unpickling it would create ``path``."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_planted_resume_state_runs_no_code_and_is_refused(tmp_path):
    spec = _spec()
    state = tmp_path / "state.pt"
    S.train_task(spec, "rope", "causal", seed=3, state_path=state, stop_at=5)  # a real interrupted run
    planted = torch.load(state, weights_only=True)
    marker = tmp_path / "code_ran"
    planted["step"] = _Planted(marker)
    torch.save(planted, state)
    with pytest.raises(ValueError, match=r"state\.pt.*tensors and plain data") as err:
        S.train_task(spec, "rope", "causal", seed=3, state_path=state)
    assert not marker.exists()  # the object was never rebuilt: nothing it names ran
    assert "\n" not in str(err.value)  # one line
    assert state.exists()  # the toolkit refuses the file; it does not delete it


def test_attention_only_models_write_nothing_from_their_mlps():
    spec = _spec(InductionTask(length=16, segment=4, d_vocab=16), d_mlp=0, steps=6)
    run = S.train_task(spec, "alibi", "causal", seed=0)
    tokens, _ = spec.task.sample(4, torch.Generator().manual_seed(0))
    _, cache = run.model.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_mlp_out"))
    for name, value in cache.items():
        assert torch.count_nonzero(value) == 0, name
    assert run.history[-1]["loss"] is not None  # it did train: the attention changed
    fresh = spec.model("alibi", "causal", seed=0)
    assert not torch.equal(fresh.blocks[0].attn.q_weight, run.model.blocks[0].attn.q_weight)


def test_sinusoidal_task_models_scale_their_embeddings():
    spec = _spec()
    assert spec.model("sinusoidal", "causal", 0).cfg.embed_scale == pytest.approx(50.0)
    assert spec.model("rope", "causal", 0).cfg.embed_scale == 1.0


def test_formation_step_is_the_first_step_that_stays_past_the_threshold():
    hist = [{"step": s, "x": v} for s, v in [(0, 0.0), (10, 0.5), (20, 0.1), (30, 0.4), (40, 0.6)]]
    assert S.formation_step(hist, "x", above=0.3) == 30  # 10 crossed but fell back
    assert math.isnan(S.formation_step(hist, "x", below=0.45))  # the last value (0.6) is above again
    assert S.formation_step(hist, "x", below=0.65) == 0
    assert math.isnan(S.formation_step(hist, "x", above=0.7))


def test_copy_measure_reports_learned_positions_past_the_context_as_missing():
    spec = S.TaskSpec(
        CopyBackTask(length=8, k=1, n_symbols=6),
        TrainConfig(steps=2, batch_size=4, warmup_steps=1),
        d_model=16,
        n_heads=2,
        d_mlp=16,
        extrapolate=(2, 4),
    )
    row, curve = S.copy_measure(spec, spec.model("learned", "causal", 0), batch=8)
    assert curve.shape == (32,) and np.isnan(curve[8:]).all() and np.isfinite(curve[1:8]).all()
    assert math.isnan(row["acc_2x"]) and 0 <= row["acc_train_len"] <= 1
    row, curve = S.copy_measure(spec, spec.model("alibi", "causal", 0), batch=8)
    assert np.isfinite(curve[1:]).all() and 0 <= row["acc_4x"] <= 1


# --------------------------------------------------------------------------------------------------
# The run list


TINY = U.StudyBudget(
    name="test",
    text=U.BUDGETS["quick"],
    order=_spec(steps=4),
    copy_back=S.TaskSpec(
        CopyBackTask(length=8, k=1, n_symbols=6),
        TrainConfig(steps=4, batch_size=4, warmup_steps=1, eval_every=2),
        d_model=16,
        n_heads=2,
        d_mlp=16,
        extrapolate=(2,),
    ),
    induction=_spec(InductionTask(length=12, segment=3, d_vocab=12), d_mlp=0, steps=4),
    seeds=(0, 1),
)


def test_plan_covers_every_scheme_seed_and_attention():
    runs = U.plan(TINY, kinds=("order", "copy_back"), schemes=("rope", "none"))
    ids = {r.id for r in runs}
    assert len(runs) == len(ids) == 2 * 2 * 2 + 2 * 2
    assert "order-bidirectional-none-s1" in ids and "copy_back-causal-rope-s0" in ids
    with pytest.raises(ValueError, match="positional scheme"):
        U.plan(TINY, schemes=("relative",))
    with pytest.raises(ValueError, match="run kind"):
        U.plan(TINY, kinds=("sorting",))


def test_finished_runs_are_skipped_and_stale_ones_rerun(tmp_path):
    kinds, schemes = ("order", "copy_back", "induction"), ("alibi", "none")
    results = U.run_all(TINY, tmp_path, kinds=kinds, schemes=schemes, progress=False)
    assert len(results) == 2 * 2 * 2 + 2 * 2 + 2 * 2
    assert not list((tmp_path / "state").glob("*.pt"))  # state files are removed once a run is done
    # mark one stored result: a second call must return it as stored (skipped, not retrained)
    path = tmp_path / "results" / "order-causal-none-s0.json"
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "accuracy": 0.123}))
    again = {r["id"]: r for r in U.run_all(TINY, tmp_path, kinds=kinds, schemes=schemes, progress=False)}
    assert again["order-causal-none-s0"]["accuracy"] == 0.123
    # a result from another budget is stale: the run is redone
    path.write_text(json.dumps({**stored, "accuracy": 0.123, "signature": "other"}))
    redone = {r["id"]: r for r in U.run_all(TINY, tmp_path, kinds=kinds, schemes=schemes, progress=False)}
    assert redone["order-causal-none-s0"]["accuracy"] == stored["accuracy"]
    # the bidirectional no-position runs sit exactly at chance, whatever they learned
    for seed in (0, 1):
        assert redone[f"order-bidirectional-none-s{seed}"]["accuracy"] == 0.5

    files = R.write_report(list(redone.values()), tmp_path / "report", copy_train_len=8)
    for name in ("runs", "claims", "order", "extrapolation", "induction", "order_figure", "induction_figure"):
        assert files[name].exists() and files[name].stat().st_size > 0
    claims = files["claims"].read_text()
    assert "exactly chance" in claims
    with pytest.raises(ValueError, match="jobs"):
        U.run_all(TINY, tmp_path, jobs=0, progress=False)


def test_execute_runs_on_one_thread_and_restores_the_callers_count(tmp_path, monkeypatch):
    seen = []
    real = S.train_task

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(S, "train_task", recording)
    run = U.Run("order", "none", "causal", 0)
    torch.set_num_threads(2)  # the one_thread fixture restores the session's count afterwards
    U.execute(run, TINY, tmp_path)
    assert seen == [1] and torch.get_num_threads() == 2
    # and when the run fails half-way
    monkeypatch.setattr(S, "train_task", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("disk full")))
    with pytest.raises(RuntimeError, match="disk full"):
        U.execute(U.Run("order", "rope", "causal", 0), TINY, tmp_path)
    assert torch.get_num_threads() == 2


def test_spread():
    assert R.spread([0.5, 0.7, 0.6]) == "0.60 [0.50, 0.70]"
    assert R.spread([float("nan"), None]) == "n/a"
    assert R.spread([0.25]) == "0.25"


def test_fill_doc_replaces_only_the_marked_blocks(tmp_path):
    study = tmp_path / "study"
    study.mkdir()
    (study / "order.md").write_text("| a |\n|---|\n| 1 |\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "intro\n<!-- begin order.md -->\nold numbers\n<!-- end order.md -->\nmiddle\n"
        "<!-- begin induction.md -->\n(placeholder)\n<!-- end induction.md -->\nend\n"
    )
    assert R.fill_doc(doc, study) == ["order.md"]
    text = doc.read_text()
    assert "old numbers" not in text and "| a |\n|---|\n| 1 |" in text
    assert "(placeholder)" in text and text.startswith("intro\n") and text.endswith("end\n")
    assert R.fill_doc(doc, study) == ["order.md"] and doc.read_text() == text  # idempotent


def test_a_text_run_counts_as_done_only_with_its_checkpoint(tmp_path):
    text = _tiny_text()
    budget = dataclasses.replace(TINY, text=text)
    ckpt = tmp_path / "ckpt"
    first = U.run_all(budget, tmp_path / "work", ckpt, kinds=("text",), schemes=("alibi",), progress=False)
    assert (ckpt / "alibi" / "model.safetensors").exists() and (ckpt / "alibi" / "MODEL_CARD.md").exists()
    assert len(first[0]["curve"]) == 4 * 32 - 1 and math.isfinite(first[0]["loss_pos_1_7"])
    shutil.rmtree(ckpt / "alibi")  # the result stays, the checkpoint is gone: the run is redone
    again = U.run_all(budget, tmp_path / "work", ckpt, kinds=("text",), schemes=("alibi",), progress=False)
    assert (ckpt / "alibi" / "model.safetensors").exists()
    assert again[0]["heldout_loss"] == first[0]["heldout_loss"]  # and it trains the same model again


def _tiny_text(**kw):
    return tiny_text_budget(**kw)


def test_text_seeds_and_sizes_train_apart_and_report_with_intervals(tmp_path):
    text = _tiny_text()
    budget = dataclasses.replace(
        TINY, text=text, text_large=_tiny_text(name="test-text-large", n_layers=2), large_schemes=("rope", "none")
    )
    assert budget.signature("text", 0) == text.signature()  # seed 0 is the budget itself
    assert budget.signature("text", 1) != text.signature() and budget.signature("order", 1) == budget.signature("order")
    ckpt, work = tmp_path / "ckpt", tmp_path / "work"
    results = U.run_all(budget, work, ckpt, kinds=("text", "text_large"), schemes=("rope", "none"), progress=False)
    by = {r["id"]: r for r in results}
    assert len(by) == 2 * 2 * 2  # 2 sizes x 2 schemes x 2 seeds
    # seed 0 of the small size goes to the committed folder, everything else under the work folder
    assert sorted(p.name for p in ckpt.iterdir()) == ["none", "rope"]
    assert sorted(p.name for p in (work / "checkpoints").iterdir()) == sorted(
        i for i in by if not i.startswith("text-causal-") or i.endswith("s1")
    )
    # the seed drives initial weights and batch order: another model, another history
    s0, s1 = by["text-causal-rope-s0"], by["text-causal-rope-s1"]
    assert s0["history"][0]["train_loss"] != s1["history"][0]["train_loss"]
    assert s0["n_layers"] == 1 and by["text_large-causal-rope-s0"]["n_layers"] == 2
    # per-window losses: the same held-out windows for every run, consistent with the means
    pw = s0["per_window"]["stream"]
    assert pw["n"] == len(pw["pos_1_7"]) == len(pw["curve"]) and len(pw["curve"][0]) == 31
    assert np.mean(pw["pos_1_7"]) == pytest.approx(np.mean(np.array(pw["curve"])[:, 1:8]), abs=1e-4)
    assert {r["per_window"]["passage"]["n"] for r in results} == {s0["per_window"]["passage"]["n"]}

    files = R.write_report(results, tmp_path / "report")
    for name in ("text_criteria", "text_paired", "text_gain_by_size", "text_bands_stream", "text_bands_passage"):
        assert files[name].exists() and files[name].stat().st_size > 0, name
    gain = files["text_gain_by_size"].read_text()
    assert "text (1 layers)" in gain and "text_large (2 layers)" in gain and "rope - none (paired)" in gain
    assert "2 x " in files["text_criteria"].read_text()  # two seeds behind every interval


def test_a_missing_text_result_with_its_checkpoint_is_measured_not_retrained(tmp_path, monkeypatch):
    budget = dataclasses.replace(TINY, text=_tiny_text(), seeds=(0,))
    ckpt, work = tmp_path / "ckpt", tmp_path / "work"
    (first,) = U.run_all(budget, work, ckpt, kinds=("text",), schemes=("alibi",), progress=False)
    assert first["measured_only"] is False
    weights = ckpt / "alibi" / "model.safetensors"
    before = (weights.read_bytes(), weights.stat().st_mtime_ns)
    (work / "results" / "text-causal-alibi-s0.json").unlink()  # the result is lost, the checkpoint is not

    def no_training(*a, **k):
        raise AssertionError("retrained a model whose checkpoint was there")

    import models.training

    monkeypatch.setattr(models.training.Trainer, "train", no_training)
    (again,) = U.run_all(budget, work, ckpt, kinds=("text",), schemes=("alibi",), progress=False)
    assert again["measured_only"] is True and (weights.read_bytes(), weights.stat().st_mtime_ns) == before
    assert again["train_seconds"] == first["train_seconds"] and again["history"] == first["history"]
    for key in ("heldout_loss", "loss_pos_1_7", "per_window", "curve"):
        assert again[key] == first[key], key
    # a stored result from before the per-window losses (round two) is measured again, not reused
    path = work / "results" / "text-causal-alibi-s0.json"
    path.write_text(json.dumps({k: v for k, v in again.items() if k != "per_window"}))
    (third,) = U.run_all(budget, work, ckpt, kinds=("text",), schemes=("alibi",), progress=False)
    assert third["per_window"] == first["per_window"] and third["measured_only"] is True
    # a checkpoint of another budget is not reused: that run trains (and here, refuses to)
    other = dataclasses.replace(budget, text=_tiny_text(train=_tiny_text().train.replace(steps=7)))
    with pytest.raises(AssertionError, match="retrained"):
        U.run_all(other, work, ckpt, kinds=("text",), schemes=("alibi",), progress=False)
