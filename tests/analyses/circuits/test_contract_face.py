"""The circuits package's face (``analyses.contract``): ``run`` -> ``CircuitResult`` with ``info``
and the per-head table ``heads``, ``write`` through one output set of exactly ``OUTPUTS``' files,
and ``interp circuit`` owning the library's ``OUTPUTS`` (no copy)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import analyses.circuits as circuits
import analyses.cli.circuit as cli_circuit
import models
from analyses.contract import HEAD_KEYS, check_result
from tests.factories import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_lm():
    return make_tiny_lm()


def make_tiny_lm():
    """A tiny causal LM with SmolLM2's tokenizer (the tasks' words are real words)."""
    from transformers import AutoTokenizer

    from models.loading import smollm2_hf_dir

    tok = models.Tokenizer(AutoTokenizer.from_pretrained(str(smollm2_hf_dir())))
    cfg = tiny_config(d_vocab=len(tok.hf), n_ctx=64, positional="rope", norm="rmsnorm", act="silu", mlp="gated")
    return models.Transformer(cfg, tokenizer=tok, seed=0).eval()


@pytest.mark.slow
def test_run_write_and_the_contract(tiny_lm, tmp_path):
    res = circuits.run(
        tiny_lm, "subject_verb", n=24, seed=3, steps=2, n_random=2, batch_size=8, edges=False, exact_pairs=4,
        all_tasks=False, min_accuracy=0, min_pairs=4,
    )  # fmt: skip
    assert check_result(res, scores_heads=True) == []
    assert res.info["analysis"] == "circuits" and res.info["seed"] == 3 and res.info["model"] == res.model_name
    assert res.info["params"]["task"] == "subject_verb" and res.info["params"]["exact_pairs"] == 4
    heads = res.heads
    assert tuple(heads.columns[:3]) == HEAD_KEYS and len(heads) == 2 * 4
    assert {"task", "eap", "eap-ig", "exact_effect"} <= set(heads.columns) and (heads.task == "subject_verb").all()
    assert res.exact_pairs.shape == (4, 2 * 4)  # [pair, head]
    assert res.curve_pairs.shape == (len(res.curve), len(res.task.evaluation))
    # the summary: MIB's CPR / CMD, the two means of f, and each one's bootstrap interval over the held-out pairs
    summary = res.summary
    assert (summary["ci_pairs"] == len(res.task.evaluation)).all()
    for stat in ("cpr", "cmd", "mean_f_p_le_0.1", "mean_f_log_p"):
        assert (summary[f"{stat}_ci95_lo"] <= summary[stat]).all(), stat
        assert (summary[stat] <= summary[f"{stat}_ci95_hi"]).all(), stat
    folder = circuits.write(res, tmp_path / "out")
    written = {p.name for p in folder.iterdir() if not p.name.startswith(".")}
    assert written == set(circuits.OUTPUTS) - {"edges.csv"}  # no edges asked for
    assert json.loads((folder / "circuit.json").read_text())["task"] == "subject_verb"
    assert "mean f on log p [95% CI]" in (folder / "report.md").read_text()
    assert {"cpr_ci95_lo", "mean_f_p_le_0.1", "mean_f_log_p_ci95_hi"} <= set(
        pd.read_csv(folder / "summary.csv").columns
    )


@pytest.mark.slow
def test_a_run_without_the_full_circuit_has_no_intervals_and_does_not_fail(tiny_lm):
    """The intervals renormalise each resample by the full circuit's row: proportions without 1 get
    none (NaN), and ``run`` says so in its info instead of failing after the curve."""
    res = circuits.run(
        tiny_lm, "subject_verb", n=24, seed=3, steps=1, n_random=1, batch_size=8, edges=False, exact=False,
        all_tasks=False, min_accuracy=0, min_pairs=4, proportions=(0.2, 0.5),
    )  # fmt: skip
    assert res.summary["cpr_ci95_lo"].isna().all() and (res.summary["ci_pairs"] == 0).all()
    assert res.info["intervals"].startswith("none") and res.summary["cpr"].notna().all()


def test_the_command_owns_the_librarys_outputs(tmp_path, monkeypatch):
    import interp.io
    from analyses.cli import main

    seen = []

    def opened(folder, owned, **kw):
        seen.append(owned)
        raise ValueError("stop before the model is loaded")

    monkeypatch.setattr(interp.io, "output_dir", opened)
    assert main(["circuit", "--task", "ioi", "--out", str(tmp_path / "o")]) == 2
    assert seen == [circuits.OUTPUTS] and seen[0] is circuits.OUTPUTS
    assert not hasattr(cli_circuit, "OWNS")
