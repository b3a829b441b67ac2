"""The sink as background (issue 21): every model's sink is a special token at position 0 that the
relation scorers leave out; a planted sink head gets no relation label and idles on the map (a
``sink writer`` where the norm lens confirms its sink label, a ``no-op sink`` where it does not);
delimiter mass leaves the sink out; attention_sink passes the norm lens only where the sink's value
has weight; the map ranks roles by ceiling-normalised effect; broad's random-row reference."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import models
from analyses import heads
from analyses.data import Item
from analyses.heads import engine, scoring
from tests.factories import ID, N_CTX, SUBJECTS, VERBS, planted_items, planted_model

BETA = 4.0  # as in planted_model: a matching query-key pair scores 20, so softmax is one-hot


def _sink_model(attention="bidirectional", specials=True, sink_values=True, tokenizer=None):
    """planted_model plus head 3 rewired into a sink head: every query puts its weight on position 0
    ([CLS] or the prepended BOS). Every head gets random value and output weights; with
    ``sink_values=False`` head 3's value at position 0 is zero (it attends there and moves nothing)."""
    m = planted_model(attention, sep_weight=0.0 if specials else None, values=True)
    if tokenizer is not None:
        m.tokenizer = tokenizer
    attn = m.blocks[0].attn
    with torch.no_grad():
        WQ, WK, WV = attn.W_Q.clone(), attn.W_K.clone(), attn.W_V.clone()
        WQ[3], WK[3] = 0.0, 0.0
        WQ[3, N_CTX:, 0] = BETA  # every token's query (token identity part of the residual)
        WK[3, 0, 0] = 1.0  # the key at position 0 (positional part)
        if not sink_values:
            WV[3, 0] = 0.0  # position 0 ...
            WV[3, N_CTX + ID["[CLS]"]] = 0.0  # ... holding [CLS]: its value vector is zero
        attn.W_Q, attn.W_K, attn.W_V = WQ, WK, WV
    return m


