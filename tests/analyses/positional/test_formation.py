"""The induction runs' measurements: own-distribution head scores, the route rule (on two planted
models whose route is known), the abruptness of a rise (on curves with a known step and width),
retrieval at a controlled distance, and the report's induction and long-range rows."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from analyses.positional import formation as F
from analyses.positional import report as R
from analyses.positional import synthetic as S
from analyses.positional import tasks as T

pytestmark = pytest.mark.usefixtures("one_thread")

TASK = T.InductionTask(length=40, segment=10, d_vocab=48, distinct=True)


# --------------------------------------------------------------------------------------------------
# Head scores and the route


def test_own_head_scores_find_the_planted_heads():
    scores = F.own_head_scores(T.planted_induction_model(TASK), TASK).set_index(["layer", "head"])
    l0, l1 = scores.loc[(0, 0)], scores.loc[(1, 0)]
    assert l0.previous_token > 0.99 and l0.duplicate_token < 0.01 and l0.induction < 0.01
    assert l0.top_offset == 1 and l0.content_tv < 1e-6  # attends by position alone
    assert l1.induction > 0.99 and l1.copy_shift == 1 and l1.previous_token < 0.01
    assert l1.content_tv > 0.1  # where it looks depends on the tokens


def test_route_rule_names_the_textbook_circuit_on_the_planted_model():
    route = F.route(T.planted_induction_model(TASK), TASK)
    assert route["route"] == "previous-token L0H0 -> induction L1H0 (K-composition)"
    assert route["route_drop_key"] > 0.5 and abs(route["route_drop_query"]) < 0.05
    assert route["route_decisive_loss_increase"] > 1.0  # ablating the induction head costs the copy


def test_route_rule_names_the_duplicate_token_route_on_the_other_planted_model():
    model = T.planted_duplicate_induction_model(TASK)
    tokens, targets, mask = TASK.sample_with_mask(64, torch.Generator().manual_seed(4))
    pred = model(tokens, return_type="logits").argmax(-1)
    assert float((pred == targets)[mask].float().mean()) > 0.99  # it solves the task, by the other route
    route = F.route(model, TASK)
    assert route["route"] == "duplicate-token L0H0 -> induction L1H0 (Q-composition)"
    assert route["route_drop_query"] > 0.5 and abs(route["route_drop_key"]) < 0.05


def test_route_needs_two_layers():
    spec = S.TaskSpec(TASK, S.TaskSpec(TASK, None).train, d_model=16, n_layers=1, n_heads=2, d_mlp=0)
    with pytest.raises(ValueError, match="at least 2 layers"):
        F.route(spec.model("rope", "causal", 0), TASK)


def test_head_ablation_hurts_only_through_the_heads_that_copy():
    model = T.planted_induction_model(TASK)
    abl = F.head_ablation(model, TASK).set_index(["layer", "head"]).loss_increase
    assert abl.loc[(0, 0)] > 1.0 and abl.loc[(1, 0)] > 1.0
    # zero-gain check that it can be small: a model whose layer-1 head writes nothing is not hurt by ablating it
    with torch.no_grad():
        model.blocks[1].attn.W_O.zero_()
    abl = F.head_ablation(model, TASK).set_index(["layer", "head"]).loss_increase
    assert abs(abl.loc[(1, 0)]) < 1e-6


# --------------------------------------------------------------------------------------------------
# Abruptness


def _history(steps, values, column="score"):
    return [{"step": int(t), column: float(v)} for t, v in zip(steps, values)]


def test_rise_of_a_linear_ramp_is_measured_exactly():
    steps = np.arange(0, 1501, 25)
    a, b = 400, 800  # the ramp: 0 before a, 1 after b
    values = np.clip((steps - a) / (b - a), 0, 1)
    r = F.rise(_history(steps, values), "score")
    assert (r["t10"], r["t50"], r["t90"]) == (440.0, 600.0, 760.0)
    assert r["width"] == 320.0 and r["start"] == 0.0 and r["final"] == 1.0
    # the same ramp as a loss falling from 4 to 1: the same steps
    loss = F.rise(_history(steps, 4 - 3 * values, "loss"), "loss", falling=True)
    assert (loss["t10"], loss["t50"], loss["t90"], loss["width"]) == (440.0, 600.0, 760.0, 320.0)
    assert loss["start"] == 4.0 and loss["final"] == 1.0


def test_rise_of_a_logistic_is_measured_at_its_step_and_width():
    steps = np.arange(0, 2001, 5)
    t0, w = 900.0, 30.0
    values = 0.1 + 0.7 / (1 + np.exp(-(steps - t0) / w))
    r = F.rise(_history(steps, values), "score")
    # 10-90% of a logistic: t0 -+ w ln 9; sampled every 5 steps, linear interpolation is off by < 1 step
    assert r["t50"] == pytest.approx(t0, abs=1.0)
    assert r["width"] == pytest.approx(2 * w * math.log(9), abs=1.0)


def test_rise_counts_a_level_only_once_the_curve_stays_past_it():
    steps = [0, 100, 200, 300, 400, 500, 600]
    values = [0.0, 0.95, 0.2, 0.6, 1.0, 1.0, 1.0]  # reaches 90% at 100, falls back, comes back at 400
    r = F.rise(_history(steps, values), "score")
    assert r["t90"] == pytest.approx(300 + (0.9 - 0.6) / 0.4 * 100)
    assert r["t50"] == pytest.approx(200 + (0.5 - 0.2) / 0.4 * 100)  # the dip to 0.2 resets 50%
    assert r["t10"] == pytest.approx(100 * 0.1 / 0.95)  # ... but not 10%: the curve never falls below 0.1 again


def test_rise_is_undefined_for_a_flat_curve_or_a_run_that_did_not_form():
    flat = F.rise(_history(range(0, 500, 50), [0.2] * 10), "score")
    assert all(math.isnan(flat[k]) for k in ("t10", "t50", "t90", "width"))
    steps = np.arange(0, 1501, 25)
    ramp = _history(steps, np.clip((steps - 400) / 400, 0, 1))
    assert math.isnan(F.abruptness(ramp, False, "score", "score")["score_width"])
    got = F.abruptness(ramp, True, "score", "score")
    assert got["score_width"] == 320.0 and got["score_width_over_t50"] == pytest.approx(320 / 600)


def test_induction_formation_uses_the_own_distribution_score():
    steps = np.arange(0, 1001, 50)
    own = np.clip((steps - 300) / 200, 0, 1) * 0.8
    history = [
        {"step": int(t), "task_induction_score": float(s), "induction_score": 0.05, "task_shift_score": float(s),
         "copy_loss": float(4 - 3.5 * s / 0.8)}
        for t, s in zip(steps, own)
    ]  # fmt: skip
    got = S.induction_formation(history, d_vocab=64)
    assert got["step_score_formed"] == 400.0  # first > 0.3 and stays: 0.4 at step 400
    assert math.isnan(got["step_probe_formed"])  # the probe never passes 0.3
    assert got["score_t50"] == pytest.approx(400.0) and got["score_width"] == pytest.approx(160.0)


# --------------------------------------------------------------------------------------------------
# Long range


def test_sample_at_distance_puts_the_copy_at_the_asked_distance():
    task = T.InductionTask(length=16, segment=4, d_vocab=32)
    tokens, targets, mask = task.sample_at_distance(64, torch.Generator().manual_seed(0), 68, 33, 64)
    assert tokens.shape == (64, 68) and mask.sum(1).eq(3).all()
    q = mask.float().argmax(1)
    for r in range(64):  # some d in [33, 64] has the segment's copy (chance repeats may add others)
        seg = tokens[r, q[r] : q[r] + 4]
        assert any(torch.equal(tokens[r, q[r] - d : q[r] - d + 4], seg) for d in range(33, min(64, int(q[r])) + 1))
    assert torch.equal(targets[:, :-1], tokens[:, 1:])
    with pytest.raises(ValueError, match="distances"):
        task.sample_at_distance(4, torch.Generator(), 20, 2, 10)  # d < segment: the copies overlap
    with pytest.raises(ValueError, match="distances"):
        task.sample_at_distance(4, torch.Generator(), 20, 4, 17)  # d + segment > length


def test_distance_bins_and_long_range_on_the_planted_model():
    bins = F.distance_bins(32, 8, (2, 4, 8))
    assert bins == {
        "1L": (32, 8, 24),
        "2L": (72, 33, 64),
        "4L": (136, 65, 128),
        "8L": (264, 129, 256),
        "near8L": (264, 8, 24),  # the control: a near copy in the longest sequences
    }
    task = T.InductionTask(length=40, segment=10, d_vocab=512)  # tokens drawn with replacement: few chance repeats
    got = F.long_range(T.planted_induction_model(task), task)
    assert got["lr_acc_1L"] > 0.9 and got["lr_chance"] == 1 / 512
    assert all(math.isnan(got[f"lr_acc_{m}L"]) for m in (2, 4, 8))  # learned positions: no table past n_ctx
    assert math.isnan(got["lr_acc_near8L"])


# --------------------------------------------------------------------------------------------------
# The report's rows


def test_t_interval_is_scipys():
    v = [0.1, 0.3, 0.2, 0.25, 0.15]
    m, lo, hi, n = R.t_interval(v + [float("nan"), None])
    want = stats.t.interval(0.95, 4, loc=np.mean(v), scale=stats.sem(v))
    assert n == 5 and m == pytest.approx(np.mean(v)) and (lo, hi) == pytest.approx(want)
    assert R.interval([]) == "n/a" and R.interval([0.5]) == "0.50 (1)"


def test_steepest_share_finds_the_jump_of_a_two_stage_rise():
    steps = np.arange(0, 1501, 25)
    # a slow first stage (0 -> 0.2 over steps 100-700) then a jump (0.2 -> 1.0 over steps 800-875)
    values = np.interp(steps, [0, 100, 700, 800, 875, 1500], [0, 0, 0.2, 0.2, 1.0, 1.0])
    history = _history(steps, values)
    assert F.steepest_share(history, "score", window=100) == pytest.approx(0.8)  # flat on both sides of the jump
    assert F.steepest_share(history, "score", window=50) == pytest.approx(0.8 * 50 / 75)  # two thirds of it
    r = F.rise(history, "score")
    assert r["width"] / r["t50"] > 0.25  # the 10-90% width spans both stages: "gradual" by that rule alone
    # an even rise over 1,500 steps gains 100/1500 in any 100 steps, of a rise to the plateau (the mean of
    # the last three values, 1475/1500)
    even = _history(steps, steps / 1500)
    assert F.steepest_share(even, "score", window=100) == pytest.approx(100 / 1475)
    # a falling loss is measured the same way; a flat curve has no rise
    assert F.steepest_share(_history(steps, 5 - values, "loss"), "loss", 75, falling=True) == pytest.approx(0.8)
    assert math.isnan(F.steepest_share(_history(steps, np.ones_like(steps)), "score"))
    assert R.jump_verdict([0.8, 0.7, 0.75, 0.85, 0.8]) == "a jump"
    assert R.jump_verdict([0.1, 0.08, 0.12, 0.09, 0.1]) == "no jump"
    assert R.jump_verdict([0.2, 0.9, 0.3, 0.8, 0.5]) == "undecided"


def test_abruptness_verdict_rule():
    assert R.abruptness_verdict([0.10, 0.12, 0.11, 0.09, 0.10]) == "abrupt"
    assert R.abruptness_verdict([0.90, 0.80, 0.95, 0.85, 0.88]) == "gradual"
    assert R.abruptness_verdict([0.05, 0.60, 0.10, 0.50, 0.20]) == "undecided"
    assert R.abruptness_verdict([0.1, float("nan")]) == "n/a"


def _fake(scheme, seed, ratio, t50, acc_far):
    return {
        "kind": "induction", "scheme": scheme, "attention": "causal", "seed": seed, "step_score_formed": t50,
        "step_probe_formed": None, "step_shift_formed": t50, "step_loss_formed": t50, "task_induction_score": 0.8,
        "task_shift_score": 0.8, "induction_score": 0.5, "task_prev_token_score": 0.9, "copy_loss": 0.1,
        "other_loss": 4.0, "route": "previous-token L0H1 -> induction L1H2 (K-composition)", "score_t50": t50,
        "score_width": ratio * t50, "score_width_over_t50": ratio, "loss_t50": t50, "loss_width": ratio * t50,
        "loss_width_over_t50": ratio, "lr_chance": 1 / 64, "lr_acc_1L": 0.95, "lr_acc_2L": acc_far,
        "lr_acc_4L": acc_far, "lr_acc_8L": acc_far,
    }  # fmt: skip


def test_induction_claims_and_long_range_rows_follow_their_rules():
    results = [_fake("rope", s, 0.1 + 0.01 * s, 400 + 10 * s, 0.93) for s in range(5)]
    results += [_fake("alibi", s, 0.8 + 0.02 * s, 900 + 10 * s, 0.05) for s in range(5)]
    rows = R.induction_claims(results)
    assert "rope: abrupt" in rows[0]["agrees?"] and "alibi: gradual" in rows[0]["agrees?"]
    assert "scheme-dependent step: yes" in rows[0]["agrees?"]  # 400s vs 900s: Kruskal-Wallis p < 0.05
    assert "rope: 5/5 seeds by the textbook route" in rows[1]["agrees?"]
    lr = R.long_range_claims(results)
    assert lr[0]["agrees?"] == "at 4L < d <= 8L: rope: yes (0.93), alibi: no (0.05)"
    table = R.long_range_table(results)
    assert list(table.columns) == ["scheme", "seeds", "d <= L", "L < d <= 2L", "2L < d <= 4L", "4L < d <= 8L"]
    claims = R.claims_table(results)
    assert len(claims) == 3  # the induction rows and the long-range row (no other kinds in these results)


def test_route_rule_says_no_route_when_no_head_carries_the_copy():
    model = T.planted_induction_model(TASK)
    with torch.no_grad():
        model.unembed_weight.zero_()  # the heads still attend as before, but nothing reaches the logits
    route = F.route(model, TASK)
    assert "no route" in route["route"] and route["route_composition"] == "none"


def test_head_role_rule():
    import pandas as pd

    def row(prev, dup, tv, offset=3, att=0.4):
        return pd.Series(
            {"previous_token": prev, "duplicate_token": dup, "content_tv": tv, "top_offset": offset,
             "top_offset_attention": att}
        )  # fmt: skip

    assert F.head_role(row(0.9, 0.0, 0.0)) == "previous-token"  # position-only, but offset 1 is its own role
    assert F.head_role(row(0.1, 0.5, 0.05, 8, 0.93)) == "positional (offset 8: 0.93)"  # looks up a fixed place
    assert F.head_role(row(0.1, 0.5, 0.4)) == "duplicate-token"  # content decides where it looks
    assert F.head_role(row(0.1, 0.1, 0.4)) == "mixed"
