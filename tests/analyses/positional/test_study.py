"""The positional-encoding study's natural-text half: relative-position checks, head scores, loss
by position, training, saving, loading and measuring one model per scheme on a tiny budget."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

import models
from analyses.positional import study as P
from tests.factories import tiny_config, tiny_text_budget

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread is fastest on shared cores


@pytest.mark.parametrize("scheme", P.SCHEMES)
def test_each_scheme_passes_its_relative_position_check(scheme):
    model = models.Transformer(tiny_config(positional=scheme), seed=0)
    within = P.shift_invariance(model, layer=0, period=4)
    if scheme in ("rope", "alibi", "none"):
        # scores depend on (content, distance) only: equal up to float32 rounding
        assert within < 1e-4
        beyond = P.shift_invariance(model, layer=0, period=4, length=3 * model.cfg.n_ctx)
        assert beyond < 1e-4  # and past the trained context too
    else:
        # absolute positions: the same pair at the same distance scores differently elsewhere
        assert within > 0.05


def test_shift_invariance_sees_a_broken_rope():
    """RoPE with position-dependent noise added to q must fail the check (the check can fail)."""
    model = models.Transformer(tiny_config(positional="rope"), seed=0)
    gen = torch.Generator().manual_seed(1)
    noise = torch.randn(1, model.cfg.n_ctx, 1, model.cfg.d_head, generator=gen)

    def perturb(q, hook):
        return q + 0.5 * noise[:, : q.shape[1]]

    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_rot_q", perturb)]):
        assert P.shift_invariance(model, layer=0, period=4) > 0.05


def _patterns_from_targets(batch, heads, n, target):
    """A pattern putting all of row i's weight on key target(i) (row i >= 1), causal rows otherwise."""
    pat = torch.zeros(batch, heads, n, n)
    for i in range(n):
        pat[:, :, i, target(i) if i >= 1 else 0] = 1.0
    return pat


def test_head_scores_on_hand_made_patterns():
    half, n = 5, 10
    prev = _patterns_from_targets(2, 3, n, lambda i: i - 1)
    induction = _patterns_from_targets(2, 3, n, lambda i: i - half + 1 if i >= half else 0)
    uniform = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
    table = P.head_scores({0: prev, 1: induction, 2: uniform.expand(2, 3, n, n)}, half)
    assert list(table.columns) == ["layer", "head", "previous_token", "induction"] and len(table) == 9
    by_layer = table.groupby("layer")[["previous_token", "induction"]].mean()
    assert by_layer.loc[0, "previous_token"] == pytest.approx(1.0)
    assert by_layer.loc[0, "induction"] == pytest.approx(0.0)
    assert by_layer.loc[1, "induction"] == pytest.approx(1.0)
    # induction targets i-half+1 sit next to i-1 only when half == 2; here none coincide in the second half
    assert by_layer.loc[1, "previous_token"] == pytest.approx(1 / (n - 1))  # only i=1 -> 0 hits i-1
    expected_uniform_prev = np.mean([1 / (i + 1) for i in range(1, n)])
    assert by_layer.loc[2, "previous_token"] == pytest.approx(expected_uniform_prev)
    with pytest.raises(ValueError, match="2 \\* half"):
        P.head_scores({0: prev}, half=4)


def test_repeated_tokens_repeat():
    t = P.repeated_tokens(d_vocab=50, half=7, batch=3, seed=2)
    assert t.shape == (3, 14) and torch.equal(t[:, :7], t[:, 7:])
    assert int(t.min()) >= 1 and int(t.max()) < 50


