"""Head-role classifier: scorers on hand-made patterns, planted heads in hand-built models, agreement
with transformer_lens.head_detector, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import models
from analyses import data, heads
from analyses.data import Item
from analyses.heads import design, scoring
from tests.factories import ID, planted_items, planted_model, tiny_config, word_tokenizer

EXPECTED = {
    (0, "previous_token", "all"),
    (0, "local", "all"),
    (1, "delimiter", "all"),
    (1, "punctuation", "all"),
    (1, "sep_eos", "all"),  # '.' ends every sentence
    (2, "subject_verb", "verb->subject"),
    (3, "broad", "all"),  # zero weights: exactly uniform attention
    # only verb queries have query weights, so every other row of head 2 is uniform: on average its rows
    # are more even than a random (Dirichlet) row over the same keys, broad's reference
    (2, "broad", "all"),
}


@pytest.fixture(scope="module")
def planted_df():
    m = planted_model()
    return heads.probe_items(m, planted_items(160, seed=1), n_repeat=60, seed=0, n_boot=100, weighting=("attention",))


def test_planted_patterns_are_what_the_weights_say():
    m = planted_model()
    batch = m.tokenizer.words([["the", "cat", "of", "the", "mat", "sleeps", "."]])
    _, cache = m.run_with_cache(batch.input_ids, return_type=None, names_filter="blocks.0.attn.hook_pattern")
    p = cache["blocks.0.attn.hook_pattern"][0]
    assert p[0, 3, 2] > 0.99 and p[1, 2, 6] > 0.99 and p[2, 5, 1] > 0.99
    torch.testing.assert_close(p[3], torch.full((7, 7), 1 / 7))


def test_planted_heads_get_exactly_their_labels(planted_df):
    got = {(int(r.head), r.role, r.direction) for r in planted_df[planted_df.label].itertuples()}
    assert got == EXPECTED
    df = heads.headline(planted_df)  # one row per head, role and direction: the pooled one
    sv = df[(df.role == "subject_verb") & (df.direction == "verb->subject")].set_index("head")
    assert sv.loc[2, "score"] == 1.0 and 0.3 < sv.loc[2, "baseline"] < 0.7  # best offset: right about half the time
    assert sv.loc[2, "ci_low"] > sv.loc[2, "baseline"]
    prev = df[df.role == "previous_token"].set_index("head")
    assert prev.loc[0, "score"] > 0.8 and prev.loc[0, "null_score"] < 0.3


def test_schema_and_roles(planted_df):
    assert list(planted_df.columns) == heads.COLUMNS
    df = heads.headline(planted_df)
    assert {"local", "subject_verb", "anaphora", "delimiter"} <= set(df.role)  # the user's four, always present
    ana = df[df.role == "anaphora"]
    assert (ana.n == 0).all() and not ana.label.any() and ana.p_value.isna().all()  # no anaphora items given
    assert set(df.role) <= set(heads.ROLES)
    assert df.label.dtype == bool
    # bidirectional: both directions of subject-verb
    assert set(df[df.role == "subject_verb"].direction) == {"verb->subject", "subject->verb"}
    # every scored row has an interval around its score (percentile bootstrap over sentences)
    scored = df[df.n >= 2]
    assert ((scored.ci_low <= scored.score + 1e-9) & (scored.score <= scored.ci_high + 1e-9)).all()
    summary = heads.head_summary(df)
    assert summary.set_index("head").loc[3, "roles"] == "broad"


def test_causal_model_scores_only_looking_back():
    m = planted_model("causal")
    df = heads.headline(
        heads.probe_items(
            m, planted_items(80, seed=2), n_repeat=0, null_model=False, n_boot=20, weighting=("attention",)
        )
    )
    # retrospective only looking back, and the predictive reading beside it
    assert set(df[df.role == "subject_verb"].direction) == {"verb->subject", "pre-verb->subject"}
    prev = df[(df.role == "previous_token")].set_index("head")
    assert prev.loc[0, "label"]
    sv = df[(df.role == "subject_verb") & (df.direction == "verb->subject")].set_index("head")
    assert sv.loc[2, "label"] and sv.loc[2, "score"] == 1.0


@pytest.mark.parametrize("seed", [0, 1])
def test_random_model_gets_no_linguistic_labels(seed):
    cfg = planted_model().cfg
    m = models.Transformer(cfg.replace(name="random"), tokenizer=word_tokenizer(), seed=100 + seed).eval()
    items = planted_items(150, seed=seed)
    df = heads.probe_items(m, items, n_repeat=40, seed=seed, n_boot=50, weighting=("attention",))
    ling = df[df.role.isin(heads.LINGUISTIC_ROLES)]
    assert not ling.label.any()
    # and nothing beyond "broad" (what near-uniform attention is): a descriptive role (labels v4), which
    # the random-init null would refuse (a random model's heads are as even as this one's), so it skips it
    assert set(df[df.label].role) <= {"broad"}
    broad = df[(df.role == "broad") & df.label]
    assert heads.DESCRIPTIVE_ROLES == ("broad",) and len(broad)
    assert (broad["gate_low"] <= broad["null_score"]).any()  # labelled without clearing the null
    others = df[df.label & ~df.role.isin(heads.DESCRIPTIVE_ROLES)]
    assert (others["gate_low"] > others["null_score"]).all()


# --------------------------------------------------------------------------------------------------
# Scorers on hand-made tensors


def _plan_for(mask, causal=False, sets=None, tokens=None):
    b, t = mask.shape
    sets = torch.zeros(b, t, len(heads.SET_ROLES), dtype=torch.bool) if sets is None else sets
    detect = scoring.duplicate_detection(tokens) if tokens is not None else None
    return scoring.token_plan(mask, causal, sets, detect=detect)


def test_token_scores_on_hand_made_patterns():
    t = 5
    prev = torch.zeros(1, 1, t, t)
    prev[0, 0, 0, 0] = 1.0
    for q in range(1, t):
        prev[0, 0, q, q - 1] = 1.0
    uniform = torch.full((1, 1, t, t), 1 / t)
    pattern = torch.cat([prev, uniform], dim=1)  # heads: previous-token, uniform
    plan = _plan_for(torch.ones(1, t, dtype=torch.bool))
    got = heads.token_role_scores(pattern, plan, ["previous_token", "self_token", "local", "broad"])
    torch.testing.assert_close(got["previous_token"][0], torch.tensor([4 / 5, 4 / 25]))  # uniform: rows 1-4 give 1/5
    torch.testing.assert_close(got["self_token"][0], torch.tensor([1 / 5, 1 / 5]))
    torch.testing.assert_close(got["broad"][0], torch.tensor([0.0, 1.0]))
    # the uniform head scores exactly the uniform baseline
    torch.testing.assert_close(got["previous_token"][0, 1], plan.uniform["previous_token"][0])
    torch.testing.assert_close(got["local"][0, 1], plan.uniform["local"][0])


def test_padding_rows_do_not_count():
    mask = torch.tensor([[1, 1, 1, 0, 0]], dtype=torch.bool)
    p = torch.zeros(1, 1, 5, 5)
    p[0, 0, 0, 0] = p[0, 0, 1, 0] = p[0, 0, 2, 1] = 1.0
    p[0, 0, 3, 2] = p[0, 0, 4, 3] = 1.0  # garbage in padded rows
    got = heads.token_role_scores(p, _plan_for(mask), ["previous_token"])
    torch.testing.assert_close(got["previous_token"][0, 0], torch.tensor(2 / 3))


def test_relation_scores_word_level_and_special_columns():
    # tokens: [CLS] the ca ##t sleeps [SEP]; words: the(0) cat(1) sleeps(2)
    align = [[-1, 0, 1, 1, 2, -1]]
    mask = torch.ones(1, 6, dtype=torch.bool)
    cols, exists = scoring.word_columns(align, mask, [3])
    p = torch.zeros(1, 2, 6, 6)
    p[0, 0, 4] = torch.tensor([0.1, 0.1, 0.2, 0.3, 0.1, 0.2])  # cat: 0.5 in total (two tokens) -> right
    p[0, 1, 4] = torch.tensor([0.0, 0.1, 0.15, 0.15, 0.1, 0.5])  # [SEP] 0.5 beats cat 0.3 -> wrong
    rows = torch.zeros(1, 1, 6)
    rows[0, 0, 4] = 1.0
    others = exists[:, None].clone()
    others[0, 0, 2] = others[0, 0, 1] = False
    plan = scoring.RelationPlan(
        row_weights=rows, columns=cols, gold=torch.tensor([[1]]), others=others, valid=torch.tensor([[True]])
    )
    acc, mass = heads.relation_scores(p, plan)
    torch.testing.assert_close(acc[0, 0], torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(mass[0, 0], torch.tensor([0.5, 0.3]))


def test_offset_and_candidate_baselines():
    items = [
        Item(
            words=("she", "saw", "the", "dog", "and", "he", "ran"),
            relation="anaphora",
            query=5,
            target=3,
            candidates=(0, 3),
        ),
        Item(
            words=("the", "man", "saw", "a", "dog", "and", "he", "ran"),
            relation="anaphora",
            query=6,
            target=1,
            candidates=(1, 4),
        ),
        Item(words=("the", "man", "met", "him", "."), relation="anaphora", query=3, target=1, candidates=(1,)),
    ]
    pooled = [
        t for t in design._relation_tests(items, causal=True, margin=0.05) if (t.source, t.subset) == ("all", "all")
    ]
    tests = {(t.role, t.direction): t for t in pooled if t.specials == "exclude"}
    t = tests[("anaphora", "pronoun->antecedent")]
    assert t.offset == -2 and t.offset_baseline == pytest.approx(2 / 3)  # offsets -2, -5, -2
    assert t.candidate_baseline == pytest.approx(2 / 3)  # nearest noun right in items 0 and 2
    assert ("anaphora", "antecedent->pronoun") not in tests  # causal: only looking back


# --------------------------------------------------------------------------------------------------
# Agreement with transformer_lens.head_detector


class _Cfg:
    def __init__(self, m):
        self.n_layers, self.n_heads, self.n_ctx = m.cfg.n_layers, m.cfg.n_heads, m.cfg.n_ctx
        self.device, self.dtype = "cpu", torch.float32


class _Shim:
    """What detect_head reads from a model: cfg and to_tokens; the cache is passed in."""

    def __init__(self, m, tokens):
        self.cfg, self._tokens = _Cfg(m), tokens

    def to_tokens(self, seq):
        return self._tokens


@pytest.mark.slow
def test_agrees_with_transformer_lens_head_detector(smollm2):
    from transformer_lens.head_detector import detect_head

    from analyses.data import random_repeated_tokens

    seqs = [
        smollm2.to_words("The cat sat on the mat because the cat was tired.").input_ids,
        random_repeated_tokens(1, 12, smollm2.cfg.d_vocab, seed=3),
    ]
    for tokens in seqs:
        _, cache = smollm2.run_with_cache(tokens, return_type=None, names_filter=lambda n: n.endswith("hook_pattern"))
        tl_cache = {
            ("pattern", l, "attn"): cache[f"blocks.{l}.attn.hook_pattern"][0] for l in range(smollm2.cfg.n_layers)
        }
        plan = _plan_for(torch.ones_like(tokens, dtype=torch.bool), causal=True, tokens=tokens)
        for name, role in [
            ("previous_token_head", "previous_token"),
            ("duplicate_token_head", "duplicate_token"),
            ("induction_head", "induction"),
        ]:
            theirs = detect_head(_Shim(smollm2, tokens), "unused", name, cache=tl_cache)
            ours = torch.stack(
                [
                    heads.token_role_scores(cache[f"blocks.{l}.attn.hook_pattern"], plan, [role])[role][0]
                    for l in range(smollm2.cfg.n_layers)
                ]
            )
            assert theirs.shape == ours.shape
            torch.testing.assert_close(ours, theirs.float(), atol=1e-4, rtol=0)
            assert ours.max() - ours.min() > 0.05  # heads differ: the comparison is not between constants


def test_bidirectional_scores_where_detector_needs_causal():
    m = planted_model()
    tokens = torch.tensor([[ID["the"], ID["cat"], ID["of"], ID["the"], ID["mat"], ID["sleeps"], ID["."]]])
    _, cache = m.run_with_cache(tokens, return_type=None, names_filter="blocks.0.attn.hook_pattern")
    got = heads.token_role_scores(
        cache["blocks.0.attn.hook_pattern"],
        _plan_for(torch.ones_like(tokens, dtype=torch.bool), tokens=tokens),
        ["previous_token", "duplicate_token"],
    )
    assert got["previous_token"][0, 0] > 6 / 7 - 0.01  # rows 1..6 on their previous token
    # 'the' repeats: the second 'the' (pos 3) puts 1/7 of its uniform row (head 3) on the first
    assert got["duplicate_token"][0, 3] == pytest.approx(1 / 49, abs=1e-5)


# --------------------------------------------------------------------------------------------------
# Real model (small n) and bad input


@pytest.mark.slow
def test_minilm_small_probe(minilm):
    items = data.load_items(n=12, seed=0)
    df = heads.probe_items(minilm, items, n_repeat=8, n_boot=20, null_model=False, weighting=("attention",))
    assert len(df) == len(df.drop_duplicates(["layer", "head", "role", "direction", "source", "subset", "specials"]))
    assert set(df.direction[df.role == "subject_verb"]) == {"verb->subject", "subject->verb"}
    # MiniLM has strong attention-sink / delimiter heads ([CLS], [SEP], punctuation)
    assert df[(df.role == "delimiter")].label.any()


@pytest.mark.slow
def test_probe_runs_on_a_transformer_lens_bridge(minilm, minilm_bridge):
    """Analyses need only hook names: the bridge (another implementation of the same weights) gets
    the same scores and the same labels as the toolkit's model on the same items."""
    items = data.load_items(n=10, seed=1)
    kw = dict(n_repeat=6, n_boot=20, null_model=False, seed=0, weighting=("attention",))
    ours = heads.probe_items(minilm, items, **kw)
    theirs = heads.probe_items(minilm_bridge, items, **kw)
    key = ["layer", "head", "role", "direction"]
    a, b = ours.sort_values(key).reset_index(drop=True), theirs.sort_values(key).reset_index(drop=True)
    assert (a[key] == b[key]).all().all()
    assert np.allclose(a.score, b.score, atol=1e-5, equal_nan=True)
    assert (a.label == b.label).all()
    assert a.score.std() > 0.05  # not a degenerate table that would match anything


def test_empty_dataset_is_an_error():
    with pytest.raises(ValueError, match="empty dataset"):
        heads.probe_items(planted_model(), [], null_model=False, weighting=("attention",))


def test_sentence_longer_than_context_is_an_error():
    long = Item(words=tuple(["the", "cat"] * 10) + (".",), relation="delimiter")
    with pytest.raises(ValueError, match="more than the context"):
        heads.probe_items(planted_model(), [long], n_repeat=0, null_model=False, weighting=("attention",))


def test_model_without_pattern_hooks_is_an_error():
    class NoHooks(torch.nn.Module):
        cfg = tiny_config()
        hook_dict = {"blocks.0.hook_resid_pre": None}

        def run_with_hooks(self, *a, **k):
            raise AssertionError("never called")

    with pytest.raises(ValueError, match="blocks.0.attn.hook_pattern"):
        heads.adapt(NoHooks(), tokenizer=word_tokenizer())


def test_model_without_tokenizer_is_an_error():
    m = models.Transformer(tiny_config(), seed=0)
    with pytest.raises(ValueError, match="tokenizer"):
        heads.probe_items(m, planted_items(3, 0), null_model=False, weighting=("attention",))
