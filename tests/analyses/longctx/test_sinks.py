"""The sink-by-length analysis: planted and uniform heads on hand-made patterns and on a hand-set
model, block-fed reducers against whole patterns and a loop reference, and the tables' bookkeeping."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch

import models
from analyses.cli import main
from analyses.longctx import sinks as S
from tests.factories import ID, N_CTX, planted_model


def _causal_softmax(scores: torch.Tensor) -> torch.Tensor:
    t = scores.shape[-1]
    allowed = torch.ones(t, t, dtype=torch.bool).tril()
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1)


def _patterns(b: int, h: int, t: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return _causal_softmax(3 * torch.randn(b, h, t, t, generator=gen))


def _ids(b: int, t: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 6, (b, t), generator=gen)  # few distinct tokens: many repeats
    ids[:, 0] = 0
    return ids


def _reduce(pattern: torch.Tensor, ids: torch.Tensor, block: int | None) -> S.PatternReducer:
    b, h, t, _ = pattern.shape
    red = S.PatternReducer(S.sequence_plan(ids), n_layers=1, n_heads=h)
    if block is None:
        red.update(0, pattern, 0)
    else:
        for q0 in range(0, t, block):
            red.update(0, pattern[:, :, q0 : q0 + block], q0)
    return red


def _reference(pattern: torch.Tensor, ids: torch.Tensor) -> dict:
    """The definitions written out as loops over rows and keys (float64)."""
    p = pattern.double()
    b, h, t, _ = p.shape
    out = {r: torch.zeros(b, h, dtype=torch.float64) for r in S.ROLES}
    for i in range(b):
        for q in range(1, t):
            out["attention_sink"][i] += p[i, :, q, 0] / (t - 1)  # every row but the sink's own
            out["previous_token"][i] += p[i, :, q, q - 1] / t  # TL "mul": divided by every row
            for k in range(1, q + 1):  # induction: key k follows an earlier copy of the query's token
                if ids[i, k - 1] == ids[i, q]:
                    out["induction"][i] += p[i, :, q, k] / t
    return out


def test_planted_sink_head_scores_one_and_uniform_head_one_over_n():
    t = 12
    sink = torch.zeros(1, 1, t, t)
    sink[..., 0] = 1.0
    uniform = torch.ones(t, t).tril()
    uniform = (uniform / uniform.sum(-1, keepdim=True))[None, None]
    red = _reduce(torch.cat([sink, uniform], 1), _ids(1, t), block=None)
    share = red.scores()["attention_sink"][0, 0]
    # 1 up to the fp32 rounding of the probe's row weights (1/11 each, summed 11 times): t * 2^-24
    assert abs(share[0].item() - 1.0) <= t * 2**-24
    # a uniform row at query q gives the sink 1 / (q + 1); the score averages rows 1..t-1
    expect = float(np.mean(1.0 / np.arange(2, t + 1)))
    assert share[1].item() == pytest.approx(expect, rel=1e-6)
    torch.testing.assert_close(red.sink_rows[0, 0, 1, 1:], torch.tensor(1.0 / np.arange(2, t + 1), dtype=torch.float32))
    assert (red.sink_rows[0, 0, 0] == 1.0).all()
    # the probe's uniform baseline is the uniform head's score
    assert red.baselines()["attention_sink"][0].item() == pytest.approx(expect, rel=1e-6)


@pytest.mark.parametrize("block", [None, 1, 3, 7, 16])
def test_reducers_match_the_loop_reference(block):
    pattern, ids = _patterns(2, 3, 16), _ids(2, 16)
    got = _reduce(pattern, ids, block).scores()
    ref = _reference(pattern, ids)
    for r in S.ROLES:
        torch.testing.assert_close(got[r][:, 0], ref[r], rtol=1e-6, atol=1e-7, msg=r)


def test_block_fed_equals_whole_pattern():
    pattern, ids = _patterns(2, 4, 29, seed=3), _ids(2, 29, seed=3)
    whole = _reduce(pattern, ids, None)
    for block in (1, 5, 8, 28):
        blocked = _reduce(pattern, ids, block)
        for r in S.ROLES:
            # the same terms summed in another order (fp32 terms, fp64 sums): rounding only
            torch.testing.assert_close(blocked.scores()[r], whole.scores()[r], rtol=1e-6, atol=1e-7)
        assert torch.equal(blocked.sink_rows, whole.sink_rows)


def test_blocks_in_any_order_and_missing_or_repeated_rows_are_refused():
    pattern, ids = _patterns(1, 2, 10), _ids(1, 10)
    whole = _reduce(pattern, ids, None).scores()
    red = S.PatternReducer(S.sequence_plan(ids), 1, 2)
    for q0 in (6, 0, 3):
        red.update(0, pattern[:, :, q0 : q0 + 3 if q0 < 6 else 10], q0)
    for r in S.ROLES:
        torch.testing.assert_close(red.scores()[r], whole[r], rtol=1e-6, atol=1e-7)
    missing = S.PatternReducer(S.sequence_plan(ids), 1, 2)
    missing.update(0, pattern[:, :, :4], 0)
    with pytest.raises(ValueError, match="exactly once"):
        missing.scores()
    twice = _reduce(pattern, ids, None)
    twice.update(0, pattern[:, :, 2:5], 2)
    with pytest.raises(ValueError, match="more than once"):
        twice.scores()
    with pytest.raises(ValueError, match="do not fit"):
        red.update(0, pattern[:, :, 8:], 9)  # rows 9..11 of a 10-position pattern
    with pytest.raises(ValueError, match="do not fit"):
        red.update(0, pattern[:, :1], 0)  # one head of two


def test_hook_path_on_a_model_equals_blocks_of_its_cached_patterns():
    m = planted_model(attention="causal")
    ids = torch.tensor([[ID["[CLS]"], ID["the"], ID["cat"], ID["sleeps"], ID["."], ID["the"], ID["cat"], ID["."]]])
    red = S.PatternReducer(S.sequence_plan(ids), m.cfg.n_layers, m.cfg.n_heads)
    m.run_with_hooks(ids, fwd_hooks=[("blocks.0.attn.hook_pattern", red.hook(0))])
    _, cache = m.run_with_cache(ids)
    blocked = _reduce(cache["blocks.0.attn.hook_pattern"], ids, block=3)
    for r in S.ROLES:
        torch.testing.assert_close(red.scores()[r], blocked.scores()[r], rtol=1e-6, atol=1e-7)


def _sink_model():
    """The planted causal model with head 1 turned into a sink head (all weight on [CLS], the sink
    its tokenizer puts first) and a tokenizer whose BOS is [CLS]; head 0 is a previous-token head,
    head 3 has zero weights (uniform)."""
    from transformers import PreTrainedTokenizerFast

    m = planted_model(attention="causal")
    hf = m.tokenizer.hf
    tok = models.Tokenizer(
        PreTrainedTokenizerFast(tokenizer_object=hf._tokenizer, unk_token="[UNK]", pad_token="[PAD]", bos_token="[CLS]")
    )
    with torch.no_grad():
        attn = m.blocks[0].attn
        wk = attn.W_K.clone()
        wk[1] = 0.0
        wk[1, N_CTX + ID["[CLS]"], 0] = 1.0
        attn.W_K = wk
    return m, tok


def test_run_on_a_planted_model(tmp_path):
    m, tok = _sink_model()
    run = S.run(m, lengths=(8, 16), n_windows=(2, 3), progress=False, tokenizer=tok)
    w = run.windows
    assert len(w) == 2 * (2 + 3) * len(S.ROLES) * m.cfg.n_heads  # inputs x windows x roles x heads
    assert set(w.groupby("length")["window"].nunique().items()) == {(8, 2), (16, 3)}
    sink = w[(w.role == "attention_sink") & (w.input == "text")]
    # head 1: all weight on the sink up to softmax's exp(-19) per other key
    assert (sink[sink["head"] == 1]["score"] > 1 - 1e-6).all()
    head3 = sink[sink["head"] == 3]
    np.testing.assert_allclose(head3["score"], head3["baseline"], rtol=1e-6)  # uniform = its baseline
    prev = w[(w.role == "previous_token") & (w.input == "text") & (w["head"] == 0)]
    np.testing.assert_allclose(prev["score"], (prev["length"] - 1) / prev["length"], rtol=1e-6)
    heads = S.head_table(run)
    lab = heads[heads.label].groupby("role")["head"].apply(set).to_dict()
    assert lab["attention_sink"] == {1} and lab["previous_token"] == {0}
    summary = S.length_summary(run)
    assert summary.set_index(["role", "length"]).loc[("attention_sink", 16), "n_label"] == 1
    pos = S.position_table(run)
    p16 = pos[pos.length == 16]
    assert list(p16["pos_lo"]) == [1, 2, 4, 8] and list(p16["pos_hi"]) == [2, 4, 8, 16]
    assert S.write(run, tmp_path) == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == sorted(S.OUTPUTS)
    tables = S.tables(run)
    back = pd.read_csv(tmp_path / "sinks_summary.csv")
    np.testing.assert_allclose(back["mean_score"], tables["summary"]["mean_score"], rtol=1e-12)
    assert (tmp_path / "sinks.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("rows", [1, 3, 5])
def test_run_in_query_blocks_equals_the_whole_pattern_run(rows):
    """With the eager attention in query blocks (models.blockwise.pattern_blocks) the hook gets
    rows q0..q1 (hook.query_rows) and the reducer's block sums give the whole-pattern scores."""
    m, tok = _sink_model()
    whole = S.run(m, (8, 16), (2, 3), progress=False, tokenizer=tok)
    blocked = S.run(m, (8, 16), (2, 3), progress=False, tokenizer=tok, query_block=rows)
    assert all(a.attn.query_block is None for a in (b for b in m.blocks))  # restored
    a, b = whole.windows, blocked.windows
    assert a[["input", "length", "window", "role", "layer", "head"]].equals(
        b[["input", "length", "window", "role", "layer", "head"]]
    )
    np.testing.assert_allclose(b["score"], a["score"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(blocked.positions["sink"], whole.positions["sink"], rtol=1e-5, atol=1e-6)


def test_runs_split_over_inputs_and_lengths_combine_to_the_whole_run():
    m, tok = _sink_model()
    whole = S.run(m, (8, 16), (2, 3), progress=False, tokenizer=tok)
    saved = []
    parts = [
        S.run(m, (8,), (2,), progress=False, tokenizer=tok),
        S.run(m, (16,), (3,), progress=False, tokenizer=tok, inputs=("text",), checkpoint=saved.append),
        S.run(m, (16,), (3,), progress=False, tokenizer=tok, inputs=("repeated",)),
    ]
    assert len(saved) == 1 and saved[0].windows.equals(parts[1].windows)  # 3 windows of 16: one forward
    both = S.combine(parts)
    assert both.info["params"]["combined"] == [p.info["params"] for p in parts]
    assert [p["lengths"] for p in both.info["params"]["combined"]] == [[8], [16], [16]]
    key = ["input", "length", "window", "role", "layer", "head"]
    a, b = whole.windows.sort_values(key, ignore_index=True), both.windows.sort_values(key, ignore_index=True)
    pd.testing.assert_frame_equal(a, b)
    with pytest.raises(ValueError, match="measured twice"):
        S.combine([parts[0], parts[0]])
    with pytest.raises(ValueError, match="subset of"):
        S.run(m, (8,), (2,), progress=False, tokenizer=tok, inputs=("noise",))


def test_run_refuses_bad_arguments():
    m, tok = _sink_model()
    with pytest.raises(ValueError, match="one window count per length"):
        S.run(m, (8, 16), (2,), progress=False, tokenizer=tok)
    with pytest.raises(ValueError, match="context of 16"):
        S.run(m, (8, 32), (2, 2), progress=False, tokenizer=tok)
    with pytest.raises(ValueError, match="at least 2 windows"):
        S.run(m, (8,), (1,), progress=False, tokenizer=tok)
    with pytest.raises(ValueError, match="puts no special token first"):
        S.run(planted_model(attention="causal"), (8,), (2,), progress=False)


def test_repeated_window():
    ids = list(range(100, 110))  # sink 100, text 101..109
    rep = S.repeated_window(ids)
    assert rep == [100, 101, 102, 103, 104, 105, 101, 102, 103, 104]
    assert len(S.repeated_window(list(range(11)))) == 11
    with pytest.raises(ValueError, match="at least 4"):
        S.repeated_window([1, 2, 3])


def _run(scores: dict, baseline: float = 0.05) -> S.SinksResult:
    """A run from hand-set scores: {(role, length): [window, head] array} on one layer."""
    rows = []
    for (role, n), a in scores.items():
        for inp in S.INPUTS:
            for wi, per in enumerate(np.asarray(a, dtype=float)):
                for h, s in enumerate(per):
                    # the other input gets a score far off, so a table that reads it shows it
                    val = s if inp == S.ROLE_INPUT[role] else s + 10
                    rows.append(dict(input=inp, length=n, window=wi, layer=0, head=h, role=role, score=val))
    w = pd.DataFrame(rows).assign(baseline=baseline)
    cost = pd.DataFrame(
        [dict(input=i, length=n, n_windows=2, batch=2, cpu_s=4.0, wall_s=2.0) for i in S.INPUTS for n in (64, 512)]
    )
    return S.SinksResult(model="m", windows=w, positions=pd.DataFrame(), cost=cost)


def test_length_tables_bookkeeping():
    run = _run(
        {
            ("attention_sink", 64): [[0.9, 0.1, 0.5], [0.7, 0.1, 0.5]],
            ("attention_sink", 512): [[0.9, 0.5, 0.1], [0.9, 0.5, 0.1]],
            ("previous_token", 64): [[0.1, 0.2, 0.3], [0.1, 0.2, 0.3]],
            ("previous_token", 512): [[0.3, 0.2, 0.1], [0.3, 0.2, 0.1]],
            ("induction", 64): [[0.0, 0.0, 0.4], [0.0, 0.0, 0.2]],
            ("induction", 512): [[0.0, 0.0, 0.3], [0.0, 0.0, 0.3]],
        }
    )
    heads = S.head_table(run).set_index(["role", "length", "head"])
    assert heads.loc[("attention_sink", 64, 0), "score"] == pytest.approx(0.8)
    assert heads.loc[("induction", 64, 2), "input"] == "repeated"
    # sd 0 over windows: the interval is the point
    assert heads.loc[("attention_sink", 512, 1), ["ci_low", "ci_high"]].tolist() == pytest.approx([0.5, 0.5])
    # t interval with 2 windows: mean +- t(0.975, 1) * sd / sqrt(2) = 0.8 +- 12.706 * 0.1414 / 1.414
    assert heads.loc[("attention_sink", 64, 0), "ci_high"] == pytest.approx(0.8 + 12.7062 * 0.1, rel=1e-4)
    # labels: effect = score - 0.05 > 0.1
    assert heads.xs(("attention_sink", 64))["label"].tolist() == [True, False, True]
    assert heads.xs(("previous_token", 64))["label"].tolist() == [False, True, True]
    summary = S.length_summary(run).set_index(["role", "length"])
    assert summary.loc[("attention_sink", 64), "n_label"] == 2
    assert summary.loc[("attention_sink", 64), "mean_score"] == pytest.approx((0.8 + 0.1 + 0.5) / 3)
    assert summary.loc[("induction", 512), "n_label"] == 1
    assert summary.loc[("induction", 64), "cpu_s_per_window"] == pytest.approx(2.0)  # 4 s for 2 windows
    # the count's interval resamples windows: window 1 alone labels 2 sink heads at 64, so does window 0
    assert summary.loc[("attention_sink", 64), ["n_label_low", "n_label_high"]].tolist() == [2, 2]
    # Gu et al.'s ratio: heads whose mean share exceeds 0.3 (0.8 and 0.5 at 64; 0.9 and 0.5 at 512), sink rows only
    assert summary.loc[("attention_sink", 64), "gu_ratio"] == pytest.approx(2 / 3)
    assert summary.loc[("attention_sink", 512), "gu_ratio"] == pytest.approx(2 / 3)
    assert summary.loc[("previous_token", 64), ["gu_ratio"]].isna().all()
    per = S.persistence(S.head_table(run)).set_index(["role", "length_a", "length_b"])
    assert per.loc[("previous_token", 64, 512), "spearman"] == pytest.approx(-1.0)
    assert per.loc[("attention_sink", 64, 512), "n_both"] == 1  # head 0 keeps it, head 2 loses it
    assert per.loc[("attention_sink", 64, 512), "kept"] == pytest.approx(0.5)
    assert per.loc[("induction", 64, 512), "kept"] == pytest.approx(1.0)
    layers = S.layer_table(S.head_table(run)).set_index(["role", "length", "layer"])
    assert layers.loc[("attention_sink", 512, 0), "n_label"] == 2


def test_one_window_gives_no_interval():
    run = _run({("attention_sink", 64): [[0.9, 0.1]], ("attention_sink", 512): [[0.8, 0.1], [0.6, 0.1]]})
    heads = S.head_table(run).set_index(["length", "head"])
    assert heads.loc[(64, 0), ["ci_low", "ci_high"]].isna().all()
    assert heads.loc[(512, 0), ["ci_low", "ci_high"]].notna().all()
    summary = S.length_summary(run).set_index("length")
    assert summary.loc[64, ["ci_low", "ci_high", "n_label_low", "n_label_high"]].isna().all()
    assert summary.loc[64, "n_label"] == 1


def test_position_table_uniform_share():
    rows = [
        dict(length=8, window=w, layer=0, head=h, pos_lo=lo, pos_hi=hi, sink=s)
        for w in range(2)
        for h, s in ((0, 1.0), (1, 0.0))
        for lo, hi in ((1, 2), (2, 4), (4, 8))
    ]
    run = S.SinksResult(model="m", windows=pd.DataFrame(), positions=pd.DataFrame(rows), cost=pd.DataFrame())
    t = S.position_table(run)
    assert t["uniform"].tolist() == pytest.approx([1 / 2, (1 / 3 + 1 / 4) / 2, (1 / 5 + 1 / 6 + 1 / 7 + 1 / 8) / 4])
    assert t["sink"].tolist() == pytest.approx([0.5, 0.5, 0.5])
    assert t["n_sink"].tolist() == [1, 1, 1]


def test_cli_refuses_mismatched_windows(tmp_path, capsys):
    rc = main(["sinks", "--out", str(tmp_path / "o"), "--lengths", "64,512", "--windows", "8"])
    assert rc == 2 and "one per length" in capsys.readouterr().err
    rc = main(["sinks", "--out", str(tmp_path / "o"), "--lengths", "64"])
    assert rc == 2 and "--windows" in capsys.readouterr().err


def test_the_contract_face_run_write_heads_info(tmp_path):
    """analyses.contract on the sink analysis: run -> SinksResult with info and a per-head table
    keyed model, layer, head; write through an output set, exactly OUTPUTS, also inside a set open in
    the folder (the command's way); the old names warn and give the new objects."""
    from analyses.contract import check_result
    from interp.io import output_dir

    m, tok = _sink_model()
    res = S.run(m, (8, 16), (2, 2), seed=3, progress=False, tokenizer=tok)
    assert check_result(res, scores_heads=True) == []
    assert res.info["analysis"] == "longctx.sinks" and res.info["seed"] == 3 and res.info["model"] == res.model
    assert res.info["params"] == dict(lengths=[8, 16], n_windows=[2, 2], inputs=["text", "repeated"], query_block=None)
    heads = res.heads
    assert list(heads.columns[:3]) == ["model", "layer", "head"]
    assert len(heads) == len(S.ROLES) * 2 * m.cfg.n_heads  # one row per role, length and head
    pd.testing.assert_frame_equal(heads[S.head_table(res).columns], S.head_table(res))  # the same table, rekeyed
    with output_dir(tmp_path / "set", S.OUTPUTS, command="interp sinks") as staging:
        assert S.write(res, staging) == staging  # the command's way: into the open set's staging folder
        assert sorted(p.name for p in staging.iterdir()) == sorted(S.OUTPUTS)
    written = sorted(p.name for p in (tmp_path / "set").iterdir() if not p.name.startswith("."))
    assert written == sorted(S.OUTPUTS)
    assert (tmp_path / "set" / "sinks_heads.csv").read_text() == S.head_table(res).to_csv(index=False)
    with pytest.warns(DeprecationWarning, match=r"sinks\.measure is deprecated; use .*sinks\.run"):
        assert S.measure is S.run
    with pytest.warns(DeprecationWarning, match="SinkRun"):
        assert S.SinkRun is S.SinksResult
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        S.nothing  # noqa: B018


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--query-block", "0"], "argument --query-block: 0 must be at least 1"),
        (["--query-block", "-4"], "argument --query-block: -4 must be at least 1"),
        (["--lengths", "64,0", "--windows", "8,8"], "argument --lengths: expected comma-separated positive integers"),
    ],
)
def test_cli_refuses_bad_numbers_at_parse_time_naming_the_flag(tmp_path, monkeypatch, capsys, flags, message):
    """Issue 41 item 5: ``--query-block 0`` was refused only after the model loaded, naming
    ``pattern_blocks``; now argparse refuses it, naming the flag."""
    monkeypatch.setattr(models, "load", lambda *a, **k: pytest.fail("loaded the model before checking the flags"))
    with pytest.raises(SystemExit) as e:
        main(["sinks", "--out", str(tmp_path / "o"), *flags])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and "pattern_blocks" not in err
    assert not (tmp_path / "o").exists()


