"""Powered validation: layer-matched nulls and group ablations, on planted models."""

import numpy as np
import pandas as pd
import pytest
import torch

from analyses import validation as V
from analyses.validation.powered import layer_matched, matched_groups, run_powered
from analyses.validation.prompts import PromptSet, Task

pytestmark = pytest.mark.usefixtures("one_thread")


def _copy_prompts(n=48, length=12, vocab=12, seed=0) -> PromptSet:
    """Period-2 sequences; at every row's last position, logit(next token) - logit(current one)."""
    ps = V.planted_prompts(n=n, length=length, vocab=vocab, seed=seed)
    rows = np.arange(n)
    pos = np.full(n, length - 1)
    right = ps.tokens[:, length - 2].numpy()  # period 2: the next token is the previous one
    wrong = ps.tokens[:, length - 1].numpy()
    task = Task("copy_logit_diff", "logit_diff", "logit(next) - logit(current)", rows, pos=pos, right=right)
    task.wrong = wrong
    return PromptSet(ps.tokens, ps.attention_mask, ps.texts, ps.family, {"copy_logit_diff": task})


def _labels(heads, role="copy"):
    return pd.DataFrame([dict(layer=l, head=h, role=role, score=1.0, label=True) for l, h in heads])


def test_group_ablation_finds_a_behaviour_split_over_two_heads():
    pair = [(0, 2), (0, 5)]  # both in layer 0, where attention reads the positions cleanly
    model = V.planted_copies({pair[0]: 20.0, pair[1]: 20.0})
    ps = _copy_prompts()
    # zero ablation: a mean-ablated copy head still writes the batch's mean token, which dilutes the norm
    kw = dict(prompts={"copy_logit_diff": ps}, metrics={"copy": "copy_logit_diff"}, n_boot=300, ablation="zero")
    res = run_powered(model, _labels(pair), **kw)
    t = res.table.set_index(["layer", "head"])
    g = res.groups.iloc[0]
    assert len(res.groups) == 1 and g["size"] == 2 and g["n_null"] == 30
    assert g["verdict"] == "validated", g.to_dict()
    assert g["effect"] > 10 * t["effect"].max()  # together large, each alone small
    for h in pair:
        assert t.loc[h, "verdict"] != "validated", t.loc[h].to_dict()
    # every random group has one head from each member's layer, and none of the role's heads
    rng = np.random.default_rng(0)
    for grp in matched_groups([(0, 2), (1, 5)], 30, 2, 24, set(pair), rng):
        assert sorted(l for l, _ in grp) == [0, 1] and not set(grp) & set(pair) and len(set(grp)) == 2


def test_group_of_one_real_head_and_a_dud_is_carried_by_the_real_head():
    # the control: one head carries everything, the other writes nothing; the single-head verdict shows it
    model = V.planted_copies({(0, 2): 5.0, (0, 5): 0.0})
    res = run_powered(
        model,
        _labels([(0, 2), (0, 5)]),
        prompts={"copy_logit_diff": _copy_prompts()},
        metrics={"copy": "copy_logit_diff"},
        n_boot=300,
    )
    t = res.table.set_index(["layer", "head"])
    assert t.loc[(0, 2), "verdict"] == "validated" and t.loc[(0, 5), "verdict"] == "no effect"


def test_verdict_uses_the_layer_matched_null():
    # layer 0: 12 copy heads of growing strength; the labelled one (0, 6) has 5 stronger ones in its
    # layer; layers 1-5 hold only weak random heads, so against every head it looks strong (top 5 of 144)
    scales = {(0, h): 0.05 + 0.04 * h for h in range(12)}
    model = V.planted_copies(scales, n_layers=6, unembed=1.0)
    lab = _labels([(0, 6)])
    kw = dict(prompts={"copy_logit_diff": _copy_prompts()}, metrics={"copy": "copy_logit_diff"}, n_boot=300)
    row = run_powered(model, lab, n_null=20, **kw).table.iloc[0]
    assert row["null_layers"] == "0" and row["n_null"] == 20
    assert row["effect"] > 0 and row["ci_low"] > 0  # a measurable effect ...
    assert row["p_value"] > 0.1 and row["verdict"] != "validated"  # ... that its own layer's heads match
    # the every-head null of `validate`, mostly other layers' heads, calls it validated
    everyone = V.run(model, lab.assign(role="previous_token"), prompts=V.planted_prompts(n=48, seed=0), n_boot=300)
    assert everyone.table.iloc[0]["verdict"] == "validated", everyone.table.iloc[0].to_dict()
    assert everyone.table.iloc[0]["p_value_layer"] > 0.1


