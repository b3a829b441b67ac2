"""The reviewer's checks (analyses.circuits.review): per-pair attribution, the rank agreement's
interval on the same pairs, m0 patched alone and ranked first."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from analyses.circuits import node_scores
from analyses.circuits.attribution import per_pair_node_scores
from analyses.circuits.review import OUTPUTS, run, with_first, write
from analyses.circuits.tasks import circuit_task
from interp.pairs import logit_diff
from tests.analyses.circuits.test_contract_face import make_tiny_lm


@pytest.fixture(scope="module")
def tiny_task():
    model = make_tiny_lm()
    return model, circuit_task(model, "subject_verb", n=64, seed=1, min_accuracy=0, min_pairs=1)


@pytest.mark.parametrize("method", ["eap", "eap-ig"])
def test_per_pair_scores_average_to_node_scores(tiny_task, method):
    model, ct = tiny_task
    pairs = ct.discovery
    names, values = per_pair_node_scores(model, pairs, method=method, steps=3, batch_size=5)
    table = node_scores(model, pairs, method=method, steps=3, batch_size=7)
    assert names == table["node"].tolist() and values.shape == (len(pairs), len(names))
    np.testing.assert_allclose(values.mean(0), table["score"].to_numpy(), rtol=1e-9, atol=1e-12)
    assert np.abs(values).sum() > 0 and not np.allclose(values, values.mean(0))  # pairs differ


def test_with_first_moves_one_node_to_the_top_and_keeps_the_rest():
    s = pd.Series({"a0.h0": 0.5, "m0": -0.01, "a1.h1": -2.0, "m1": 0.3})
    out = with_first(s, "m0")
    assert out.abs().sort_values(ascending=False).index[0] == "m0" and out["m0"] < 0
    assert out.drop("m0").equals(s.drop("m0").astype(float))
    with pytest.raises(ValueError, match="not among"):
        with_first(s, "m7")


def test_review_on_a_tiny_model(tiny_task, tmp_path):
    model, ct = tiny_task
    held = ct.evaluation
    r = run(model, "subject_verb", n=64, steps=2, n_boot=200, n_random=1, batch_size=8, min_pairs=4, task_result=ct)
    a = r.agreement
    assert set(a["method"]) == {"eap", "eap-ig", "eap-ig - eap"} and set(a["reading"]) == {"signed", "magnitude"}
    assert (a["n_pairs"] == len(held)).all() and (a["n_heads"] == 2 * 4).all()
    assert (a["ci_low"] <= a["ci_high"]).all() and np.allclose(a["half_width"], (a["ci_high"] - a["ci_low"]) / 2)
    diff = a[a["method"] == "eap-ig - eap"].set_index("reading")["rho"]
    by = a[a["method"] != "eap-ig - eap"].set_index(["method", "reading"])["rho"]
    assert diff["signed"] == pytest.approx(by["eap-ig", "signed"] - by["eap", "signed"])
    # m0 patched alone, measured here by hand: the clean run with m0's output taken from the corrupted run
    with torch.no_grad():
        _, cache = model.run_with_cache(held.corrupted, attention_mask=held.attention_mask,
                                        names_filter="blocks.0.hook_mlp_out")  # fmt: skip
        src = cache["blocks.0.hook_mlp_out"]
        patched = model.run_with_hooks(held.clean, attention_mask=held.attention_mask,
                                       fwd_hooks=[("blocks.0.hook_mlp_out", lambda x, hook: src)])  # fmt: skip
        clean = model(held.clean, attention_mask=held.attention_mask)
    by_hand = float((logit_diff(patched, held) - logit_diff(clean, held)).double().mean())
    m0 = r.m0.set_index("quantity")["value"]
    assert m0["exact effect of m0 alone (m(patched) - m(clean))"] == pytest.approx(by_hand, rel=1e-4, abs=1e-6)
    assert {"eap", "eap-ig", "eap, m0 first", "random"} <= set(r.curves["method"])
    assert {"cpr_ci95_lo", "mean_f_p_le_0.1", "mean_f_log_p_ci95_hi"} <= set(r.summary.columns)
    assert r.info["n_held_out"] == len(held) and r.info["params"]["n_boot"] == 200
    write(r, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == sorted(OUTPUTS)
    with pytest.raises(ValueError, match="fewer than min_pairs=1000; generate more"):
        run(model, "subject_verb", n=64, min_pairs=1000, task_result=ct)


def test_the_difference_is_eap_ig_minus_eap_whatever_the_order_asked(tiny_task):
    model, ct = tiny_task
    r = run(model, "subject_verb", methods=("eap-ig", "eap"), steps=2, n_boot=20, n_random=1, batch_size=8,
            min_pairs=4, task_result=ct)  # fmt: skip
    a = r.agreement.set_index(["method", "reading"])["rho"]
    assert a["eap-ig - eap", "signed"] == pytest.approx(a["eap-ig", "signed"] - a["eap", "signed"])