@pytest.mark.parametrize("scheme", ["learned", "rope"])
def test_loss_by_position(scheme):
    model = models.Transformer(tiny_config(positional=scheme), seed=0)
    gen = torch.Generator().manual_seed(0)
    windows = torch.randint(0, 50, (3, 4 * model.cfg.n_ctx), generator=gen)
    curve = P.loss_by_position(model, windows, batch_size=2)
    n_ctx = model.cfg.n_ctx
    assert curve.shape == (4 * n_ctx - 1,)
    # causal: losses inside the context do not depend on what comes later
    direct = torch.nn.functional.cross_entropy(
        model(windows[:, :n_ctx]).transpose(1, 2)[:, :, :-1], windows[:, 1:n_ctx], reduction="none"
    ).mean(0)
    np.testing.assert_allclose(curve[: n_ctx - 1], direct.detach().double().numpy(), rtol=1e-5)
    if scheme == "learned":
        assert np.isnan(curve[n_ctx - 1 :]).all()  # no embedding past n_ctx: n/a, not a number
    else:
        assert np.isfinite(curve).all()


def test_shuffled_loss_keeps_each_windows_tokens(monkeypatch):
    """The shuffled windows are permutations of the originals (same tokens, other order)."""
    seen = []
    real = P.evaluate
    monkeypatch.setattr(P, "evaluate", lambda m, w, b: seen.append(w.clone()) or real(m, w, b))
    model = models.Transformer(tiny_config(positional="none"), seed=0)
    windows = torch.randint(0, 50, (4, 32), generator=torch.Generator().manual_seed(0))
    original, shuffled = P.shuffled_loss(model, windows)
    assert torch.equal(seen[0], windows) and not torch.equal(seen[1], windows)
    assert torch.equal(seen[1].sort(-1).values, windows.sort(-1).values)
    assert math.isfinite(original) and math.isfinite(shuffled)


TINY = tiny_text_budget(name="test", train=dict(steps=15, batch_size=8, warmup_steps=2, eval_windows=8))


def test_train_save_load_and_measure_tell_learned_from_rope(tmp_path):
    """What the notebook does with the natural-text models: train one per scheme (saved), load
    the checkpoint back only under its own budget, measure it."""
    data = P.prepare_data(TINY)
    rows = {}
    for scheme in ("learned", "rope"):
        model, history, seconds = P.train_scheme(scheme, TINY, data, tmp_path / scheme, progress=False)
        assert seconds > 0 and history
        loaded, extra = P.load_scheme(tmp_path / scheme, TINY)
        assert extra["budget_signature"] == TINY.signature()
        for (name, x), (_, y) in zip(model.state_dict().items(), loaded.state_dict().items()):
            assert torch.equal(x, y), name
        other = dataclasses.replace(TINY, train=TINY.train.replace(steps=16))
        assert P.load_scheme(tmp_path / scheme, other) is None  # another budget: not reused
        row, curve, heads = P.measure(loaded, data.heldout_ids, TINY)
        assert curve.shape == (TINY.extrapolate * TINY.n_ctx - 1,)
        assert len(heads) == TINY.n_layers * TINY.n_heads
        rows[scheme] = row
    assert math.isnan(rows["learned"]["loss_3x_4x"]) and math.isfinite(rows["rope"]["loss_3x_4x"])
    assert rows["rope"]["shift_deviation_L0"] < 1e-4 < rows["learned"]["shift_deviation_L0"]
    # trained for 15 steps from ~log(300): the held-out loss went down
    assert all(r["heldout_loss"] < math.log(300) - 0.3 for r in rows.values())


def test_unknown_scheme_and_budget_are_refused():
    from analyses.positional.runs import study_budget

    with pytest.raises(ValueError, match="positional scheme"):
        TINY.model_config("relative", d_vocab=10)
    with pytest.raises(ValueError, match="budget"):
        study_budget("huge")
    with pytest.raises(TypeError, match=r"budget must be a study\.Budget.*study_budget\('quick'\)\.text"):
        P.prepare_data("quick")  # names are looked up in one registry, not here


