"""QK attribution (issue 37, section 1): the terms sum to the model's own scores on real models and on
tiny configs of every norm placement the split supports; planted K- and Q-composition are recovered;
the frozen-scale check is exact where nothing is frozen; refusals are one line, up front."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

import models
from analyses.qk import (
    OUTPUTS,
    components_of,
    frozen_scale_checks,
    parse_heads,
    qk_attribution,
    qk_attributions,
    refusal,
    run,
    write,
)
from analyses.qk.planted import DUPLICATE_PREV, INDUCTION, PREV, composition_model, composition_prompt
from tests.factories import TINY, randomized, tiny_config


def _tolerance(a) -> float:
    """The split is computed in float64 from the fp32 run; what is left is the run's own rounding,
    which grows with the size of the products: 1e-5 of the sum of the terms' magnitudes (and 1e-6 absolute)."""
    return 1e-6 + 1e-5 * float(a.terms.abs().sum((-2, -1)).max())


def _assert_sums(a, what: str) -> None:
    err = a.error()
    assert bool((err <= _tolerance(a)).all()), f"{what}: |terms - score| {err.max():.3g} > {_tolerance(a):.3g}"
    if a.difference is not None:
        d = a.difference
        assert bool((d.error() <= _tolerance(d) + _tolerance(a)).all()), f"{what}: difference {d.error().max():.3g}"


# pre-norm (LayerNorm with biases and learned positions; RMSNorm with RoPE and GQA; QK-norm; ALiBi),
# sandwich (Gemma 3's: QK-norm, (1 + w) norms, embedding factor, sliding and full layers with their own
# RoPE bases) and reordered (OLMo-2's: no ln1, QK-norm over the whole projection; and without QK-norm)
SPLITTABLE = {
    "gpt2_like": dict(TINY["gpt2_like"], n_layers=3),
    "llama_gqa": dict(TINY["llama_like"], n_layers=3),
    "qwen3_qknorm": dict(TINY["llama_like"], qk_norm="head", n_layers=3),
    "alibi": dict(TINY["alibi"], n_layers=3),
    "gemma3_like": dict(
        positional="rope", norm="rmsnorm", act="gelu_new", mlp="gated", norm_placement="sandwich",
        qk_norm="head", norm_offset=1.0, norm_scale_fp32=True, embed_scale=32**0.5, n_kv_heads=1, n_layers=3,
        layer_types=("sliding", "full", "sliding"), sliding_window=6, rope_theta=1_000_000.0, rope_local_theta=10_000.0,
    ),
    "olmo2_like": dict(positional="rope", norm="rmsnorm", act="silu", mlp="gated", norm_placement="reordered",
                       qk_norm="full", norm_scale_fp32=True, n_layers=3),
    "reordered_plain": dict(positional="rope", norm="rmsnorm", act="silu", mlp="gated", norm_placement="reordered",
                            n_layers=3),
}  # fmt: skip


def _tiny(key: str):
    return randomized(tiny_config(**SPLITTABLE[key]), seed=3)


@pytest.mark.parametrize("key", sorted(SPLITTABLE))
def test_the_terms_sum_to_the_models_own_scores_on_tiny_configs(key):
    model = _tiny(key)
    assert model.cfg.norm_placement == SPLITTABLE[key].get("norm_placement", "pre")
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, model.cfg.d_vocab, (3, 10), generator=g)
    heads = [(l, h) for l in range(model.cfg.n_layers) for h in range(model.cfg.n_heads)]
    q, k, other = torch.tensor([9, 7, 8]), torch.tensor([5, 4, 6]), torch.tensor([8, 3, 7])
    got = qk_attributions(model, tokens, heads, q, k, other_pos=other)
    for (l, h), a in got.items():
        assert a.components == components_of(model, l)
        assert a.terms.shape == (3, len(a.components), len(a.components))
        assert a.kv_head == h // model.cfg.group_size
        _assert_sums(a, f"{key} L{l}H{h}")
        assert a.info["stream_error"] <= 1e-5 * (1 + a.info["stream_scale"]), (key, a.info)
    # the score is the model's own: the same number the pattern hook's softmax reads
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_attn_scores"))
    a = got[(model.cfg.n_layers - 1, 1)]
    want = cache["attn_scores", model.cfg.n_layers - 1][torch.arange(3), 1, q, k].double()
    assert torch.equal(a.score, want)


