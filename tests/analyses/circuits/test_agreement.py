"""The rank agreement of pattern scores and exact patching (``analyses.circuits.agreement``): its
statistics against planted score / effect matrices (Spearman, the bootstrap over prompts, the
top-k overlap, computed here independently), and a tiny model end to end: the per-head effects are
``exact_patching``'s per-pair effects, the scores are the attention read by hand from a
``hook_pattern`` cache (the retrospective one on an unpadded prompt with its answer appended), the
targets are the words the templates put there."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import analyses.circuits.agreement as A
from analyses.circuits.exact import exact_patching
from analyses.contract import HEAD_KEYS
from interp.pairs import Pairs
from tests.analyses.circuits.test_contract_face import make_tiny_lm

pytestmark = pytest.mark.usefixtures("one_thread")


def _spearman_by_hand(a, b) -> float:
    """Spearman's rho of two tie-free vectors: 1 - 6 sum d^2 / (n (n^2 - 1))."""
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    n = len(a)
    return 1 - 6 * float(((ra - rb) ** 2).sum()) / (n * (n * n - 1))


def _planted(n=30, heads=12, seed=1):
    rng = np.random.default_rng(seed)
    score = rng.random((n, heads)) + np.linspace(0, 1, heads)  # heads rank by index, with per-pair noise
    effect = -(rng.random((n, heads)) + np.linspace(0, 1, heads)[::-1] * 0.5)
    return score, effect


# ---- the statistics on planted matrices -----------------------------------------------------------


def test_bootstrap_weights_count_a_seeded_resample_with_replacement():
    w = A.bootstrap_weights(7, 50, seed=3)
    idx = np.random.default_rng(3).integers(0, 7, size=(50, 7))
    assert w.shape == (50, 7) and (w.sum(1) == 7).all()
    for b in range(50):
        assert (w[b] == np.bincount(idx[b], minlength=7)).all()


def test_rho_and_its_interval_are_spearman_over_resampled_means():
    score, effect = _planted()
    w = A.bootstrap_weights(len(score), 200, seed=5)
    rho, low, high = A.rank_agreement_ci(score, -effect, w)
    assert rho == pytest.approx(_spearman_by_hand(score.mean(0), -effect.mean(0)), abs=1e-12)
    idx = np.random.default_rng(5).integers(0, len(score), size=(200, len(score)))
    boot = [_spearman_by_hand(score[i].mean(0), -effect[i].mean(0)) for i in idx]
    assert (low, high) == pytest.approx((np.quantile(boot, 0.025), np.quantile(boot, 0.975)), abs=1e-9)
    assert low <= rho <= high


def test_a_head_order_kept_in_every_pair_gives_rho_one_with_a_point_interval():
    score = np.random.default_rng(0).random((20, 9)) * 0.1 + np.arange(9)  # every pair ranks heads alike
    effect = -2.0 * score  # what a head attends to is what it does, pair by pair
    w = A.bootstrap_weights(20, 100, seed=0)
    assert A.rank_agreement_ci(score, -effect, w) == pytest.approx((1.0, 1.0, 1.0))
    assert A.rank_agreement_ci(score, effect, w) == pytest.approx((-1.0, -1.0, -1.0))  # the sign matters


def test_top_overlap_counts_the_heads_both_top_lists_share():
    score = np.array([9, 8, 7, 6, 5, 0, 0, 0, 1.0])  # top 5 by score: 0..4
    drop = np.array([0, 0, 0, 9, 8, 7, 6, 5, 1.0])  # top 5 by drop: 3..7
    shared, by_score, by_drop = A.top_overlap(score, drop, 5)
    assert (shared, by_score, by_drop) == (2, [0, 1, 2, 3, 4], [3, 4, 5, 6, 7])
    assert A.top_overlap(score, score, 3)[0] == 3


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match="use one or more of subject_verb, ioi, pronoun_gender"):
        A.run("unused", tasks=["induction"])
    with pytest.raises(ValueError, match="n_boot must be an integer >= 10"):
        A.run("unused", n_boot=3)
    same = torch.tensor([[1, 2, 3], [1, 2, 3]])
    pairs = Pairs(same, same, right=[5, 5], wrong=[6, 6], position=[2, 2])
    with pytest.raises(ValueError, match="subject_verb pair 0: expected one position"):
        A.target_positions("subject_verb", pairs)


def test_the_commands_task_list_is_the_librarys():
    import analyses.cli.agreement as cli

    assert cli.TASKS == A.AGREEMENT_TASKS


# ---- a tiny model end to end -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_result():
    torch.set_num_threads(1)
    model = make_tiny_lm()
    res = A.run(model, n=20, n_boot=50, seed=2, min_accuracy=0, min_pairs=4, batch_size=8)
    return model, res


@pytest.mark.slow
def test_effects_are_exact_patchings_per_pair_effects(tiny_result):
    model, res = tiny_result
    assert set(res.raw) == set(A.AGREEMENT_TASKS)
    for task, t in res.raw.items():
        again = exact_patching(model, t.pairs, batch_size=5, fast=False)  # another batching, one head a run
        np.testing.assert_allclose(t.effects.per_pair, again.per_pair, rtol=1e-4, atol=1e-5)
        rows = res.per_head[res.per_head["task"] == task]
        np.testing.assert_allclose(rows["effect"].to_numpy(), again.per_pair.mean(0), rtol=1e-4, atol=1e-5)
        assert (rows["effect_low"] <= rows["effect"] + 1e-12).all()
        assert (rows["effect"] <= rows["effect_high"] + 1e-12).all()


