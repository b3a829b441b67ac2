"""Labels v4 in the causal validation (issue 35 section 3): the equivalence rule of the verdicts, the
two readings of a relation validated as two roles, the ablation at the position where a predictive
role acts, and the one input convention of every analysis of a model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from analyses import validation as V
from analyses.heads.adapter import model_input
from analyses.heads.roles import PREDICTIVE, READING_ROLES, RELATIONS, label_name
from analyses.validation.powered import _PAIR_METRICS, AT_ANSWER, POWERED_METRICS, SITES, answer_source, run_powered
from analyses.validation.prompts import PAIR_TASKS, PromptSet, Task
from interp import interventions as iv
from interp.stats import bootstrap_ci

pytestmark = pytest.mark.usefixtures("one_thread")

# -- the verdict rule: "no effect" is an equivalence result, a wide interval is under-powered ------------


def test_planted_wide_interval_is_under_powered_and_narrow_one_no_effect():
    """A planted table of effects: two labelled heads with the same mean effect (0) and the same null;
    one measured on many consistent prompts (a narrow interval inside +-min_effect), one on noisy
    prompts (an interval past +-min_effect). Only the first may be called "no effect"."""
    lab = pd.DataFrame(
        [
            dict(layer=0, head=0, role="local", score=0.9, metric="m"),
            dict(layer=0, head=1, role="local", score=0.8, metric="m"),
        ]
    )
    rng = np.random.default_rng(0)
    narrow, wide = rng.normal(0, 0.01, 400), rng.normal(0, 3.0, 12)
    effects = {}
    for h, per in (((0, 0), narrow), ((0, 1), wide)):
        lo, hi = bootstrap_ci(per - per.mean(), n_boot=500, seed=0)
        effects[(h, "m")] = (0.0, lo, hi, per.size)
    null = [(1, k) for k in range(10)]
    for k, h in enumerate(null):
        effects[(h, "m")] = (0.01 * k, 0.0, 0.02 * k, 12)
    pools = (null, {0: null})
    t = V.verdict_table(lab, effects, {"m": np.ones(12)}, {"m": 0.1}, pools, set(), dict(model="x", ablation="mean"))
    t = t.set_index("head")
    assert t.loc[0, "ci_high"] < 0.1 and t.loc[1, "ci_high"] > 0.1  # the planted widths
    assert t.loc[0, "verdict"] == "no effect", t.loc[0].to_dict()
    assert t.loc[1, "verdict"] == "inconclusive (under-powered)", t.loc[1].to_dict()
    assert "pattern only" not in V.VERDICTS and "pattern only" in V.OLD_VERDICTS


# -- two readings, two roles ------------------------------------------------------------------------------


def _heads_csv(path, with_reading: bool) -> None:
    rows = [
        dict(model="planted", layer=0, head=0, role="subject_verb", direction="verb->subject", reading="retrospective"),
        dict(
            model="planted", layer=0, head=1, role="subject_verb", direction="pre-verb->subject", reading="predictive"
        ),
        dict(model="planted", layer=0, head=0, role="subject_verb", direction="subject->verb", reading="retrospective"),
        dict(model="planted", layer=0, head=2, role="ioi", direction="final->indirect_object", reading="predictive"),
        dict(model="planted", layer=0, head=3, role="previous_token", direction="back", reading="-"),
    ]
    df = pd.DataFrame(rows).assign(score=[0.9, 0.8, 0.7, 0.6, 0.5], label=True)
    (df if with_reading else df.drop(columns="reading")).to_csv(path, index=False)


@pytest.mark.parametrize("with_reading", [True, False])
def test_read_labels_names_each_reading_as_its_own_role(tmp_path, with_reading):
    """heads.csv with the ``reading`` column, and an old one without it (read off the direction,
    the predictive directions of ``roles.PREDICTIVE`` included): subject-verb in both readings is two
    roles, each with its metric; IOI gets the IOI logit difference."""
    _heads_csv(tmp_path / "heads.csv", with_reading)
    lab = V.read_labels(tmp_path / "heads.csv")
    assert lab["reading"].tolist() == ["retrospective", "predictive", "retrospective", "predictive", "-"]
    frame = V.runner._labels_frame(lab)
    got = sorted(zip(frame["layer"], frame["head"], frame["role"]))
    assert got == [
        (0, 0, "subject_verb (retrospective)"),  # two directions of one reading: one hypothesis
        (0, 1, "subject_verb (predictive)"),
        (0, 2, "ioi (predictive)"),
        (0, 3, "previous_token"),
    ]
    metrics = {r: POWERED_METRICS[r] for r in frame["role"]}
    assert metrics["subject_verb (retrospective)"] == metrics["subject_verb (predictive)"] == "sv_logit_diff"
    assert metrics["ioi (predictive)"] == "ioi_logit_diff" and _PAIR_METRICS["ioi_logit_diff"] == "ioi"
    assert V.role_metric("subject_verb (predictive)", True) == "sv_logit_diff"


def test_hand_written_table_without_direction_keeps_its_role_names():
    df = pd.DataFrame([dict(layer=0, head=0, role="subject_verb", label=True)])
    assert V.role_names(V.check_labels(df)) == ["subject_verb"]


def test_every_reading_name_has_its_metric_and_site():
    """The metric tables key on ``roles.label_name``'s names: every relation's retrospective reading,
    every predictive one; the predictive ones are ablated at the answer position, the others at all."""
    names = [label_name(r, "retrospective") for r in READING_ROLES if r in RELATIONS]
    names += [label_name(r, "predictive") for r in PREDICTIVE]
    for name in names:
        assert name in POWERED_METRICS and name in V.ROLE_METRICS, name
        assert (name in AT_ANSWER) == name.endswith("(predictive)"), name
        metric = POWERED_METRICS[name]
        assert _PAIR_METRICS[metric] in PAIR_TASKS


# -- ablation where the role acts -------------------------------------------------------------------------


def test_answer_source_changes_only_the_answer_position():
    g = torch.Generator().manual_seed(0)
    z = {0: torch.randn(5, 7, 3, 4, generator=g), 2: torch.randn(5, 7, 3, 4, generator=g)}
    pos = np.array([6, 4, 5, 6, 3])
    src = answer_source(z, pos, "mean")
    rows = torch.arange(5)
    for layer, value in z.items():
        keep = torch.ones(5, 7, dtype=torch.bool)
        keep[rows, torch.as_tensor(pos)] = False
        assert torch.equal(src[layer][keep], value[keep])  # every other position: the clean z
        mean = value[rows, torch.as_tensor(pos)].mean(0)
        assert torch.allclose(src[layer][rows, torch.as_tensor(pos)], mean.expand(5, 3, 4))
    zero = answer_source(z, pos, "zero")
    assert (zero[0][rows, torch.as_tensor(pos)] == 0).all()


def _copy_prompts(n=48, length=12, vocab=12, seed=0) -> PromptSet:
    """Period-2 sequences (``test_powered``'s); the answer read at a position that varies per prompt."""
    ps = V.planted_prompts(n=n, length=length, vocab=vocab, seed=seed)
    pos = np.where(np.arange(n) % 2 == 0, length - 1, length - 3)
    rows = np.arange(n)
    right = ps.tokens[rows, pos - 1].numpy()  # period 2: the next token is the previous one
    task = Task("copy_logit_diff", "logit_diff", "logit(next) - logit(current)", rows, pos=pos, right=right)
    task.wrong = ps.tokens[rows, pos].numpy()
    return PromptSet(ps.tokens, ps.attention_mask, ps.texts, ps.family, {"copy_logit_diff": task})


def test_predictive_role_is_ablated_at_the_answer_position_and_says_so():
    """A planted copy head labelled in the predictive reading: its effect is the one of replacing its
    z at each prompt's answer position by the mean there (``answer_source``), not the all-position
    mean's; the retrospective reading of the same head is ablated at every position. Both say where."""
    head = (0, 2)
    model = V.planted_copies({head: 5.0, (0, 5): 1.0})
    ps = _copy_prompts()
    lab = pd.DataFrame(
        [
            dict(layer=0, head=2, role="subject_verb", direction="pre-verb->subject", score=1.0, label=True),
            dict(layer=0, head=2, role="subject_verb", direction="verb->subject", score=1.0, label=True),
        ]
    )
    metrics = {"subject_verb (predictive)": "copy_logit_diff", "subject_verb (retrospective)": "copy_logit_diff"}
    res = run_powered(model, lab, prompts={"copy_logit_diff": ps}, metrics=metrics, n_boot=200, n_null=10)
    t = res.table.set_index("role")
    assert t.loc["subject_verb (predictive)", "ablated_at"] == SITES["answer"]
    assert t.loc["subject_verb (retrospective)", "ablated_at"] == SITES["all"]
    assert res.info["ablated_at"]["subject_verb (predictive)"] == SITES["answer"]
    func = V.metric_functions(ps)["copy_logit_diff"]
    clean_out, z = iv.cache_z(model, ps.tokens, [0], attention_mask=ps.attention_mask)
    clean = func(clean_out).numpy()
    expected = {}
    for site, source in (
        ("answer", answer_source(z, ps.tasks["copy_logit_diff"].pos, "mean")),
        ("all", iv.ablation_source(z, "mean", attention_mask=ps.attention_mask)),
    ):
        with iv.ablated(model, [head], source), torch.no_grad():
            expected[site] = float((clean - func(model(ps.tokens, attention_mask=ps.attention_mask)).numpy()).mean())
    assert abs(expected["answer"] - expected["all"]) > 1e-3  # the two sites differ on this model
    assert t.loc["subject_verb (predictive)", "effect"] == pytest.approx(expected["answer"], rel=1e-5)
    assert t.loc["subject_verb (retrospective)", "effect"] == pytest.approx(expected["all"], rel=1e-5)


# -- one input convention -------------------------------------------------------------------------------


def test_one_input_convention_per_model(hf_smollm2, hf_minilm):
    """SmolLM2 (no BOS of its own): <|endoftext|> first, as the probe's sink; MiniLM keeps its [CLS];
    a tokenizer with no special token to put first is left as it is."""
    from tests.factories import word_tokenizer

    tok, what = model_input(hf_smollm2[1])
    assert what == "prepend <|endoftext|>"
    assert tok("The keys").input_ids[0, 0] == hf_smollm2[1].convert_tokens_to_ids("<|endoftext|>")
    assert model_input(tok)[1] == what  # idempotent
    assert model_input(hf_minilm[1])[1] == "as tokenised ([CLS] first)"
    assert model_input(word_tokenizer())[1] == "as tokenised (no sink token)"