def test_a_component_that_is_not_there_changes_nothing():
    """A layer's term matrix has a row and a column for every earlier head, MLP, the input and the
    constants; zeroing one head's W_O zeroes exactly its row and column (nothing else moves it)."""
    model = _tiny("llama_gqa")
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        model.blocks[0].attn.W_O[2] = 0.0
    a = qk_attribution(model, tokens, 2, 1, 8, 3)
    i = a.components.index("a0.h2")
    assert torch.all(a.terms[:, i, :] == 0) and torch.all(a.terms[:, :, i] == 0)
    assert float(a.terms.abs().sum()) > 0
    _assert_sums(a, "W_O zeroed")


def test_the_frozen_scale_check_is_exact_where_no_scale_is_frozen():
    """reordered norms without QK-norm: attention reads the stream itself through W_K, so removing a
    component from the stream changes the key by exactly its projection, and the measured score
    change is minus its marginal term. With QK-norm (olmo2_like) the scale moves and the two part."""
    tokens = torch.randint(0, 50, (4, 10), generator=torch.Generator().manual_seed(4))
    plain, normed = _tiny("reordered_plain"), _tiny("olmo2_like")
    for model, exact in ((plain, True), (normed, False)):
        got = qk_attributions(model, tokens, [(2, 0)], 9, 4)
        asks = [((2, 0), c, side) for c in ("a1.h3", "m0", "input") for side in ("key", "query")]
        fr = frozen_scale_checks(model, tokens, got, asks)
        assert len(fr) == len(asks) * 4 and set(fr["side"]) == {"key", "query"}
        gap = (fr["measured"] - fr["predicted"]).abs().max()
        if exact:
            assert gap <= 1e-5 * (1 + fr["predicted"].abs().max()), gap
        else:
            assert gap > 1e-3, f"QK-norm's scale moves when a component is removed; the check saw {gap}"


def test_planted_k_and_q_composition_are_recovered():
    model = composition_model()
    p = composition_prompt()
    with torch.no_grad():
        _, cache = model.run_with_cache(p["tokens"])
    pattern = cache["pattern", 1][0, :, p["query"]]
    assert int(pattern[INDUCTION[1]].argmax()) == p["induction"]
    assert int(pattern[DUPLICATE_PREV[1]].argmax()) == p["duplicate_prev"]
    prev = f"a{PREV[0]}.h{PREV[1]}"
    for head, key, query_side, key_side in (
        (INDUCTION, p["induction"], "input", prev),  # K-composition: the key's match is written by PREV
        (DUPLICATE_PREV, p["duplicate_prev"], prev, "input"),  # Q-composition: the query's question is PREV's
    ):
        a = qk_attribution(model, p["tokens"], *head, p["query"], key, other_pos=p["other"])
        _assert_sums(a, str(head))
        d = a.difference.terms[0]
        r, c = divmod(int(d.abs().argmax()), d.shape[1])
        assert (a.components[r], a.components[c]) == (query_side, key_side), (head, a.components[r], a.components[c])
        assert float(d[r, c]) > 0.8 * float(a.difference.score[0]) > 0  # the planted pair carries the choice
        assert a.components[int(a.difference.key_marginal[0].argmax())] == key_side
        assert a.components[int(a.difference.query_marginal[0].argmax())] == query_side


@pytest.mark.parametrize(
    "overrides, says",
    [
        (TINY["bert_like"], "post-norm"),
        (dict(positional="rope", norm="rmsnorm", norm_placement="sandwich", attn_softcap=2.0), "soft-caps"),
        (dict(attention="bidirectional"), "bidirectional"),
    ],
)
def test_models_whose_scores_do_not_split_are_refused_in_one_line(overrides, says):
    model = models.Transformer(tiny_config(**overrides), seed=0).eval()
    why = refusal(model)
    assert why is not None and says in why and "\n" not in why
    with pytest.raises(ValueError, match=says):
        qk_attribution(model, torch.zeros(1, 4, dtype=torch.long), 0, 0, 3, 1)


