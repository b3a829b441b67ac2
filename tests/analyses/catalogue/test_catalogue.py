"""The head catalogue (``analyses.catalogue``): the verdict rule at its boundaries, answer-position
patching against a full rerun that patches the same head at the same position, and the join on a
planted model whose heads are known: a previous-token copy head the task needs (``mechanism``), a
decoy with the same pattern that writes nothing (``pattern, no effect``), a second copy head the
heads table does not name (``effect, no named pattern``), and the verdicts moving when the label or
the weights under them change (the model, its pairs and heads table: ``analyses.catalogue.planted``,
which notebook 04 walks through). The workers give the one process's table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from analyses import catalogue as C
from analyses.catalogue.patching import all_position_patching, answer_patching, head_order
from analyses.catalogue.planted import COPY, DECOY, HIDDEN, heads_table, planted_catalogue_inputs
from analyses.catalogue.planted import ROLE_TASKS as PLANTED_ROLES
from analyses.catalogue.planted import copy_model as planted
from analyses.catalogue.planted import copy_pairs as planted_pairs
from analyses.contract import check_result
from analyses.validation.planted import planted_copies
from interp.distributed import SINGLE, launch
from interp.interventions import cache_z
from interp.pairs import Pairs, logit_diff

pytestmark = pytest.mark.usefixtures("one_thread")

# ---- the rule -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "interval, state, sign",
    [
        ((0.5, 0.2, 0.8), "effect", 1),  # ci_low >= min_effect (0.2)
        ((-0.5, -0.8, -0.2), "effect", -1),  # ci_high <= -min_effect: it works against the behaviour
        ((0.0, -0.19, 0.19), "no effect", 0),  # inside the band
        ((0.1, -0.2, 0.19), "under-powered", 0),  # touches the band's edge: not equivalence
        ((0.3, 0.19, 0.41), "under-powered", 0),  # clears 0 but not min_effect
        ((math.nan, math.nan, math.nan), "not measured", 0),
    ],
)
def test_causal_state_at_its_boundaries(interval, state, sign):
    assert C.causal_state(*interval, min_effect=0.2) == (state, sign)


def test_decide_joins_the_pattern_with_the_state():
    assert C.decide(True, "effect")[0] == "mechanism"
    assert C.decide(True, "no effect")[0] == "pattern, no effect"
    assert C.decide(True, "under-powered")[0] == "inconclusive"
    assert C.decide(False, "effect")[0] == "effect, no named pattern"
    assert C.decide(False, "effect", "no-op sink")[0] == "effect, no named pattern"  # a sink that matters
    assert C.decide(False, "no effect", "no-op sink")[0] == "idle"
    assert C.decide(False, "under-powered", "local")[0] == "quiet"
    assert C.decide(True, "not measured")[0] == "no causal test"
    verdict, reason = C.decide(True, "effect", sign=-1)  # a negative name mover is part of the mechanism
    assert verdict == "mechanism" and "works against the behaviour" in reason
    assert "works against" not in C.decide(True, "effect", sign=1)[1]
    with pytest.raises(ValueError, match="unknown causal state 'big'"):
        C.decide(True, "big")


def test_the_role_to_task_map():
    assert C.tasks_of("subject_verb (predictive)") == ("subject_verb",)
    assert C.tasks_of("subject_verb (retrospective)") == ()  # the verb is the answer: not in the prompt
    assert C.tasks_of("anaphora (predictive)") == ("pronoun_gender",)
    # the generated pairs cannot test a previous-token head (docs/catalogue.md); pairs of one's own can
    assert C.tasks_of("previous_token") == () and C.tasks_of("duplicate_token") == ("ioi",)
    assert C.tasks_of("previous_token", role_tasks=PLANTED_ROLES) == ("induction",)
    assert C.tasks_of("local") == ()
    assert C.tasks_of("subject_verb (retrospective)", encoder=True) == ("subject_verb (probe)",)
    # where a role acts on a task: induction heads at the answer on induction, at the repeated name on IOI
    assert not C.acts_elsewhere("induction", "induction") and C.acts_elsewhere("induction", "ioi")
    assert C.acts_elsewhere("previous_token", "induction") and not C.acts_elsewhere("ioi (predictive)", "ioi")


def test_t_interval_by_hand():
    x = np.array([[1.0, 0.0], [2.0, 0.0], [4.0, 0.0]])
    mean, lo, hi = C.t_interval(x)
    half = 4.302652729911275 * np.std(x[:, 0], ddof=1) / math.sqrt(3)  # t(0.975, 2)
    assert mean[0] == pytest.approx(7 / 3) and (lo[0], hi[0]) == pytest.approx((7 / 3 - half, 7 / 3 + half))
    assert lo[1] == hi[1] == 0.0


# ---- the planted model ----------------------------------------------------------------------------


def _verdicts(res) -> dict:
    t = res.table[res.table["task"] == "induction"]
    return {(int(a), int(b)): v for a, b, v in zip(t["layer"], t["head"], t["verdict"])}


def test_answer_patching_equals_patching_the_answer_position_in_a_full_run():
    model = planted()
    for pairs in (planted_pairs(9, seed=2), planted_pairs(9, seed=3, pad_some=True)):
        eff, clean, corrupted = answer_patching(model, pairs, batch_size=4)
        out, z = cache_z(model, pairs.corrupted, range(2), attention_mask=pairs.corrupted_attention_mask)
        kw = {} if pairs.attention_mask is None else {"attention_mask": pairs.attention_mask}
        with torch.no_grad():
            base = logit_diff(model(pairs.clean, **kw), pairs).numpy()
            assert np.allclose(corrupted, logit_diff(out, pairs).numpy()) and np.allclose(clean, base, atol=1e-4)
            rows = torch.arange(len(pairs))
            for i, (layer, head) in enumerate(head_order(model)):

                def patch(x, hook, layer=layer, head=head):
                    x = x.clone()
                    x[rows, pairs.position, head] = z[layer][rows, pairs.position, head]
                    return x

                with model.hooks(fwd_hooks=[(f"blocks.{layer}.attn.hook_z", patch)]):
                    patched = logit_diff(model(pairs.clean, **kw), pairs).numpy()
                assert np.allclose(eff[:, i], base - patched, atol=1e-4), (layer, head)
    assert eff[:, 0].min() > 10  # the copy head carries the answer: not a comparison of zeros


def test_all_position_patching_is_at_least_the_answer_positions_for_a_copy_head():
    model, pairs = planted(), planted_pairs(8, seed=4)
    both = all_position_patching(model, pairs, [COPY, DECOY], batch_size=4)
    eff, clean, _ = answer_patching(model, pairs)
    assert both.shape == (8, 2) and np.allclose(both[:, 0], eff[:, 0], atol=1e-4)  # it only acts at the answer
    assert abs(both[:, 1].mean()) < 0.05 * clean.mean()  # the decoy: below the catalogue's minimum effect


def test_the_planted_heads_get_their_verdicts():
    model, labels, pairs = planted_catalogue_inputs(n=24)
    res = C.run(model, labels, n=24, eap_pairs=8, ig_steps=2, pairs=pairs, role_tasks=PLANTED_ROLES)
    v = _verdicts(res)
    assert v[COPY] == "mechanism"
    assert v[DECOY] == "pattern, no effect"
    assert v[HIDDEN] == "effect, no named pattern"
    t = res.table.set_index(["layer", "head"])
    decoy = t.loc[DECOY]
    assert -decoy.min_effect < decoy.ci_low and decoy.ci_high < decoy.min_effect  # inside the band
    assert t.loc[COPY, "site"] == "all positions" and t.loc[HIDDEN, "site"] == "answer position"
    assert t.loc[COPY, "rank"] == 1 and t.loc[COPY, "eap_ig_rank"] == 1
    others = [v[h] for h in v if h not in (COPY, DECOY, HIDDEN)]
    assert set(others) == {"quiet"}
    assert res.tasks.set_index("task").loc["induction", "accuracy"] == 1.0
    assert check_result(res, scores_heads=True) == []


def test_a_verdict_follows_the_label_and_the_weights_under_it():
    pairs = {"induction": planted_pairs(24)}
    model = planted()
    # the label moves: name the hidden copy head, drop the first one's label
    moved = C.run(
        model, heads_table(model, {HIDDEN: "induction"}), n=24, eap_pairs=0, pairs=pairs, role_tasks=PLANTED_ROLES
    )
    v = _verdicts(moved)
    assert v[HIDDEN] == "mechanism" and v[COPY] == "effect, no named pattern"
    # the weights move: the labelled copy head writes nothing any more
    with torch.no_grad():
        model.blocks[0].attn.W_O[0] = 0.0
    silenced = C.run(
        model, heads_table(model, {COPY: "previous_token"}), n=24, eap_pairs=0, pairs=pairs, role_tasks=PLANTED_ROLES
    )
    assert _verdicts(silenced)[COPY] == "pattern, no effect"


def test_pattern_no_effect_needs_the_interval_inside_the_band():
    """A labelled copy head of scale 0.2 (its effect, ~0.96, is below the minimum effect, ~1.2): on
    3 pairs the interval reaches past the band, so ``inconclusive``; on 24 it lies inside, so
    ``pattern, no effect``."""
    model = planted_copies({COPY: 1.0, HIDDEN: 0.2}, n_layers=2, n_heads=8)
    labels = heads_table(model, {HIDDEN: "induction"})
    for n, verdict in ((3, "inconclusive"), (24, "pattern, no effect")):
        res = C.run(model, labels, n=n, eap_pairs=0, pairs={"induction": planted_pairs(n)}, role_tasks=PLANTED_ROLES)
        row = res.table.set_index(["layer", "head"]).loc[HIDDEN]
        inside = -row.min_effect < row.ci_low and row.ci_high < row.min_effect
        assert row.verdict == verdict and inside == (n == 24) and row.n_pairs == n


def test_unsolved_tasks_are_listed_and_skipped():
    model = planted()
    bad = planted_pairs(24)
    swapped = Pairs(bad.clean, bad.corrupted, bad.wrong, bad.right, bad.position)  # the model gets all wrong
    res = C.run(
        model,
        heads_table(model, {COPY: "previous_token"}),
        n=24,
        eap_pairs=0,
        pairs={"induction": swapped},
        role_tasks=PLANTED_ROLES,
    )
    row = res.tasks.set_index("task").loc["induction"]
    assert not row.solved and row.accuracy == 0.0 and "does not show the behaviour" in row.note
    # the label has no solved task: one row saying so
    assert list(res.table["task"]) == [C.NO_TASK] and res.table.iloc[0].verdict == "no causal test"


def test_bad_input_is_refused_in_one_line():
    model = planted()
    with pytest.raises(ValueError, match="lacks columns"):
        C.run(model, pd.DataFrame(dict(layer=[0], head=[0], role=["local"], label=[True])))
    with pytest.raises(ValueError, match="at least 2 pairs"):
        C.run(model, heads_table(model, {}), n=1)
    other = heads_table(model, {}).assign(model="smollm2")
    with pytest.raises(ValueError, match="is of model smollm2, not 'planted'"):
        C.run(model, other)
    with pytest.raises(ValueError, match=r"labelled heads \[\(2, 0\)\] are not in the model"):
        heads_table(model, {(2, 0): "induction"})


def test_write_and_read_back(tmp_path):
    model = planted()
    res = C.run(model, heads_table(model, {COPY: "previous_token", DECOY: "previous_token"}), n=12, eap_pairs=0,
                pairs={"induction": planted_pairs(12)}, role_tasks=PLANTED_ROLES)  # fmt: skip
    folder = C.write(res, tmp_path / "out")
    assert {p.name for p in folder.iterdir() if not p.name.startswith(".")} == set(C.OUTPUTS)
    back = C.read_catalogue(folder)
    assert list(back.columns) == C.COLUMNS and len(back) == len(res.table)
    assert (back["verdict"] == res.table["verdict"]).all()
    md = (folder / "catalogue.md").read_text()
    assert "## Mechanisms (1)" in md and "| induction | L0H0 | previous_token |" in md
    assert "## Disagreements (2)" in md  # the decoy and the hidden copy head
    counts = C.verdict_counts(res.table)
    assert counts.loc["induction", "mechanism"] == 1 and counts.loc["induction"].sum() == 16
    with pytest.raises(FileNotFoundError, match="no catalogue here"):
        C.read_catalogue(tmp_path)


def _catalogue(world):
    model = planted()
    labels = heads_table(model, {COPY: "previous_token", DECOY: "previous_token"})
    pairs = {"induction": planted_pairs(20)}
    return C.run(model, labels, n=20, eap_pairs=8, ig_steps=2, batch_size=4, pairs=pairs, role_tasks=PLANTED_ROLES,
                 world=world)  # fmt: skip


def test_two_workers_write_the_one_process_catalogue(tmp_path):
    one = _catalogue(SINGLE)
    two = launch(_catalogue, workers=2, timeout=120)
    C.write(one, tmp_path / "one")
    C.write(two, tmp_path / "two")
    assert (tmp_path / "one" / "catalogue.csv").read_bytes() == (tmp_path / "two" / "catalogue.csv").read_bytes()
    assert (one.table["verdict"] == "mechanism").any()


def test_the_command_refuses_bad_flags_before_loading_a_model(tmp_path, capsys):
    from analyses.cli import main

    assert main(["catalogue", "--model", "smollm2", "--out", str(tmp_path / "none")]) == 2
    assert "no heads table at" in capsys.readouterr().err
    heads = tmp_path / "heads.csv"
    pd.DataFrame(dict(layer=[0], head=[0], role=["local"], label=[True])).to_csv(heads, index=False)
    for flag, value in (("--n", "1"), ("--eap-pairs", "-1"), ("--ig-steps", "0")):
        assert main(["catalogue", "--labels", str(heads), "--out", str(tmp_path / "o"), flag, value]) == 2
        assert f"{flag} {value}: must be at least" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_other_analyses_are_joined_from_the_files_they_write(tmp_path):
    """powered/powered.csv and groups.csv, retrieval/retrieval.csv and sinks/sinks_heads.csv in the columns that
    ``scripts/powered.sh``, ``interp retrieval`` and ``interp sinks`` write are joined per head (the
    sink share by length too); another model's tables are not."""
    from analyses.longctx.retrieval_report import read_retrieval

    model = planted()
    labels = heads_table(model, {COPY: "previous_token"})
    folder = tmp_path / "planted"
    for sub in ("powered", "retrieval", "sinks"):
        (folder / sub).mkdir(parents=True)
    pd.DataFrame(dict(model="planted", layer=[0], head=[0], role=["previous_token"], effect=[1.5],
                      verdict=["validated"])).to_csv(folder / "powered" / "powered.csv", index=False)  # fmt: skip
    pd.DataFrame(dict(model="planted", role=["previous_token"], size=[2], effect=[2.25], verdict=["validated"])).to_csv(
        folder / "powered" / "groups.csv", index=False
    )
    pd.DataFrame(dict(model="planted", layer=[0, 1], head=[0, 3], retrieval=[0.25, 0.5])).to_csv(
        folder / "retrieval" / "retrieval.csv", index=False
    )
    assert len(read_retrieval(folder / "retrieval" / "retrieval.csv")) == 2  # the format interp retrieval reads
    sinks = pd.DataFrame(
        dict(
            model="planted",
            role=["attention_sink"] * 2 + ["previous_token"],
            length=[512, 64, 64],
            layer=[0, 0, 0],
            head=[0, 0, 0],
            score=[0.8, 0.6, 0.9],
        )  # fmt: skip
    )
    sinks.to_csv(folder / "sinks" / "sinks_heads.csv", index=False)
    kw = dict(n=12, eap_pairs=0, pairs={"induction": planted_pairs(12)}, role_tasks=PLANTED_ROLES)
    t = C.run(model, labels, folder=folder, **kw).table.set_index(["layer", "head", "task"])
    row = t.loc[(0, 0, "induction")]
    assert row.powered_effect == 1.5 and row.powered_verdict == "validated"
    assert row.powered_group_effect == 2.25 and row.powered_group_verdict == "validated (group of 2)"
    assert t.loc[(1, 3, "induction")].powered_group_verdict == ""  # no role of its in a group
    assert row.retrieval == 0.25 and t.loc[(1, 3, "induction")].retrieval == 0.5
    assert row.sink_share == pytest.approx(0.7) and row.sink_by_length == "64: 0.600; 512: 0.800"
    assert math.isnan(t.loc[(1, 3, "induction")].sink_share)
    # the same files of another model: nothing joined, and the powered run reads "not run"
    for rel in ("powered/powered.csv", "powered/groups.csv", "retrieval/retrieval.csv", "sinks/sinks_heads.csv"):
        f = folder / rel
        pd.read_csv(f).assign(model="smollm2").to_csv(f, index=False)
    other = C.run(model, labels, folder=folder, **kw)
    row = other.table.set_index(["layer", "head", "task"]).loc[(0, 0, "induction")]
    assert row.powered_verdict == "not run" and math.isnan(row.retrieval) and math.isnan(row.sink_share)
    assert math.isnan(row.powered_group_effect)
    assert other.info["ran"] == {"powered": False, "retrieval": False, "sinks": False}


def test_the_report_sets_the_sink_label_aside_and_the_csv_keeps_it():
    model = planted()
    res = C.run(model, heads_table(model, {COPY: "previous_token", DECOY: "previous_token"}), n=12, eap_pairs=0,
                pairs={"induction": planted_pairs(12)}, role_tasks=PLANTED_ROLES)  # fmt: skip
    t = res.table.copy()
    t.loc[t["layer"].eq(COPY[0]) & t["head"].eq(COPY[1]), "other_roles"] = "attention_sink; noop_sink"
    t.loc[t["layer"].eq(HIDDEN[0]) & t["head"].eq(HIDDEN[1]), "other_roles"] = "attention_sink"
    md = C.markdown(t, res.tasks, res.info)
    assert "| induction | L0H0 | previous_token | noop_sink |" in md
    assert f"| induction | L{HIDDEN[0]}H{HIDDEN[1]} | - | - |" in md and "attention_sink" not in md