def test_cli_checks_the_lengths_and_windows_before_loading(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(models, "load", lambda *a, **k: pytest.fail("loaded the model before checking the flags"))
    assert main(["sinks", "--out", str(tmp_path / "o"), "--lengths", "64,512", "--windows", "8,1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "interp sinks: --lengths 64,512 --windows 8,1: need at least 2 windows per length for an interval over "
        "windows, got [8, 1]"
    )
    with pytest.raises(ValueError, match="query_block=0: give the query rows per block"):
        S.check_arguments([64], [8], query_block=0)


def test_a_gpt_oss_models_learned_sinks_appear_in_the_sink_analysis(tmp_path):
    """The tiny gpt-oss (``models/tiny.py``: learned sink logits, experts, sliding and full layers)
    with the planted model's vocabulary and [CLS]-first tokenizer: ``learned_sink`` is scored for every
    head, equals 1 - the pattern's row sum over the rows the sink share reads (by hand from the cache),
    separates a head whose sink logit is 8 from one at -30, and reaches the report."""
    from analyses.longctx.text import long_windows
    from models.tiny import save_tiny

    _, tok = _sink_model()
    folder, _ = save_tiny("gpt_oss", tmp_path / "gpt_oss")
    cfg = models.load(str(folder)).cfg.replace(d_vocab=len(tok.hf), n_ctx=N_CTX, name="tiny-gpt-oss")
    m = models.Transformer(cfg, tokenizer=tok, seed=0).eval()
    with torch.no_grad():
        for b in m.blocks:
            b.attn.sinks.copy_(torch.tensor([8.0, -30.0, -30.0, -30.0]))
    assert S.has_learned_sinks(m) and not S.has_learned_sinks(_sink_model()[0])
    run = S.run(m, lengths=(8, 16), n_windows=(2, 2), progress=False, tokenizer=tok)
    w = run.windows
    learned = S.main_rows(w)[lambda d: d.role == S.LEARNED_SINK]  # on its own input, text
    assert len(learned) == (2 + 2) * cfg.n_layers * cfg.n_heads and set(learned.input) == {"text"}
    assert (learned.baseline == 0).all()
    # by hand: window 0 of length 8, its text ids (the sink first), each layer's pattern from the cache
    ids = torch.tensor([[tok.hf.bos_token_id, *long_windows(tok.hf, 7, 2, 0)[0]]])
    _, cache = m.run_with_cache(ids)
    for l in range(cfg.n_layers):
        share = 1 - cache[f"blocks.{l}.attn.hook_pattern"][0].sum(-1)  # [head, query]
        expect = share[:, 1:].mean(-1)  # every row but the sink's own, as the sink share
        got = learned[(learned.length == 8) & (learned.window == 0) & (learned.layer == l)].sort_values("head")
        np.testing.assert_allclose(got.score, expect.numpy(), rtol=1e-5, atol=1e-6)
    heads = S.head_table(run)
    lab = heads[(heads.role == S.LEARNED_SINK) & heads.label]
    assert set(lab["head"]) == {0} and set(lab["layer"]) == set(range(cfg.n_layers))
    off = heads[(heads.role == S.LEARNED_SINK) & (heads["head"] == 1)]
    assert (off.score < 1e-6).all()
    S.write(run, tmp_path / "out")
    text = (tmp_path / "out" / "sinks.md").read_text()
    assert "**learned_sink**" in text and "| learned_sink |" in text


def test_a_tokenizer_that_puts_its_own_bos_first_is_run_as_one_that_is_given_it():
    """Gemma's tokenizer adds ``<bos>`` itself (nothing is prepended, ``prepend_bos`` is False): its
    sink is that token, and the run equals the run whose tokenizer is told to prepend the same token
    (it was refused: "puts no sink token first")."""
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    m, prepending = _sink_model()
    backend = copy.deepcopy(prepending.hf._tokenizer)
    backend.post_processor = TemplateProcessing(single="[CLS] $A", special_tokens=[("[CLS]", ID["[CLS]"])])
    own = models.Tokenizer(
        PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", bos_token="[CLS]")
    )
    assert own.hf("the cat")["input_ids"][0] == ID["[CLS]"] and not own.prepend_bos
    a = S.run(m, (8, 16), (2, 2), progress=False, tokenizer=prepending)
    b = S.run(m, (8, 16), (2, 2), progress=False, tokenizer=own)
    pd.testing.assert_frame_equal(a.windows, b.windows)