def test_bad_positions_and_heads_are_named():
    model = _tiny("gemma3_like")  # layer 0 slides with a window of 6
    tokens = torch.zeros(2, 10, dtype=torch.long)
    with pytest.raises(ValueError, match="after its query"):
        qk_attribution(model, tokens, 1, 0, 3, 5)
    with pytest.raises(ValueError, match="sliding window of 6"):
        qk_attribution(model, tokens, 0, 0, 9, 2)
    with pytest.raises(ValueError, match="outside the prompts of 10 tokens"):
        qk_attribution(model, tokens, 1, 0, 12, 2)
    with pytest.raises(ValueError, match="3 positions for 2 prompts"):
        qk_attribution(model, tokens, 1, 0, [9, 9, 9], 2)
    with pytest.raises(ValueError, match=r"heads 0\.\.3"):
        qk_attribution(model, tokens, 1, 7, 9, 2)
    with pytest.raises(ValueError, match="L<layer>H<head>"):
        parse_heads("L1X0", model)
    assert parse_heads("L1H0,a2.h3, 0.1", model) == [(0, 1), (1, 0), (2, 3)]


@pytest.fixture(scope="module")
def gemma3():
    return models.load("gemma3").eval()


@pytest.mark.parametrize("which", ["smollm2", "gemma3"])
def test_the_terms_sum_to_the_score_on_the_real_models(which, request):
    model = request.getfixturevalue(which)
    tokens = model.to_tokens(["The keys to the old cabinet near the doors are on the table, and the dog sleeps ."])
    n = tokens.shape[1]
    cfg = model.cfg
    heads = [(0, 0), (cfg.n_layers // 2, 1), (cfg.n_layers - 2, cfg.n_heads - 1), (cfg.n_layers - 1, 2)]
    got = qk_attributions(model, tokens, heads, n - 2, 2, other_pos=n - 5)
    for hd, a in got.items():
        _assert_sums(a, f"{which} {hd}")
        assert a.info["stream_error"] <= 1e-5 * (1 + a.info["stream_scale"]), a.info


def test_run_on_smollm2_agreement_heads_writes_one_set(smollm2, tmp_path):
    result = run(smollm2, "subject_verb", "L26H0,L27H8", n=24, batch_size=12, top=4)
    heads = result.heads
    assert list(heads.columns[:3]) == ["model", "layer", "head"] and len(heads) == 2
    assert (heads["max_error"] < 1e-4).all()
    prompts = result.prompts
    assert len(prompts) == 2 * result.info["n_prompts"] and (prompts["key_pos"] < prompts["query_pos"]).all()
    # the rival is the key each head's row attends to most apart from the subject
    assert (prompts["other_pos"] != prompts["key_pos"]).all()
    comp = result.components
    one = comp[(comp["layer"] == 26) & (comp["quantity"] == "difference") & (comp["side"] == "key")]
    assert len(one) == len(components_of(smollm2, 26))
    total = one["mean"].sum()  # the key marginals add up to the mean difference
    assert abs(total - float(heads.loc[heads["layer"] == 26, "difference"].iloc[0])) < 1e-4
    ranked = one[one["rank"] <= 4]
    assert (ranked["ci_low"] <= ranked["mean"]).all() and (ranked["mean"] <= ranked["ci_high"]).all()
    assert set(result.check["side"]) == {"key", "query"} and (result.check["correlation"] > 0.5).all()
    write(result, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == sorted(OUTPUTS)
    assert json.loads((tmp_path / "qk.json").read_text())["params"]["heads"] == ["L26H0", "L27H8"]
    assert pd.read_csv(tmp_path / "qk_heads.csv").shape[0] == 2
    assert "Why the heads attend" in (tmp_path / "qk.md").read_text()


def test_ioi_rival_is_the_subjects_second_mention(smollm2):
    result = run(smollm2, "ioi", [(29, 1)], n=8, batch_size=8, check=False)
    assert result.check.empty
    p = result.prompts
    assert (p["other_pos"] > p["key_pos"]).all()  # S2 comes after the indirect object's first mention
    assert np.isfinite(p["difference"]).all()


def test_the_command_refuses_a_post_norm_model_in_one_line(tmp_path, capsys):
    from analyses.cli import main

    args = ["qk", "--model", "minilm", "--task", "subject_verb", "--heads", "L1H0", "--out", str(tmp_path / "o")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "post-norm" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o").exists()
    assert main(["qk", "--task", "agreement", "--heads", "L1H0", "--out", str(tmp_path / "o")]) == 2
    assert "subject_verb, ioi, pronoun_gender" in capsys.readouterr().err
    assert main(["qk", "--task", "ioi", "--heads", "L1", "--out", str(tmp_path / "o")]) == 2
    assert "L<layer>H<head>" in capsys.readouterr().err


def _page_with_qk(tmp_path):
    """A planted heads table's page with two qk runs under qk/ (the induction and the duplicate-previous
    head): (the page's path, its html)."""
    import base64

    import analyses.heads.report as report
    from analyses.qk.planted import composition_model, composition_prompt
    from analyses.report import page
    from interp.pairs import Pairs
    from tests.analyses.heads.planted_tables import planted_heads

    report.write_report(planted_heads(), tmp_path)
    assert "Why the heads attend" not in page.page_from_folder(tmp_path)
    m, p = composition_model(), composition_prompt()
    clean = p["tokens"].repeat(2, 1)
    corrupted = clean.clone()
    corrupted[:, p["induction"]] = (clean[:, p["induction"]] + 1) % m.cfg.d_vocab
    pairs = Pairs(clean, corrupted, right=clean[:, 0], wrong=clean[:, 1], position=torch.full((2,), p["query"]))
    for name, head in (("induction", INDUCTION), ("duplicate", DUPLICATE_PREV)):
        result = run(m, "subject_verb", [head], pairs=pairs, top=3, check=False)
        write(result, tmp_path / "qk" / name)
    html = page.page_from_folder(tmp_path)
    assert html.count("<h3>Why the heads attend: planted, subject_verb</h3>") == 2
    folders = [tmp_path / "qk" / n for n in ("induction", "duplicate")]
    pngs = [base64.b64encode((f / "qk.png").read_bytes()).decode() for f in folders]
    assert pngs[0] != pngs[1] and all(png in html for png in pngs)
    # each head's detail reads its rows: the planted induction head's key side is the previous-token head's
    qk = page.read_page_data(html)["qk"]
    assert [r["top_key"].split(", ")[0] for r in qk["1,0"]] == ["a0.h0"]
    assert [r["top_query"].split(", ")[0] for r in qk["1,1"]] == ["a0.h0"]  # Q-composition: the query side
    return tmp_path / "report.html", html


def test_the_models_page_shows_the_qk_reports_with_their_figures(tmp_path, cheap_figures):
    """``interp qk --out <model folder>/qk/<task>``: the page's "Data and method" has each report, its
    title one level down and its own figure inlined (two runs' qk.png do not collide), and each head's
    record its rows."""
    _page_with_qk(tmp_path)


def test_the_head_panel_says_why_the_head_attends(browser, tmp_path, cheap_figures):
    path, html = _page_with_qk(tmp_path)
    path.write_text(html, encoding="utf-8")
    ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
    tab = ctx.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    try:
        tab.goto(path.as_uri())
        tab.click('td.hx-cell[data-layer="1"][data-head="0"]')
        text = tab.locator(".hx-detail p.hx-qk").inner_text()
        assert "Why it attends" in text and "subject_verb: the subject beats the rival" in text
        assert "key side a0.h0" in text
        tab.click('td.hx-cell[data-layer="0"][data-head="1"]')
        assert tab.locator(".hx-detail p.hx-qk").count() == 0  # no run read this head
        assert errors == []
    finally:
        ctx.close()