def test_text_run_resumes_an_interrupted_run_bit_identically(tmp_path):
    budget = dataclasses.replace(TINY, train=TINY.train.replace(checkpoint_every=5))
    straight = P.text_run("rope", budget, tmp_path / "state_a", tmp_path / "ckpt_a")
    assert not (tmp_path / "state_a").exists()  # the resumable state goes once the run is done
    assert (tmp_path / "ckpt_a" / "MODEL_CARD.md").exists()
    assert not (tmp_path / "ckpt_a" / "trainer_state.pt").exists()  # the kept checkpoint is small
    # a second run interrupted after step 5 (its state saved there), then finished by text_run
    data = P.prepare_data(budget)
    cfg = budget.model_config("rope", d_vocab=len(data.tokenizer.hf))
    part = P.Trainer(
        models.Transformer(cfg, tokenizer=data.tokenizer, seed=0), data.train_ids, data.heldout_ids, budget.train
    )
    part.train(steps=5, out_dir=tmp_path / "state_b", progress=False)
    resumed = P.text_run("rope", budget, tmp_path / "state_b", tmp_path / "ckpt_b")
    a, b = models.load(str(tmp_path / "ckpt_a")), models.load(str(tmp_path / "ckpt_b"))
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
    assert resumed["heldout_loss"] == straight["heldout_loss"]
    assert resumed["history"] == straight["history"]
    assert math.isfinite(straight["passage_loss_pos_1_7"]) and len(straight["curve"]) == 4 * budget.n_ctx - 1


def test_window_losses_average_to_the_curve_and_per_window_takes_the_criterions_positions():
    model = models.Transformer(tiny_config(positional="learned"), seed=0)
    n_ctx = model.cfg.n_ctx
    windows = torch.randint(0, 50, (5, 2 * n_ctx), generator=torch.Generator().manual_seed(0))
    each = P.window_losses(model, windows, batch_size=2)
    assert each.shape == (5, 2 * n_ctx - 1) and np.isnan(each[:, n_ctx - 1 :]).all()
    np.testing.assert_allclose(each.mean(axis=0), P.loss_by_position(model, windows, batch_size=3), equal_nan=True)
    # hand-made losses: position t of every window has loss t, window w adds w
    losses = np.arange(n_ctx - 1)[None, :] + np.arange(3)[:, None] * 100.0
    pw = P.per_window(losses, n_ctx)
    early, late = range(1, 8), range(3 * n_ctx // 4, n_ctx - 1)
    np.testing.assert_allclose(pw["pos_1_7"], np.mean(early) + np.arange(3) * 100)
    np.testing.assert_allclose(pw["last_quarter"], np.mean(late) + np.arange(3) * 100)
    assert pw["n"] == 3 and pw["curve"].shape == (3, n_ctx - 1)
    with pytest.raises(ValueError, match="n_ctx=8"):
        P.early_late(8)


def test_seed_zero_of_the_full_budget_is_round_twos_and_the_large_size_differs_in_depth_only():
    import json
    from pathlib import Path

    full = P.BUDGETS["full"]
    assert full.with_seed(0) is full
    committed = Path(__file__).parents[3] / "checkpoints" / "positional"
    for scheme in P.SCHEMES:
        extra = json.loads((committed / scheme / "interp_config.json").read_text())["extra"]
        assert extra["budget_signature"] == full.with_seed(0).signature(), scheme  # reused, not retrained
    assert full.with_seed(1).signature() != full.signature() and full.with_seed(1).train.seed == 1
    large = dataclasses.asdict(P.BUDGETS["full_large"])
    small = dataclasses.asdict(full)
    assert {k for k in small if small[k] != large[k]} == {"name", "n_layers"} and large["n_layers"] == 4
    with pytest.raises(ValueError, match="seed"):
        full.with_seed(-1)


def test_a_checkpoint_of_another_scheme_is_refused(tmp_path):
    data = P.prepare_data(TINY)
    P.train_scheme("rope", TINY, data, tmp_path / "rope", progress=False)
    with pytest.raises(ValueError, match="'rope' model, not 'alibi'"):
        P.text_run("alibi", TINY, tmp_path / "state", tmp_path / "rope")