def _by_hand(model, tokens: torch.Tensor, row: int, target: int) -> np.ndarray:
    """[layer * head] attention from ``row`` to ``target`` in one unpadded prompt, from a cache."""
    _, cache = model.run_with_cache(tokens[None], names_filter=lambda n: n.endswith("hook_pattern"))
    n_layers = model.cfg.n_layers
    return np.concatenate([cache[f"blocks.{lay}.attn.hook_pattern"][0, :, row, target].double().numpy()
                           for lay in range(n_layers)])  # fmt: skip


@pytest.mark.slow
def test_scores_are_the_attention_read_from_a_pattern_cache(tiny_result):
    model, res = tiny_result
    for task, t in res.raw.items():
        assert set(t.scores) == set(A.TASK_READINGS[task])
        for i in range(0, len(t.pairs), 3):
            p, tgt = int(t.pairs.position[i]), int(t.targets[i])
            prompt = t.pairs.clean[i, : p + 1]
            np.testing.assert_allclose(t.scores["predictive"][i], _by_hand(model, prompt, p, tgt), atol=1e-5)
            if "retrospective" in t.scores:
                answered = torch.cat([prompt, t.pairs.right[i : i + 1]])
                by_hand = _by_hand(model, answered, p + 1, tgt)
                np.testing.assert_allclose(t.scores["retrospective"][i], by_hand, atol=1e-5)
        rows = res.per_head[res.per_head["task"] == task]
        for r, score in t.scores.items():
            np.testing.assert_allclose(rows[r].to_numpy(), score.mean(0))
            assert ((rows[f"{r}_argmax"] >= 0) & (rows[f"{r}_argmax"] <= 1)).all()


@pytest.mark.slow
def test_targets_are_the_templates_words(tiny_result):
    model, res = tiny_result
    dec = model.tokenizer.hf.decode
    for task, t in res.raw.items():
        for i, tgt in enumerate(t.targets):
            word = dec([int(t.pairs.clean[i, tgt])]).strip()
            text = t.pairs.clean_texts[i]
            if task == "subject_verb":  # "The keys near the cabinet": the word after "The"
                assert word == text.split()[1]
            elif task == "ioi":  # the indirect object: the answer's name
                assert word == dec([int(t.pairs.right[i])]).strip() and text.count(word) == 1
            else:  # rc / pp: "The {A} who met the {B} ..."; after / said: "... the {B} ..., the {A} ..."
                nouns = [w.strip(",") for k, w in enumerate(text.split()) if k and text.split()[k - 1].lower() == "the"]
                assert word == nouns[0 if t.pairs.template[i] in ("rc", "pp") else 1], text


@pytest.mark.slow
def test_the_summary_ranks_mean_score_against_mean_drop(tiny_result):
    from scipy.stats import spearmanr

    _, res = tiny_result
    assert tuple(res.heads.columns[:3]) == HEAD_KEYS
    assert len(res.summary) == 5  # subject_verb and pronoun_gender in both readings, ioi predictive only
    for r in res.summary.itertuples():
        t = res.raw[r.task]
        score, drop = t.scores[r.reading].mean(0), -t.effects.per_pair.mean(0)
        assert r.rho == pytest.approx(spearmanr(score, drop)[0])
        assert r.rho_abs == pytest.approx(spearmanr(score, np.abs(t.effects.per_pair.mean(0)))[0])
        assert r.n_pairs == len(t.pairs) and r.top_overlap == len(set(r.top_score.split()) & set(r.top_effect.split()))
        assert r.rho_low <= r.rho <= r.rho_high


@pytest.mark.slow
def test_an_unsolved_task_is_listed_and_skipped(tmp_path):
    torch.set_num_threads(1)
    model = make_tiny_lm()
    res = A.run(model, ["subject_verb", "ioi"], n=8, n_boot=10, min_accuracy=0, min_pairs=10**6)
    assert not res.tasks["solved"].any() and res.tasks["note"].str.startswith("not solved: only").all()
    assert len(res.summary) == 0 and res.raw == {}
    A.write(res, tmp_path / "out")
    assert "**No solved task**" in (tmp_path / "out" / "agreement.md").read_text()
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")  # the header row, not a 1-byte file
    assert len(summary) == 0 and list(summary.columns) == A.SUMMARY_COLUMNS
    assert {"layer", "head", "task"} <= set(pd.read_csv(tmp_path / "out" / "heads.csv").columns)


def test_magnitude_ranks_the_absolute_mean_effect():
    score = np.tile(np.arange(6.0), (4, 1))
    effect = np.tile(np.array([0.0, -1.0, 2.0, -3.0, 4.0, -5.0]), (4, 1))  # |mean| rises with the score
    w = A.bootstrap_weights(4, 20, seed=0)
    assert A.rank_agreement_ci(score, effect, w, magnitude=True) == pytest.approx((1.0, 1.0, 1.0))
    assert A.rank_agreement_ci(score, effect, w)[0] == pytest.approx(_spearman_by_hand(np.arange(6.0), effect[0]))


def test_the_command_refuses_a_bad_task_before_loading_a_model(tmp_path, capsys):
    from analyses.cli import main

    assert main(["agreement", "--task", "subject_verb,induction", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--task induction: the agreement tasks are subject_verb, ioi, pronoun_gender" in err
    assert not (tmp_path / "o").exists()