def test_layer_matched_null_follows_the_layers_and_lends_from_neighbours():
    rng = np.random.default_rng(0)
    heads = [(3, 0), (3, 1), (7, 4)]
    null = layer_matched(heads, 30, 10, 9, set(heads), rng)
    layers = [l for l, _ in null]
    assert len(set(null)) == 30 and not set(null) & set(heads)
    assert layers.count(7) == 8  # layer 7 has 8 free heads, all taken; the rest lent by layers 6 and 8
    assert layers.count(3) == 7 and set(layers) <= {2, 3, 4, 6, 7, 8}


def test_powered_refuses_an_encoder(minilm):
    with pytest.raises(ValueError, match="causal LM"):
        run_powered(minilm, _labels([(0, 1)], role="subject_verb"), n=8)


def test_powered_prompts_measure_accuracy_and_keep_solved(smollm2):
    torch.manual_seed(0)
    prompts, acc = V.powered_prompts(smollm2, ["anaphora_logit_diff", "continuation_loss"], n=16, seed=0)
    a = acc.set_index("metric")
    assert 0 < a.loc["anaphora_logit_diff", "accuracy"] < 1  # measured, on a pool of 2n
    assert a.loc["anaphora_logit_diff", "n_generated"] == 32
    ps = prompts["anaphora_logit_diff"]
    f = V.metric_functions(ps)["anaphora_logit_diff"]
    with torch.no_grad():
        clean = f(smollm2(ps.tokens, attention_mask=ps.attention_mask))
    assert (clean > 0).all() and len(clean) == a.loc["anaphora_logit_diff", "n_kept"]  # only solved prompts kept
    cont = prompts["continuation_loss"].tasks["continuation_loss"]
    assert cont.loss_mask.any(1).all() and 0 < a.loc["continuation_loss", "accuracy"] < 1


def test_cli_powered_writes_its_files(tmp_path, monkeypatch):
    import json

    import models
    from analyses.cli import main
    from analyses.validation import powered

    model = V.planted_copies({(0, 2): 20.0, (0, 5): 20.0})
    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: model)
    ps = V.planted_prompts(n=24, seed=0)
    ps.tasks = {"continuation_loss": ps.tasks["loss"]}  # the period-2 loss stands in for real text

    def fake_prompts(m, metrics, n=120, seed=0, texts=None):
        assert list(metrics) == ["continuation_loss"] and n == 24
        return {"continuation_loss": ps}, pd.DataFrame([dict(metric="continuation_loss", accuracy=1.0, n_kept=24)])

    monkeypatch.setattr(powered, "powered_prompts", fake_prompts)
    labels = tmp_path / "heads.csv"
    labels.write_text(
        "layer,head,role,label\n0,2,previous_token,true\n0,5,previous_token,true\n0,7,attention_sink,true\n"
    )
    out = tmp_path / "pw"
    argv = ["validate", "--model", "planted", "--labels", str(labels), "--out", str(out), "--powered", "--n", "24"]
    assert main(argv + ["--n-null", "10", "--ablation", "zero"]) == 0
    table = pd.read_csv(out / "powered.csv")
    assert sorted(zip(table["layer"], table["head"])) == [(0, 2), (0, 5)]  # the sink label is left out
    groups = pd.read_csv(out / "groups.csv")
    assert groups.loc[0, "heads"] == "L0H2 L0H5" and groups.loc[0, "n_null"] == 10
    record = json.loads((out / "powered.json").read_text())
    assert record["sinks_left_out"] == {"attention_sink": 1} and record["seconds"] > 0
    md = (out / "powered.md").read_text()
    assert "own accuracy" in md and "Group ablation" in md
