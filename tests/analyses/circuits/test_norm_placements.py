"""Sandwich (Gemma 3) and reordered (OLMo-2) norms, on tiny random checkpoints read back by
``models.load``: ln1_post rescales the sum of a layer's heads before it joins the residual, so a head's
output is not a term of any later reader's input and there is no edge graph. ``edge_level_ok`` says
so in one line before the model runs, ``edge_graph`` refuses with the norm placement's own name (not
"post-norm"), and ``run(..., edges=True)`` does node level end to end and says why edges were skipped."""

from __future__ import annotations

import pytest
import torch

import analyses.circuits as circuits
import models
from analyses.circuits.run import edge_level_ok
from tests.factories import FAMILY_NORMS, TINY, randomized, save_tiny_family, tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = {"gemma3": "has sandwich norms (Gemma 2/3)", "olmo2": "has reordered norms (OLMo-2"}


@pytest.fixture(scope="module", params=sorted(FAMILY_NORMS))
def family(request, tmp_path_factory):
    """(key, a tiny model of the family with SmolLM2's tokenizer: the tasks' words are real words)."""
    from transformers import AutoTokenizer

    from models.loading import smollm2_hf_dir

    tok = AutoTokenizer.from_pretrained(str(smollm2_hf_dir()))
    folder = tmp_path_factory.mktemp("ckpt") / request.param  # the folder's name is the model's
    save_tiny_family(request.param, folder, vocab_size=len(tok), tokenizer=tok)
    model = models.load(str(folder))
    assert model.cfg.norm_placement == FAMILY_NORMS[request.param]
    return request.param, model


def test_the_sum_of_the_heads_is_rescaled_before_it_joins_the_residual(family):
    """The premise of the refusal: what attention adds to the residual is ln1_post(sum of the heads'
    results), and ln1_post divides by the sum's norm: the heads' outputs scaled by 2 add the same
    vector as before, not twice it, so no head's output is a term of what later readers read."""
    _, model = family
    assert model.blocks[0].attn.b_O is None  # no output bias: the heads' results sum to attention's output
    tokens = torch.randint(0, 1000, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith(("hook_result", "hook_attn_out")))
        heads_sum = cache["blocks.0.attn.hook_result"].sum(2)  # [batch, pos, d_model]
        added = cache["blocks.0.hook_attn_out"]
        ln1_post = model.blocks[0].ln1_post
        assert (ln1_post(heads_sum) - added).abs().max() <= 1e-5 * added.abs().max()
        assert not torch.allclose(heads_sum, added, atol=1e-3)
        doubled = ln1_post(2 * heads_sum)
    # the same vector up to the norm's eps (measured 3e-5 of the largest value on OLMo-2), not twice it
    assert (doubled - added).abs().max() <= 1e-3 * added.abs().max()
    assert not torch.allclose(doubled, 2 * added, atol=1e-3)


def test_edge_level_is_refused_in_one_line_naming_the_norm_placement(family):
    key, model = family
    why = edge_level_ok(model)
    assert WORDS[key] in why and "ln1_post" in why and why.endswith("node level only"), why
    assert "\n" not in why and "post-norm" not in why
    with pytest.raises(ValueError, match="ln1_post") as err:
        circuits.edge_graph(model)
    message = str(err.value)
    assert WORDS[key] in message and "post-norm" not in message and "\n" not in message
    assert message.endswith("use node_scores (node level)")


def test_pre_and_post_norm_keep_their_answers():
    assert edge_level_ok(randomized(tiny_config(name="llama_like", **TINY["llama_like"]))) == ""
    bert = randomized(tiny_config(name="bert_like", **TINY["bert_like"]))
    assert "is post-norm (BERT)" in edge_level_ok(bert)
    with pytest.raises(ValueError, match="post-norm"):
        circuits.edge_graph(bert)


def test_run_with_edges_does_node_level_and_says_why(family, tmp_path, monkeypatch):
    key, model = family
    import analyses.circuits.edges as edges_module

    def never(*args, **kw):
        raise AssertionError("edge_scores ran on a model without an edge graph")

    monkeypatch.setattr(edges_module, "edge_scores", never)
    res = circuits.run(
        model, "subject_verb", n=24, seed=3, steps=2, n_random=2, batch_size=8, edges=True, exact_pairs=4,
        all_tasks=False, min_accuracy=0, min_pairs=4,
    )  # fmt: skip
    assert res.task.solved and res.edges is None and res.edge_curve is None
    assert res.info["edges"] == edge_level_ok(model) and WORDS[key] in res.info["edges"]
    # node level ran to the end: both methods, exact patching, the curve from the corrupted to the clean run
    heads = res.heads
    assert len(heads) == model.cfg.n_layers * model.cfg.n_heads and heads["exact_effect"].abs().max() > 0
    assert heads["eap"].abs().max() > 0 and heads["eap-ig"].abs().max() > 0
    assert set(res.summary["level"]) == {"node"} and set(res.agreement["method"]) == {"eap", "eap-ig"}
    curve = res.curve[res.curve["method"] != "random"]
    ends = curve.groupby("proportion")["faithfulness"].agg(["min", "max"])
    assert abs(ends.loc[1.0]).max() == pytest.approx(1.0, abs=1e-5) and ends.loc[0.001].abs().max() <= 1e-5
    folder = circuits.write(res, tmp_path / "out")
    written = {p.name for p in folder.iterdir() if not p.name.startswith(".")}
    assert written == set(circuits.OUTPUTS) - {"edges.csv"}
    assert f"Edges: not scored ({res.info['edges']})" in (folder / "report.md").read_text()
