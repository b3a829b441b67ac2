import numpy as np
import pandas as pd
import pytest
import torch

from analyses import validation as V

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread is fastest on shared cores


def _planted_labels():
    return pd.DataFrame(
        [
            dict(model="planted", layer=0, head=0, role="previous_token", direction="back", score=0.99, label=True),
            dict(model="planted", layer=0, head=1, role="previous_token", direction="back", score=0.99, label=True),
            dict(model="planted", layer=1, head=5, role="subject_verb", direction="back", score=0.2, label=False),
        ]
    )


@pytest.fixture(scope="module")
def planted():
    model, heads = V.planted_model(seed=0)
    return model, heads


def test_planted_model_has_the_designed_patterns(planted):
    model, heads = planted
    prompts = V.planted_prompts(n=4, seed=1)
    _, cache = model.run_with_cache(prompts.tokens, names_filter="blocks.0.attn.hook_pattern")
    pat = cache["blocks.0.attn.hook_pattern"]
    for h in (heads["A"], heads["B"]):
        prev = pat[:, h[1], torch.arange(1, 12), torch.arange(0, 11)]
        assert prev.min() > 0.99  # both look at the previous token
    minus_loss = V.metric_functions(prompts)["loss"](model(prompts.tokens))
    assert (-minus_loss).max() < 0.1  # the task is solved from position 1 on (chance: log 12 = 2.5)


def test_planted_head_validated_decoy_no_effect(planted):
    model, heads = planted
    res = V.run(model, _planted_labels(), prompts=V.planted_prompts(n=12, seed=0), seed=0)
    t = res.table.set_index(["layer", "head"])
    assert len(t) == 2  # label=False rows are not validated
    a, b = t.loc[heads["A"]], t.loc[heads["B"]]
    assert a["verdict"] == "validated", a.to_dict()
    assert b["verdict"] == "no effect", b.to_dict()  # an exact zero: the interval [0, 0] is inside +-min_effect
    assert a["effect"] > 1.0 and a["z"] > 3 and a["n_null"] == 47
    assert a["p_value"] == pytest.approx(1 / 48)
    assert b["effect"] == 0.0  # the decoy's output is exactly zero
    assert set(V.COLUMNS) <= set(res.table.columns)
    # the other direction: A is labelled, so it must not be listed as an unlabelled large effect
    assert not ((res.unlabelled["layer"] == 0) & (res.unlabelled["head"] == 0)).any()


def test_unlabelled_strong_head_is_reported(planted):
    model, heads = planted
    only_decoy = _planted_labels().iloc[[1]]
    res = V.run(model, only_decoy, prompts=V.planted_prompts(n=12, seed=0), seed=0, n_boot=200)
    u = res.unlabelled
    assert ((u["layer"] == 0) & (u["head"] == 0)).any()
    assert u.iloc[0][["layer", "head"]].tolist() == [0, 0]  # the largest effect


def test_reproducible_with_a_seed(planted):
    model, _ = planted
    kw = dict(prompts=V.planted_prompts(n=8, seed=2), seed=5, n_null=10, ablation="resample", n_boot=200)
    r1 = V.run(model, _planted_labels(), **kw)
    r2 = V.run(model, _planted_labels(), **kw)
    pd.testing.assert_frame_equal(r1.table, r2.table)
    assert r1.info["n_null"] == 10
    assert all(not hp._forward_hooks for hp in model.hook_dict.values())


def test_empirical_p_value_has_the_plus_one_correction():
    assert V.empirical_p(5.0, [1, 2, 3]) == pytest.approx(1 / 4)
    assert V.empirical_p(0.0, [1, 2, 3]) == pytest.approx(1.0)
    assert V.empirical_p(2.0, [1, 2, 3, np.nan]) == pytest.approx(3 / 4)  # ties count against the head


def test_decision_rule():
    assert V.decide(1.0, 0.5, 1.5, 0.1, 0.01)[0] == "validated"
    assert V.decide(1.0, 0.5, 1.5, 0.1, 0.2)[0] == "inconclusive"  # random heads do as much
    assert V.decide(0.05, 0.01, 0.09, 0.1, 0.01)[0] == "no effect"  # inside +-min_effect: equivalence
    assert V.decide(0.0, -0.09, 0.09, 0.1, 0.9)[0] == "no effect"  # a narrow interval around 0
    assert V.decide(0.5, -0.1, 1.1, 0.1, 0.01)[0] == V.UNDER_POWERED  # interval includes 0, and is wide
    assert V.decide(0.0, -0.5, 0.5, 0.1, 0.5)[0] == V.UNDER_POWERED  # around 0 but wide: not "no effect"
    assert V.decide(0.05, 0.01, 0.2, 0.1, 0.01)[0] == V.UNDER_POWERED  # below min_effect, interval reaches past it
    assert V.decide(-1.0, -1.5, -0.5, 0.1, 1.0)[0] == "inconclusive"  # ablation helps
    assert V.decide(float("nan"), np.nan, np.nan, 0.1, np.nan)[0] == "inconclusive"


