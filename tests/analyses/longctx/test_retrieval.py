"""Retrieval heads (analyses.longctx.retrieval) and the needle-in-a-haystack task
(analyses.longctx.niah), on tiny hand-set models and hand-made patterns: a planted retrieval head
scores 1.0 and a planted previous-token head 0, masking the retrieval head breaks the copy, the
needle lands exactly where asked, and the score counts exactly the steps and hits it should."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
import torch

import models
from analyses.longctx import niah
from analyses.longctx import retrieval as R
from analyses.longctx.niah import Trial
from tests.factories import tiny_config

N_CTX, V = 32, 16
HAY_VOCAB = range(0, 10)  # haystack tokens
NEEDLE_VOCAB = range(10, V)  # tokens that only the needle holds: the "mark" the retrieval head keys on
CONST = N_CTX + V  # a residual dimension that is 1 for every token (the retrieval head's query)


def planted_retrieval_model() -> models.Transformer:
    """One causal layer, two heads, weights set by hand (learned one-hot positions, one-hot tokens,
    RMSNorm keeps them one-hot up to a scale; the MLP writes nothing):

    head 0, retrieval: every query attends to keys whose token is a needle token (a slight
    preference for earlier positions breaks ties in favour of the needle over its copies), and its
    OV circuit writes the attended token, 10x stronger than the residual's own token, to the logits;
    head 1, previous token: query at p attends to key p - 1; it writes nothing (W_O = 0)."""
    cfg = tiny_config(
        d_model=N_CTX + V + 1,
        n_layers=1,
        n_heads=2,
        d_head=N_CTX,
        d_mlp=8,
        d_vocab=V,
        n_ctx=N_CTX,
        norm="rmsnorm",
        attention="causal",
        name="planted-retrieval",
    )
    m = models.Transformer(cfg, seed=0).eval()
    beta = 4.0
    with torch.no_grad():
        m.W_E.zero_()
        m.W_E[:, N_CTX : N_CTX + V] = torch.eye(V)
        m.W_E[:, CONST] = 1.0
        m.W_pos.zero_()
        m.W_pos[:, :N_CTX] = torch.eye(N_CTX)
        attn = m.blocks[0].attn
        WQ, WK, WV, WO = (torch.zeros_like(w) for w in (attn.W_Q, attn.W_K, attn.W_V, attn.W_O))
        WQ[0, CONST, 0] = beta
        for t in NEEDLE_VOCAB:
            WK[0, N_CTX + t, 0] = 1.0
        WK[0, :N_CTX, 0] = -0.01 * torch.arange(N_CTX, dtype=torch.float32)  # earlier wins a tie
        for t in range(V):
            WV[0, N_CTX + t, t] = 1.0
            WO[0, t, N_CTX + t] = 10.0
        for p in range(N_CTX):  # head 1: query at p matches key at p - 1
            WQ[1, p, p] = beta
            if p + 1 < N_CTX:
                WK[1, p, p + 1] = 1.0
        attn.W_Q, attn.W_K, attn.W_V, attn.W_O = WQ, WK, WV, WO
        for p in m.blocks[0].mlp.parameters():
            p.zero_()
        m.W_U.zero_()
        m.W_U[N_CTX : N_CTX + V] = torch.eye(V)
    return m


def planted_trial(seed: int, length: int = 16) -> Trial:
    """A haystack of ``length`` haystack tokens with one needle token at a random place (not the
    last two positions, so the previous-token head never looks at it by accident)."""
    rng = random.Random(seed)
    hay = [rng.choice(HAY_VOCAB) for _ in range(length)]
    at = rng.randrange(0, length - 2)
    needle = rng.choice(NEEDLE_VOCAB)
    tokens = hay[:at] + [needle] + hay[at:]
    return Trial(tuple(tokens), (needle,), at, length, at / length, at, seed)


def test_planted_retrieval_head_scores_one_and_previous_token_head_zero():
    m = planted_retrieval_model()
    scores = R.RetrievalScores(1, 2)
    for seed in range(6):
        t = planted_trial(seed)
        d = R.run_trial(m, t, n_new=3, watch=True)
        assert d.generated == [t.code[0]] * 3  # the planted head copies the needle, step after step
        scores.add(d)
    assert scores.copy_steps == scores.steps == 18
    assert scores.scores[0, 0] == 1.0
    assert scores.scores[0, 1] == 0.0
    table = scores.table("planted")
    assert table.loc[table["rank"] == 1, ["layer", "head"]].values.tolist() == [[0, 0]]
    assert R.top_heads(table, 1) == [(0, 0)]


def test_masking_the_retrieval_head_breaks_the_copy_and_masking_the_other_does_not():
    m = planted_retrieval_model()
    t = planted_trial(3)
    assert R.run_trial(m, t, n_new=2, masked=[(0, 1)]).generated == [t.code[0]] * 2
    broken = R.run_trial(m, t, n_new=2, masked=[(0, 0)])
    assert broken.generated[0] != t.code[0] and not broken.exact and broken.token_share == 0.0
    # masking on the decode steps only (one shared prefill) breaks it too, and leaves the prefill intact
    cache = R.prefill(m, t)
    assert R.decode(m, t, R.branch(cache), n_new=2, masked=[(0, 0)]).generated[0] != t.code[0]
    assert R.decode(m, t, R.branch(cache), n_new=2).generated == [t.code[0]] * 2
    assert cache.length == len(t.tokens) - 1


def test_decoding_from_a_branched_prefill_equals_a_fresh_run_and_matches_generate():
    m = planted_retrieval_model()
    t = planted_trial(5)
    fresh = R.run_trial(m, t, n_new=4)
    cache = R.prefill(m, t)
    first = R.decode(m, t, R.branch(cache), n_new=4)
    second = R.decode(m, t, R.branch(cache), n_new=4)
    assert fresh.generated == first.generated == second.generated
    ref = m.generate(torch.tensor([t.tokens]), max_new_tokens=4, do_sample=False, stop_at_eos=False)
    assert ref[0, len(t.tokens) :].tolist() == fresh.generated


def test_mask_hooks_refuse_a_head_that_does_not_exist():
    m = planted_retrieval_model()
    with pytest.raises(ValueError, match=r"head \(0, 2\) does not exist"):
        R.mask_hooks(m, [(0, 2)])


# -- the score's bookkeeping on hand-made patterns ------------------------------------------------


def test_score_step_counts_only_the_needle_position_holding_the_generated_token():
    tokens = [5, 1, 2, 3, 9, 1, 7]  # the code (1, 2, 3) sits at positions 1..3; token 1 recurs at 5
    code = range(1, 4)
    argmax = np.array([[1, 2, 5, 0, 3]])  # [layer, head]
    # generated 1: only a head on position 1 hits (2 holds another code token, 5 holds 1 outside the needle)
    assert R.score_step(argmax, 1, tokens, code).tolist() == [[True, False, False, False, False]]
    assert R.score_step(argmax, 3, tokens, code).tolist() == [[False, False, False, False, True]]
    assert R.score_step(argmax, 9, tokens, code) is None  # not a code token: not a copying step
    assert R.score_step(argmax, 7, tokens, code) is None


def test_retrieval_scores_divide_hits_by_copying_steps_only():
    tokens = (0, 4, 5, 6, 0, 0)
    t = Trial(tokens, (4, 5, 6), 1, 6, 0.0, 1, 0)
    generated = [4, 5, 8, 6]  # step 2 generates a token outside the code: not counted
    argmax = np.array(
        [  # [step, layer=1, head=3]
            [[1, 2, 0]],  # gen 4 at position 1: head 0 hits
            [[2, 2, 3]],  # gen 5 at position 2: heads 0 and 1 hit
            [[3, 3, 3]],  # gen 8: no copy, whatever the heads do
            [[3, 1, 3]],  # gen 6 at position 3: heads 0 and 2 hit
        ]
    )
    s = R.RetrievalScores(1, 3)
    s.add(R.Decoded(t, generated, argmax))
    assert (s.steps, s.copy_steps) == (4, 3)
    assert s.hits.tolist() == [[3, 1, 1]]
    np.testing.assert_array_equal(s.scores, [[1.0, 1 / 3, 1 / 3]])
    d = R.Decoded(t, generated, argmax)
    assert not d.exact and d.token_share == 2 / 3
    assert R.Decoded(t, [4, 5, 6], None).exact
    with pytest.raises(ValueError, match="watch=True"):
        s.add(R.Decoded(t, generated, None))


def test_random_heads_come_from_the_same_layers_and_avoid_the_top_heads():
    top = [(3, 0), (3, 1), (5, 2)]
    for seed in range(20):
        r = R.random_same_layer(top, 4, random.Random(seed), exclude=top)
        assert [layer for layer, _ in r] == [3, 3, 5]
        assert not set(r) & set(top) and len(set(r)) == 3
    with pytest.raises(ValueError, match="layer 3 has no head left"):
        R.random_same_layer([(3, 0), (3, 1), (3, 2)], 3, random.Random(0), exclude=[(3, 0), (3, 1), (3, 2)])


def test_bootstrap_drop_is_paired():
    base = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    drop, lo, hi = R.bootstrap_drop(base, base - 0.25)
    assert drop == pytest.approx(0.25) and lo == pytest.approx(0.25) and hi == pytest.approx(0.25)
    drop, lo, hi = R.bootstrap_drop(np.ones(10), np.array([1.0] * 5 + [0.0] * 5))
    assert drop == 0.5 and 0.1 < lo < 0.5 < hi < 0.9


def test_masking_table_reports_drops_per_condition():
    import pandas as pd

    rows = []
    for i in range(4):
        rows.append(dict(length=64, trial=i, condition="none", draw=0, exact=True, token_share=1.0))
        rows.append(dict(length=64, trial=i, condition="top", draw=0, exact=i == 0, token_share=0.5))
        for draw in (1, 2):
            rows.append(dict(length=64, trial=i, condition="random", draw=draw, exact=draw == 1, token_share=1.0))
    table = R.masking_table(pd.DataFrame(rows), k=2).set_index(["condition", "draw"])
    assert table.loc[("top", 0), "exact_drop"] == 0.75
    assert table.loc[("random", 1), "exact_drop"] == 0.0 and table.loc[("random", 2), "exact_drop"] == 1.0
    assert table.loc[("random (mean)", ""), "exact_drop"] == 0.5
    assert table.loc[("top", 0), "token_share_drop"] == 0.5


# -- the needle-in-a-haystack task ------------------------------------------------------------------


class CharTokenizer:
    """One token per character (id = code point): every digit, '.' and space is its own token."""

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(map(chr, ids))


def test_insert_needle_puts_the_needle_exactly_at_the_nearest_allowed_boundary():
    hay = list(range(100, 140))  # 40 tokens
    needle = [1, 2, 3]
    allowed = [0, 7, 18, 25, 40]
    for depth, at in [(0.0, 0), (0.25, 7), (0.5, 18), (0.6, 25), (1.0, 40)]:  # 0.25 * 40 = 10: 7 is nearer than 18
        out, where = niah.insert_needle(hay, needle, depth, allowed)
        assert where == at
        assert out[at : at + 3] == needle
        assert out[:at] + out[at + 3 :] == hay
    with pytest.raises(ValueError, match="depth=1.5"):
        niah.insert_needle(hay, needle, 1.5, allowed)


def test_build_trial_places_the_code_where_it_says_at_a_sentence_boundary():
    tok = CharTokenizer()
    text = "One fact. Two facts here. Three.\n\nA new passage starts and ends. Last words"
    hay = tok.encode(text)
    bounds = niah.boundaries(tok, hay)
    assert bounds[0] == 0 and bounds[-1] == len(hay)
    assert all(text[b - 1] in ".\n" for b in bounds[1:-1])
    for depth in niah.DEPTHS:
        t = niah.build_trial(tok, hay, depth, "4829317", window=3)
        assert t.insert_at in bounds
        target = depth * len(hay)
        assert all(abs(t.insert_at - target) <= abs(b - target) for b in bounds)
        prompt = tok.decode(list(t.tokens))
        assert tok.decode([t.tokens[p] for p in t.code_positions]) == "4829317"
        start = prompt.index(niah.NEEDLE.format(code="4829317"))
        assert prompt[start:].startswith(" The secret code is 4829317.")
        assert prompt.count("4829317") == 1
        # the haystack is intact around the needle, and the prompt ends with the answer's opening
        assert prompt.replace(niah.NEEDLE.format(code="4829317"), "", 1).startswith(text)
        assert prompt.endswith(niah.ANSWER_PREFIX)
        assert (t.length, t.depth, t.window) == (len(hay), depth, 3)


def test_random_codes_have_distinct_digits():
    rng = random.Random(0)
    for _ in range(50):
        code = niah.random_code(rng)
        assert len(code) == niah.CODE_LENGTH == len(set(code)) and code.isdigit()
    with pytest.raises(ValueError, match="11 distinct digits"):
        niah.random_code(rng, 11)


# -- retrieval in the head report, the map and the page --------------------------------------------


@pytest.fixture(scope="module")
def probed_planted(tmp_path_factory):
    """The planted encoder of tests.factories probed (small), with a retrieval table in which only
    head 1 is a retrieval head, written where ``interp retrieval --out <folder>/retrieval`` puts it."""
    from analyses import heads
    from analyses.heads import report
    from tests.factories import planted_items, planted_model

    m = planted_model("bidirectional", values=True)
    df = heads.probe_items(m, planted_items(24, seed=5), n_repeat=4, n_boot=10, null_model=False)
    df["model"] = df.attrs["model"] = "planted"
    out = tmp_path_factory.mktemp("planted")
    report.write_report(df, out)
    (out / "retrieval").mkdir()
    (out / "retrieval" / "retrieval.csv").write_text(
        "model,layer,head,retrieval,hits,copy_steps,rank\n"
        "planted,0,0,0.0,0,10,2\nplanted,0,1,0.8,8,10,1\nplanted,0,2,0.05,0,10,3\nplanted,0,3,,0,0,4\n"
    )
    (out / "retrieval" / "retrieval.md").write_text("## Retrieval heads: planted\n\nMASKING-TABLE-MARKER\n")
    return df, out


def test_report_and_map_show_the_retrieval_heads(probed_planted, tmp_path):
    from analyses.heads import report
    from analyses.heads.labels import role_map
    from analyses.report import compose

    df, out = probed_planted
    table = R.read_retrieval(out / "retrieval" / "retrieval.csv")
    assert np.isnan(table.loc[3, "retrieval"])
    hm = compose.with_retrieval(role_map(df), table)
    assert hm.loc[hm["retrieval_head"], ["layer", "head"]].values.tolist() == [[0, 1]]
    assert report.map_table(hm)["retrieval"].tolist() == ["0.000", "0.800", "0.050", ""]
    sections = compose.report_sections(df, retrieval=table)
    ids = [s.id for s in sections]
    assert ids[ids.index("map-detail") + 1] == "retrieval"  # right after the map, as the report had it
    by_id = {s.id: s for s in sections}
    assert "| 0 | 1 | 0.800 |" in by_id["retrieval"].markdown
    header = next(line for line in by_id["map-detail"].markdown.splitlines() if line.startswith("| layer"))
    assert header.endswith("| retrieval |")
    plain = report.report_sections(df)
    assert "retrieval" not in {s.id for s in plain}  # nothing without a table
    assert compose.report_sections(df) == plain
    assert "retrieval" not in report.map_table(role_map(df))
    # write_report with the retrieval heads: the section in report.md, the marks on the map figure
    marked, bare = tmp_path / "marked", tmp_path / "bare"
    compose.write_report(df, marked, retrieval=table)
    report.write_report(df, bare)
    assert "Retrieval heads (long context)" in (marked / "report.md").read_text()
    assert "Retrieval heads" not in (bare / "report.md").read_text()
    assert (marked / "role_map.png").read_bytes() != (bare / "role_map.png").read_bytes()
    assert (marked / "heads.csv").read_bytes() == (bare / "heads.csv").read_bytes()


def test_page_embeds_the_retrieval_scores_and_report(probed_planted):
    from analyses.report import page

    _, out = probed_planted
    html = page.page_from_folder(out)
    data = page.read_page_data(html)
    assert data["role_scores"]["retrieval"][0] == [0.0, 0.8, 0.05, None]
    assert [h["retrieval"] for h in data["heads"]] == [0.0, 0.8, 0.05, None]
    assert "Retrieval heads (long context)" in html and "MASKING-TABLE-MARKER" in html
    plain_dir = out.parent / (out.name + "-without")
    plain_dir.mkdir()
    for f in out.iterdir():
        if f.is_file():
            (plain_dir / f.name).write_bytes(f.read_bytes())
    plain = page.read_page_data(page.page_from_folder(plain_dir))
    assert "retrieval" not in plain["role_scores"] and "retrieval" not in plain["heads"][0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("layer,head,score\n0,1,0.5\n", r"lacks the columns \['retrieval'\]"),
        ("layer,head,retrieval\n0,1,1.5\n", "line 2: retrieval=1.5 is not a share"),
        ("layer,head,retrieval\n0,x,0.5\n", "line 2: layer and head must be whole numbers"),
        ("layer,head,retrieval\n0,1,nan\n", r"line 2: retrieval=nan is not a share in \[0, 1\] \(leave the cell empty"),
        ("layer,head,retrieval\n0,1,inf\n", "line 2: retrieval=inf is not a share"),
        ("layer,head,retrieval\n0,1,0.5\n0,1,0.2\n", r"line 3: layer 0, head 1 is listed twice \(first on line 2\)"),
        ("layer,head,retrieval\n-1,1,0.5\n", "line 2: layer -1, head 1: layer and head count from 0"),
    ],
)
def test_read_retrieval_refuses_bad_tables_in_one_line(tmp_path, text, message):
    path = tmp_path / "retrieval.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        R.read_retrieval(path)


def test_cli_refuses_bad_arguments_before_loading_a_model(tmp_path, capsys):
    from analyses.cli import main

    bad = tmp_path / "ranking.csv"
    bad.write_text("layer,head\n0,1\n")
    out = tmp_path / "out"
    assert main(["retrieval", "--out", str(out), "--ranking", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("interp retrieval:") and "lacks the columns ['retrieval']" in err and "\n" not in err
    assert not out.exists()
    with pytest.raises(SystemExit) as e:
        main(["retrieval", "--out", str(out), "--lengths", "512,x"])
    assert e.value.code == 2 and "comma-separated list of lengths" in capsys.readouterr().err


def test_cli_names_the_ranking_flag_and_checks_it_before_loading(tmp_path, monkeypatch, capsys):
    """Issue 41 item 5: a bad --ranking is refused before the model loads, in one line that names the
    flag: a written nan, and a ranking with fewer scored heads than --k (the empty cells)."""
    import models
    from analyses.cli import main

    monkeypatch.setattr(models, "load", lambda *a, **k: pytest.fail("loaded the model before checking --ranking"))
    out = tmp_path / "out"
    for text, message in [
        ("layer,head,retrieval\n0,1,nan\n", "retrieval=nan is not a share"),
        ("layer,head,retrieval\n0,1,0.5\n0,2,\n", "the ranking scores 1 heads, fewer than the k=10 to mask"),
    ]:
        bad = tmp_path / "ranking.csv"
        bad.write_text(text)
        assert main(["retrieval", "--out", str(out), "--ranking", str(bad)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"interp retrieval: --ranking {bad}") and message in err and "\n" not in err, err
    assert not out.exists()
    with pytest.raises(SystemExit) as e:
        main(["retrieval", "--out", str(out), "--k", "0"])
    assert e.value.code == 2 and "argument --k: 0 must be at least 1" in capsys.readouterr().err


def test_run_refuses_a_ranking_outside_the_model_before_the_first_haystack(monkeypatch):
    """A ranking of another model's heads used to be found after the accuracy run (52 s on SmolLM2);
    ``run`` checks it against the model's shape before building a haystack."""
    from types import SimpleNamespace

    import analyses.longctx.niah as niah

    monkeypatch.setattr(niah, "trials", lambda *a, **k: pytest.fail("built a haystack before checking the ranking"))
    cfg = SimpleNamespace(n_ctx=100_000, n_layers=2, n_heads=4, name="tiny")
    model = SimpleNamespace(cfg=cfg, tokenizer=object())
    ranking = pd.DataFrame(dict(layer=[0, 5], head=[1, 0], retrieval=[0.9, 0.8]))
    with pytest.raises(ValueError, match="names layer 5, head 0 .* but the model has 2 layers of 4 heads"):
        R.run(model, lengths=[512], n=1, mask_lengths=[512], k=2, ranking=ranking, progress=False)
    with pytest.raises(ValueError, match="scores 2 heads, fewer than the k=3"):
        R.run(model, lengths=[512], n=1, mask_lengths=[512], k=3, ranking=ranking, progress=False)