def _first_word_items(n, seed):
    """'S of the A V .': the subject is the sentence's first word (word 0)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        s, v = rng.choice(SUBJECTS), rng.choice(VERBS)
        words = (s, "of", "the", rng.choice(["mat", "box", "tree"]), v, ".")
        out.append(Item(words, "subject_verb", query=len(words) - 2, target=0, candidates=(0,), source="generated:x"))
    return out


@pytest.fixture(scope="module")
def sink_df():
    m = _sink_model(sink_values=False)
    return heads.probe_items(
        m, planted_items(120, seed=5), n_repeat=0, seed=0, n_boot=50, null_model=False, weighting=("attention", "norm")
    )


def test_a_planted_sink_head_gets_no_relation_label_and_idles(sink_df):
    pat = sink_df[(sink_df["head"] == 3) & (sink_df["weighting"] == "attention")]
    sink = pat[pat["role"] == "attention_sink"].iloc[0]
    assert sink["score"] > 0.99 and sink["label"]
    rel = pat[pat["role"].isin(heads.LINGUISTIC_ROLES)]
    assert len(rel) and not rel["label"].any()
    # its largest weight among the words: none stands out, so it is never right under Clark et al.'s rule
    exclude = rel[(rel["specials"] == "exclude") & (rel["source"] == "all") & (rel["subset"] == "all") & (rel["n"] > 0)]
    assert len(exclude) and (exclude["score"] == 0.0).all()
    assert set(pat.loc[pat["label"], "role"]) == {"attention_sink"}
    rmap = heads.role_map(sink_df).set_index("head")
    # it attends to the sink and moves nothing from it (its value there is zero): a no-op sink
    assert rmap.loc[3, "primary"] == heads.NOOP_IDLE == "no-op sink"
    assert rmap.loc[3, "sink_weight"] > 0.99 and rmap.loc[3, "sink_norm"] < 0.05
    # the subject head keeps its role as primary; the sink never outranks it
    assert rmap.loc[2, "primary"] == "subject_verb (retrospective)"


def test_attention_sink_is_norm_checked(sink_df):
    # head 3's value at the sink is zero: the weight is there, the norm lens says it moves nothing
    s = sink_df[(sink_df["head"] == 3) & (sink_df["role"] == "attention_sink")].set_index("weighting")
    assert s.loc["attention", "label"] and s.loc["norm", "family"] == "attention_sink@norm"
    assert not s.loc["norm", "label"] and s.loc["norm", "score"] < 0.05
    lab = heads.labelled_roles(sink_df)
    assert set(lab[lab["head"] == 3]["role"]) == {"noop_sink"}
    assert heads.role_map(sink_df).set_index("head").loc[3, "sink"] == "noop_sink"
    # the same head with a value at the sink: the norm row passes, the label stays attention_sink
    m = _sink_model(sink_values=True)
    df = heads.probe_items(
        m, planted_items(80, seed=6), n_repeat=0, seed=0, n_boot=30, null_model=False, weighting=("attention", "norm")
    )
    s = df[(df["head"] == 3) & (df["role"] == "attention_sink")].set_index("weighting")
    assert s.loc["norm", "label"] and s.loc["norm", "score"] > 0.9
    rmap = heads.role_map(df).set_index("head")
    # issue 35: a head whose sink label the norm lens confirms writes from the sink: not a no-op
    assert rmap.loc[3, "sink"] == "attention_sink" and rmap.loc[3, "primary"] == heads.SINK_WRITER == "sink writer"


def test_delimiter_leaves_the_sink_out():
    # one sentence of 6 tokens: the sink at 0, a delimiter ([SEP]) at 5
    mask = torch.ones(1, 6, dtype=torch.bool)
    sets = torch.zeros(1, 6, len(heads.SET_ROLES), dtype=torch.bool)
    sets[0, 0, heads.SET_ROLES.index("attention_sink")] = True
    sets[0, [0, 5], heads.SET_ROLES.index("delimiter")] = True  # a sink that is also special: still left out
    plan = scoring.token_plan(mask, False, sets)
    p = torch.zeros(1, 3, 6, 6)
    p[0, 0, :, 0] = 1.0  # head 0: everything on the sink
    p[0, 1, :, 0], p[0, 1, :, 5] = 0.5, 0.5  # head 1: half on the sink, half on the delimiter
    p[0, 2] = 1 / 6  # head 2: uniform
    got = scoring.token_role_scores(p, plan, ["delimiter", "attention_sink"])
    torch.testing.assert_close(got["delimiter"][0], torch.tensor([0.0, 1.0, 0.2]))  # renormalised without the sink
    torch.testing.assert_close(got["delimiter:absolute"][0], torch.tensor([0.0, 0.5, 1 / 6]))
    # a uniform head over the non-sink keys is the baseline: 1 delimiter among 5 keys
    torch.testing.assert_close(plan.uniform["delimiter"], torch.tensor([0.2]))
    # the sink role itself still counts position 0
    assert got["attention_sink"][0, 0] == 1.0


def test_the_delimiter_set_has_no_first_token():
    m = planted_model(sep_weight=0.0)  # [CLS] ... [SEP]
    items = [Item(("the", "cat", "sleeps", "."), "delimiter")]
    batch = heads.adapt(m).tokenizer.words([list(it.words) for it in items])
    sets = engine._token_sets(batch, items)
    d, s = heads.SET_ROLES.index("delimiter"), heads.SET_ROLES.index("attention_sink")
    assert batch.tokens[0][0] == "[CLS]" and sets[0, 0, s] and not sets[0, 0, d]
    assert sets[0, :, d].nonzero().ravel().tolist() == [4, 5]  # '.' and [SEP]


def test_a_sink_head_on_a_model_without_bos_passes_for_a_subject_head_until_a_bos_comes_first():
    """The confound of issue 21: without a BOS the sink is word 0, which is the subject here; with
    one prepended (as the probe does), the sink is a special token the argmax leaves out."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tm
    from transformers import PreTrainedTokenizerFast

    t = Tokenizer(tm.WordLevel(dict(ID), unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    hf = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", pad_token="[PAD]", bos_token="[CLS]")
    m = _sink_model("causal", specials=False, tokenizer=models.Tokenizer(hf))  # adds no BOS itself
    with_bos = heads.adapt(m)
    assert with_bos.sink == "[CLS] (prepended)" and with_bos.tokenizer.words([["cat"]]).tokens[0] == ["[CLS]", "cat"]
    assert heads.adapt(m, sink=False).sink == "first word"
    assert m.tokenizer.words([["cat"]]).tokens[0] == ["cat"]  # the model's own tokenizer is untouched
    items = _first_word_items(60, seed=1)

    def sink_head(adapter):
        df = heads.probe_items(adapter, items, n_repeat=0, n_boot=20, null_model=False, weighting=("attention",))
        g = df[(df["head"] == 3) & (df["role"] == "subject_verb") & (df["source"] == "all") & (df["subset"] == "all")]
        return g[g["specials"] == "exclude"].iloc[0], df.attrs["sink"]

    before, what = sink_head(heads.adapt(m, sink=False))
    assert before["score"] == 1.0 and what == "first word"  # "right" every time: it attends to word 0
    after, what = sink_head(with_bos)
    assert after["score"] == 0.0 and what == "[CLS] (prepended)"


def test_real_models_sink_is_a_special_token(minilm, smollm2):
    assert heads.adapt(minilm).sink == "[CLS]"
    a = heads.adapt(smollm2)
    assert a.sink == "<|endoftext|> (prepended)"
    batch = a.tokenizer.words([["The", "dog", "barks", "."]])
    assert batch.tokens[0][0] == "<|endoftext|>" and batch.token_to_word[0][:2] == [-1, 0]
    # to_tokens (and so the TransformerLens parity tests) keep the model's own default: no BOS
    assert smollm2.to_tokens("The dog barks.")[0, 0].item() != smollm2.tokenizer.hf.convert_tokens_to_ids(
        "<|endoftext|>"
    )


def _frame(rows):
    base = dict(direction="all", source="all", subset="all", specials="-", weighting="attention", label=True)
    df = pd.DataFrame([{**base, **r} for r in rows])
    df["family"] = np.where(df["label"], df["role"], "")
    return df


def test_the_map_puts_roles_with_different_ceilings_on_one_scale():
    df = _frame(
        [  # head 0: a near-perfect induction head (the score cannot exceed 0.5) and a strong previous-token head
            dict(layer=0, head=0, role="induction", score=0.45, baseline=0.05, margin=0.1),
            dict(layer=0, head=0, role="previous_token", score=0.85, baseline=0.1, margin=0.1),
            dict(layer=0, head=0, role="attention_sink", score=0.9, baseline=0.1, margin=0.1),
            # head 1: only the sink; head 2: nothing
            dict(layer=0, head=1, role="attention_sink", score=0.95, baseline=0.1, margin=0.1),
            dict(layer=0, head=2, role="attention_sink", score=0.2, baseline=0.1, margin=0.1, label=False),
        ]
    )
    rmap = heads.role_map(df).set_index("head")
    # by (score - baseline) / margin previous_token (7.5) would outrank induction (4.0) and the sink (8.0)
    # both; by the share of the way to the ceiling induction (0.89) beats previous_token (0.83)
    assert rmap.loc[0, "primary"] == "induction" and rmap.loc[0, "secondary"] == "previous_token"
    assert rmap.loc[0, "relative"] == pytest.approx(0.4 / 0.45)
    assert rmap.loc[0, "sink"] == "attention_sink" and rmap.loc[0, "sink_weight"] == pytest.approx(0.9)
    # no norm rows in this table: whether head 1 writes from the sink is not known
    assert rmap.loc[1, "primary"] == heads.IDLE and np.isnan(rmap.loc[1, "relative"])
    assert rmap.loc[2, "primary"] == "unclassified" and rmap.loc[2, "sink"] == ""


def test_the_induction_ceiling_is_what_a_perfect_head_scores():
    ids = torch.tensor([[5, 9, 7, 3, 5, 9, 7, 3]])  # a sequence of 4 repeated once
    det = scoring.duplicate_detection(ids)
    mask = torch.ones_like(ids, dtype=torch.bool)
    plan = scoring.token_plan(mask, True, torch.zeros(1, 8, len(heads.SET_ROLES), dtype=torch.bool), detect=det)
    perfect = torch.zeros(1, 1, 8, 8)
    for q in range(8):  # on the target where there is one, else on itself
        k = det["induction"][0, q].nonzero()
        perfect[0, 0, q, int(k[0]) if len(k) else q] = 1.0
    got = scoring.token_role_scores(perfect, plan, ["induction"])["induction"]
    assert float(got) == pytest.approx(heads.CEILINGS["induction"])


@pytest.mark.parametrize("n", [2, 5, 10, 20])
def test_broad_reference_is_the_mean_entropy_of_random_rows(n):
    rng = np.random.default_rng(n)
    x = rng.dirichlet(np.ones(n), size=40000)
    h = -(x * np.log(np.clip(x, 1e-300, None))).sum(1) / np.log(n)
    got = float(scoring.broad_reference(torch.tensor([n]))[0])
    assert abs(got - h.mean()) < 4 * h.std() / np.sqrt(len(h)) + 1e-4
    assert got < 1.0  # a uniform head (1.0) always clears it; a one-hot head (0.0) never does


def test_a_gpt_oss_models_learned_sink_is_the_probes_sink_layer(tmp_path):
    """The tiny gpt-oss (``models/tiny.py``) on the planted vocabulary, causal, with each layer's head 0
    given a sink logit of 8 and the other heads -30: the probe adds a ``learned_sink`` test (attention
    weighting only), scores it as 1 - the pattern's row sum on the attention_sink's rows (by hand
    from the cache), labels head 0 of every layer and no other head (baseline 0, the random-init
    model's share its null), and the map carries the share in its sink layer (``sink_learned``); a
    model without learned sinks gets no such test."""
    from models.tiny import save_tiny

    plain = planted_model("causal")
    folder, _ = save_tiny("gpt_oss", tmp_path / "gpt_oss")
    cfg = models.load(str(folder)).cfg.replace(d_vocab=plain.cfg.d_vocab, n_ctx=N_CTX, name="tiny-gpt-oss")
    m = models.Transformer(cfg, tokenizer=plain.tokenizer, seed=0).eval()
    with torch.no_grad():
        for b in m.blocks:
            b.attn.sinks.copy_(torch.tensor([8.0, -30.0, -30.0, -30.0]))
    items = planted_items(40, seed=3)
    df = heads.probe_items(m, items, n_repeat=0, seed=0, n_boot=50, weighting=("attention", "norm"))
    rows = df[df.role == "learned_sink"]
    assert set(rows.weighting) == {"attention"} and len(rows) == cfg.n_layers * cfg.n_heads
    assert (rows.baseline == 0).all() and rows.null_score.notna().all()
    assert set(map(tuple, rows[rows.label][["layer", "head"]].to_numpy())) == {(l, 0) for l in range(cfg.n_layers)}
    # by hand on the first sentence: 1 - row sums, averaged over the rows after the sink
    adapter = heads.adapt(m)
    ids = adapter.tokenizer.encode(" ".join(items[0].words))
    _, cache = m.run_with_cache(torch.tensor([ids]))
    share = 1 - cache["blocks.1.attn.hook_pattern"][0, 0].sum(-1)[1:].mean()
    top = rows[(rows.layer == 1) & (rows["head"] == 0)].score.item()
    assert share > 0.9 and abs(top - share) < 0.05  # the mean over 40 sentences of similar length
    role_map = heads.role_map(df)
    assert abs(role_map.set_index(["layer", "head"]).loc[(1, 0), "sink_learned"] - top) < 1e-12
    assert "learned_sink" in role_map.set_index(["layer", "head"]).loc[(1, 0), "sink"]
    assert not (heads.probe_items(plain, items[:10], n_repeat=0, null_model=False).role == "learned_sink").any()