def test_role_metric_mapping():
    assert V.role_metric("subject_verb", True) == "sv_logit_diff"
    assert V.role_metric("subject_verb", False) == "sv_probe"
    assert V.role_metric("anaphora", True) == "anaphora_logit_diff"
    assert V.role_metric("delimiter", True) == "delimiter_loss"
    assert V.role_metric("induction", True) == "induction_loss"
    assert V.role_metric("previous_token", False) == "prev_word_probe"
    assert V.role_metric("attention_sink", False) is None


def test_probe_learns_a_linear_rule():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 20, generator=g)
    y = (x[:, 3] - x[:, 7] > 0).long().numpy()
    probe = V.fit_probe(x[:100], y[:100])
    acc = ((probe(x[100:]) > 0).long().numpy() == y[100:]).mean()
    assert acc > 0.9


def test_bad_labels_table():
    model, _ = V.planted_model(n_layers=1, n_heads=2)
    with pytest.raises(ValueError, match="lacks columns"):
        V.run(model, pd.DataFrame({"layer": [0]}), prompts=V.planted_prompts(n=4))
    with pytest.raises(ValueError, match=r"column 'layer' is 3; expected 0\.\.0 \(the model has 1 layer\)"):
        V.run(
            model,
            pd.DataFrame({"layer": [3], "head": [0], "role": ["local"], "label": [True]}),
            prompts=V.planted_prompts(n=4),
        )


@pytest.mark.parametrize(
    "frame, expected",
    [
        (dict(label=["yes"]), r"labels row 0: column 'label' is 'yes'; expected true or false"),
        (dict(label=[None]), r"labels row 0: column 'label' is empty; expected true or false"),
        (dict(label=None), r"no column 'label'"),
        (dict(layer=[0.7]), r"labels row 0: column 'layer' is 0\.7; expected an integer"),
        (dict(head=["1"], layer=[-1]), r"labels row 0: column 'layer' is -1; expected 0\.\.0"),
        (dict(head=[float("nan")]), r"labels row 0: column 'head' is empty; expected an integer"),
    ],
)
def test_labels_values_are_checked(frame, expected):
    """A label that is not true/false, a table without a label column (which would make every row a
    label), a fractional layer: refused with the row, the column and what is expected."""
    model, _ = V.planted_model(n_layers=1, n_heads=2)
    cols = dict(layer=[0], head=[0], role=["previous_token"], label=[True])
    cols.update(frame)
    df = pd.DataFrame({k: v for k, v in cols.items() if v is not None})
    with pytest.raises(ValueError, match=expected):
        V.run(model, df, prompts=V.planted_prompts(n=4), n_boot=10)


def test_labels_accept_booleans_in_their_usual_spellings():
    model, _ = V.planted_model(n_layers=1, n_heads=2)
    df = pd.DataFrame(
        dict(layer=[0, 0, 0, 0], head=[0, 1, 0, 1], role=["local", "local", "x", "x"], label=["TRUE", "false", 1, 0.0])
    )
    res = V.run(model, df, prompts=V.planted_prompts(n=4), n_boot=10)
    assert sorted(zip(res.table.layer, res.table["head"], res.table.role)) == [(0, 0, "local"), (0, 0, "x")]


def test_causal_prompts_on_smollm2(smollm2):
    prompts = V.build_prompts(smollm2, n=8, seed=0)
    sv = prompts.tasks["sv_logit_diff"]
    tok = smollm2.tokenizer
    assert {tok.decode([int(i)]) for i in np.r_[sv.right, sv.wrong]} == {" is", " are"}
    for r, p in zip(sv.rows, sv.pos):  # the prompt ends right before the verb
        assert p == int(prompts.attention_mask[r].sum()) - 1
        assert prompts.texts[r].endswith(tok.decode([int(prompts.tokens[r, p])]).strip())
    funcs = V.metric_functions(prompts)
    with torch.no_grad():
        out = smollm2(prompts.tokens, attention_mask=prompts.attention_mask)
    # the real model gets agreement right on average: a property of the model, not of our code
    assert np.nanmean(funcs["sv_logit_diff"](out).numpy()) > 0
    assert np.nanmean(funcs["anaphora_logit_diff"](out).numpy()) > 0
    assert np.isfinite(funcs["delimiter_loss"](out).numpy()).sum() == len(prompts.tasks["delimiter_loss"].rows)