# -- the contract face: run, write, heads, info (the whole study on the planted model) ---------------


@pytest.fixture(scope="module")
def planted_study():
    return run_planted_study()


def run_planted_study(mask_lengths=(16,)):
    """``R.run`` end to end on the planted model: niah's trials replaced by planted haystacks (one
    needle token: the code), the model given a stand-in tokenizer (the rows decode ids) and room for
    the chat prompt the length check counts."""
    import dataclasses
    from types import SimpleNamespace

    def planted_trials(tokenizer, length, n, depths=niah.DEPTHS, seed=0, skip=0, per_depth=True):
        out = []
        for i in range(skip, skip + n):
            for d in depths if per_depth else (depths[i % len(depths)],):
                t = planted_trial(100 * i + int(10 * d), length)
                out.append(dataclasses.replace(t, depth=d, window=i))
        return out

    m = planted_retrieval_model()
    object.__setattr__(m.cfg, "n_ctx", 256)  # the check adds 200 tokens of chat prompt; planted trials have none
    m.tokenizer = SimpleNamespace(decode=lambda ids: " ".join(map(str, ids)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(niah, "trials", planted_trials)
        return R.run(m, lengths=(16,), n=1, mask_lengths=mask_lengths, mask_n=4, k=1, draws=1, seed=2, progress=False)


def test_run_gives_the_contract_result(planted_study):
    from analyses.contract import check_result

    res = planted_study
    assert isinstance(res, R.RetrievalResult) and check_result(res, scores_heads=True) == []
    info = res.info
    assert (info["analysis"], info["model"], info["seed"]) == ("longctx.retrieval", "planted-retrieval", 2)
    assert info["params"]["lengths"] == [16] and info["params"]["k"] == 1 and info["params"]["ranking"] == "this run"
    assert list(res.heads.columns[:3]) == ["model", "layer", "head"]
    assert res.heads.set_index(["layer", "head"])["retrieval"].to_dict() == {(0, 0): 1.0, (0, 1): 0.0}
    assert info["solved_lengths"] == [16] and info["top_heads"] == [[0, 0]] and info["random_heads"] == [[[0, 1]]]
    drops = res.masking.set_index("condition")["exact_drop"]
    assert drops["top"] == 1.0 and drops["random"] == 0.0  # the planted head carries the copy


def test_write_is_the_output_set_and_read_retrieval_reads_it_back(planted_study, tmp_path):
    import json

    res = planted_study
    out = tmp_path / "retrieval"
    assert R.write(res, out) == out
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(R.OUTPUTS)
    back = R.read_retrieval(out / "retrieval.csv")
    pd.testing.assert_frame_equal(back, res.heads[["layer", "head", "retrieval"]].astype({"layer": int, "head": int}))
    record = json.loads((out / "retrieval.json").read_text())
    assert "analysis" not in record and "params" not in record  # the run's record as it was
    assert list(record) == [k for k in res.info if k not in ("analysis", "params")]
    assert (out / "retrieval.png").read_bytes()[:4] == b"\x89PNG"
    R.write(res, out)  # a set the toolkit wrote is replaced without --force


def test_no_masking_run_writes_its_tables_header_rows(planted_study, tmp_path):
    """No solved length to mask at: masking.csv and mask_trials.csv are empty tables that pandas
    reads, with the columns a masking run writes (not 1-byte files)."""
    res = run_planted_study(mask_lengths=(32,))  # 32 was not run, so not solved
    assert res.info["masked_lengths"] == [] and len(res.masking) == 0
    R.write(res, tmp_path / "out")
    for name, full in (("masking.csv", planted_study.masking), ("mask_trials.csv", planted_study.mask_trials)):
        back = pd.read_csv(tmp_path / "out" / name)
        assert len(back) == 0 and list(back.columns) == list(full.columns), name


def test_old_names_warn_and_still_work(planted_study, tmp_path):
    with pytest.warns(DeprecationWarning, match=r"retrieval\.run_study is deprecated; use .*retrieval\.run"):
        assert R.run_study is R.run
    with pytest.warns(DeprecationWarning, match="Study"):
        assert R.Study is R.RetrievalResult
    with pytest.warns(DeprecationWarning, match="write_outputs"):
        paths = R.write_outputs(planted_study, tmp_path / "old")
    assert sorted(paths) == sorted(R.OUTPUTS) and all(p.is_file() for p in paths.values())