def test_cli_writes_csv_and_report(minilm, tmp_path, monkeypatch):
    import models
    from analyses import cli

    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: minilm)
    labels = pd.DataFrame(
        [
            dict(
                model="minilm", layer=2, head=3, role="subject_verb", direction="verb->subject", score=0.5, label=True
            ),
            dict(model="minilm", layer=0, head=1, role="local", direction="prev", score=0.9, label=True),
            dict(model="minilm", layer=5, head=0, role="attention_sink", direction="", score=0.9, label=True),
        ]
    )
    labels.to_csv(tmp_path / "heads.csv", index=False)
    out = tmp_path / "out"
    rc = cli.main(
        [
            "validate",
            "--model",
            "minilm",
            "--out",
            str(out),
            "--labels",
            str(tmp_path / "heads.csv"),
            "--n",
            "8",
            "--n-null",
            "4",
            "--n-layer-null",
            "1",
        ]
    )
    assert rc == 0
    df = pd.read_csv(out / "validation.csv")
    assert {"model", "layer", "head", "role", "metric", "effect", "null_mean", "null_std", "p_value", "verdict"} <= set(
        df.columns
    )
    assert len(df) == 3 and set(df["verdict"]) <= set(V.VERDICTS)
    assert df.set_index("role").loc["attention_sink", "metric"] == "none"
    # labels v4: a relation's row is validated under its reading's name (an old table: retrospective)
    assert df.set_index("role").loc["subject_verb (retrospective)", "metric"] == "sv_probe"
    md = (out / "validation.md").read_text()
    assert "Causal validation" in md and "subject_verb" in md
    assert not list(out.glob("*.tmp"))


def test_pattern_labels_find_both_previous_token_heads(planted):
    model, heads = planted
    lab = V.pattern_labels(model, top=2, threshold=0.5)
    got = lab[lab["label"] & (lab["role"] == "previous_token")]
    assert sorted(zip(got["layer"], got["head"])) == sorted([heads["A"], heads["B"]])
    assert not (lab["label"] & (lab["role"] == "induction")).any()  # nothing here does induction
    assert {"model", "layer", "head", "role", "direction", "score", "label"} <= set(lab.columns)


def test_q_family_is_a_roles_best_labels_by_probe_score(planted):
    model, _ = planted
    rows = [
        dict(model="planted", layer=0, head=h, role="previous_token", direction="back", score=1 - 0.01 * h, label=True)
        for h in range(6)
    ]
    res = V.run(model, pd.DataFrame(rows), prompts=V.planted_prompts(n=8, seed=0), seed=0, q_family=3)
    t = res.table.set_index("head")
    assert t["p_value"].notna().all()
    assert set(t.index[t["q_value"].notna()]) == {0, 1, 2}  # the three highest probe scores
    full = V.run(model, pd.DataFrame(rows), prompts=V.planted_prompts(n=8, seed=0), seed=0, q_family=None)
    assert full.table["q_value"].notna().all()


def test_reasons_follow_from_the_numbers():
    """Issue 41 item 2: each reason says what the numbers show. A measurable effect that beats every
    one of 10 random heads is not "random heads do as much" (p = 1/11 is simply the floor); an
    interval wholly below (or above) zero does not "fail to clear zero"."""
    verdict, why = V.decide(1.0, 0.5, 1.5, 0.1, 1 / 11, n_null=10)
    assert verdict == "inconclusive"
    assert "larger than all 10 random heads" in why and "1/11 = 0.091" in why and "do as much" not in why
    verdict, why = V.decide(1.0, 0.5, 1.5, 0.1, 6 / 11, n_null=10)  # 5 of the 10 at least as large
    assert verdict == "inconclusive" and "5 of 10 random heads do as much" in why
    verdict, why = V.decide(-0.05, -0.2, -0.01, 0.1, 1.0, n_null=10)  # below zero, by less than min_effect
    assert verdict == V.UNDER_POWERED and "lies below zero" in why and "does not clear zero" not in why
    verdict, why = V.decide(0.05, 0.01, 0.2, 0.1, 0.01, n_null=10)  # above zero, under min_effect
    assert verdict == V.UNDER_POWERED and "lies above zero" in why and "does not clear zero" not in why
    assert "does not clear zero" in V.decide(0.5, -0.1, 1.1, 0.1, 0.01)[1]  # this one does straddle zero


def test_a_null_too_small_to_validate_is_said_in_the_report(planted):
    """p cannot go below 1/(n_null + 1): with 10 null heads (0.091 > alpha 0.05) no head can be
    validated, and validation.md says so in bold, naming the null it would take."""
    assert V.p_floor_problem(19, 0.05) == "" and V.p_floor_problem(None, 0.05) == ""
    why = V.p_floor_problem(10, 0.05)
    assert "1/11 = 0.091" in why and "above alpha 0.05" in why and "19 or more null heads" in why
    assert "99 or more" in V.p_floor_problem(50, 0.01)
    from analyses.validation.report import report_markdown

    model, _ = planted
    kw = dict(prompts=V.planted_prompts(n=6, seed=0), seed=2, n_boot=50)
    small = V.run(model, _planted_labels(), n_null=6, **kw)
    md = report_markdown(small, "given")
    assert "**No head can be validated here**: the smallest p a head can reach against 6 random heads" in md
    wide = V.run(model, _planted_labels(), alpha=0.2, n_null=6, **kw)  # 1/7 = 0.143 <= 0.2
    assert "No head can be validated" not in report_markdown(wide, "given")


def test_validation_settings_are_checked_before_the_work(planted):
    model, _ = planted
    for kw, name in [
        (dict(alpha=2.0), "alpha=2.0"),
        (dict(alpha=0.0), "alpha=0.0"),
        (dict(n_null=0), "n_null=0"),
        (dict(max_heads_per_role=0), "max_heads_per_role=0"),
    ]:
        with pytest.raises(ValueError, match=name):
            V.run(model, _planted_labels(), prompts=V.planted_prompts(n=4, seed=0), **kw)
    from analyses.validation.powered import run_powered

    with pytest.raises(ValueError, match="max_heads_per_role=0"):
        run_powered(model, _planted_labels(), max_heads_per_role=0)
    with pytest.raises(ValueError, match="n=0"):
        run_powered(model, _planted_labels(), n=0)
    from analyses.validation import job

    # the named runs: n=0 is refused (it used to mean the default, 120), before a model is looked up
    with pytest.raises(ValueError, match="n=0"):
        job.run_powered_named("no-such-model", n=0)
    with pytest.raises(ValueError, match="n_null=0"):
        job.run_named("no-such-model", n_null=0)


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--alpha", "2"], "--alpha"),
        (["--alpha", "nan"], "--alpha"),
        (["--n-null", "0"], "--n-null"),
        (["--n", "0"], "--n"),
        (["--powered", "--n", "0"], "--n"),
        (["--powered", "--max-heads-per-role", "0"], "--max-heads-per-role"),
        (["--n-layer-null", "-1"], "--n-layer-null"),
    ],
)
def test_validate_refuses_bad_numbers_at_parse_time(tmp_path, monkeypatch, capsys, flags, named):
    import models
    from analyses.cli import main

    monkeypatch.setattr(models, "load", lambda *a, **k: pytest.fail("loaded a model before checking the flags"))
    with pytest.raises(SystemExit) as e:
        main(["validate", "--labels", "patterns", "--out", str(tmp_path / "o"), *flags])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {named}:" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_validate_warns_before_loading_when_no_head_can_be_validated(tmp_path, monkeypatch, capsys):
    import models
    from analyses.cli import main

    def stop(*a, **k):
        raise ValueError("stop here")

    monkeypatch.setattr(models, "load", stop)
    assert main(["validate", "--labels", "patterns", "--out", str(tmp_path / "o"), "--n-null", "10"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("interp validate: warning: --n-null 10: the smallest p") and "1/11" in err[0]
    assert err[1] == "interp validate: stop here"
    main(["validate", "--labels", "patterns", "--out", str(tmp_path / "o"), "--powered", "--alpha", "0.01"])
    assert "--n-null 30 (the default): the smallest p" in capsys.readouterr().err
    main(["validate", "--labels", "patterns", "--out", str(tmp_path / "o"), "--n-null", "19"])
    assert "warning" not in capsys.readouterr().err
