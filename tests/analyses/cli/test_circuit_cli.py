"""`interp circuit` end to end on a tiny random model with SmolLM2's tokenizer (the real prompt
generator needs a real tokenizer; the model is tiny so the run takes seconds)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import models
from analyses.circuits.tasks import TASKS
from analyses.cli import main
from tests.factories import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_lm():
    from transformers import AutoTokenizer

    from models.loading import smollm2_hf_dir

    tok = models.Tokenizer(AutoTokenizer.from_pretrained(str(smollm2_hf_dir())))
    cfg = tiny_config(
        d_vocab=len(tok.hf), n_ctx=64, positional="rope", norm="rmsnorm", act="silu", mlp="gated", n_kv_heads=2
    )
    return models.Transformer(cfg, tokenizer=tok, seed=0).eval()


def test_bad_task_is_refused_before_loading_with_the_known_ones(tmp_path, monkeypatch, capsys):
    def no_load(*a, **k):
        raise AssertionError("the model must not be loaded for a bad --task")

    monkeypatch.setattr(models, "load", no_load)
    assert main(["circuit", "--task", "subject_verbs", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "unknown task 'subject_verbs'" in err and "known tasks: " + ", ".join(TASKS) in err
    assert not (tmp_path / "o").exists()
    assert main(["circuit", "--task", "ioi", "--methods", "eap,acdc", "--out", str(tmp_path / "o")]) == 2
    assert "--methods" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--min-accuracy", "2"], "--min-accuracy"),
        (["--min-accuracy", "nan"], "--min-accuracy"),
        (["--min-pairs", "-3"], "--min-pairs"),
        (["--n", "0"], "--n"),
        (["--batch-size", "0"], "--batch-size"),
        (["--steps", "x"], "--steps"),
    ],
)
@pytest.mark.parametrize("command", ["circuit", "agreement"])
def test_bad_numbers_are_refused_at_parse_time_naming_the_flag(tmp_path, monkeypatch, capsys, flags, named, command):
    monkeypatch.setattr(models, "load", lambda *a, **k: pytest.fail("loaded a model before checking the flags"))
    if command == "agreement" and named == "--steps":
        flags, named = ["--top", "0"], "--top"  # agreement has no --steps
    with pytest.raises(SystemExit) as e:
        main([command, "--task", "ioi", "--out", str(tmp_path / "o"), *flags])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {named}:" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_thresholds_are_checked_by_the_library_before_loading(monkeypatch):
    import analyses.circuits as circuits
    from analyses.circuits.tasks import circuit_task

    monkeypatch.setattr(models, "load", lambda *a, **k: pytest.fail("loaded a model before checking"))
    with pytest.raises(ValueError, match=r"min_accuracy=2: give a share in \[0, 1\]"):
        circuits.run("smollm2", "ioi", min_accuracy=2)
    with pytest.raises(ValueError, match="min_pairs=-3"):
        circuits.run("smollm2", "ioi", min_pairs=-3)
    with pytest.raises(ValueError, match="min_pairs=0"):
        circuit_task(object(), "ioi", min_pairs=0)


def test_only_the_asked_tasks_pairs_are_built(tiny_lm, tmp_path, monkeypatch, capsys):
    """``interp circuit --task subject_verb`` builds subject_verb's pairs only: another task whose
    words this tokenizer cannot take (planted here) used to fail the run."""
    import analyses.circuits.tasks as T

    real, built = T._generate, []

    def generate(task, tokenizer, n, seed):
        built.append(task)
        if task != "subject_verb":
            raise ValueError(f"{task}: a word of this task is not one token")
        return real(task, tokenizer, n, seed)

    monkeypatch.setattr(T, "_generate", generate)
    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: tiny_lm)
    out = tmp_path / "out"
    argv = ["circuit", "--model", "tiny", "--task", "subject_verb", "--out", str(out), "--n", "8"]
    assert main(argv + ["--labels", "none", "--no-exact", "--no-edges"]) == 1  # 8 pairs: below min-pairs
    assert built == ["subject_verb"]
    assert "subject_verb not analysed: only" in capsys.readouterr().out
    assert list(pd.read_csv(out / "tasks.csv").task) == ["subject_verb"]


@pytest.mark.slow
def test_circuit_cli_writes_the_outputs(tiny_lm, tmp_path, monkeypatch):
    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: tiny_lm)
    out = tmp_path / "out"
    argv = ["circuit", "--model", "tiny", "--task", "subject_verb", "--out", str(out), "--n", "24"]
    argv += ["--min-accuracy", "0", "--min-pairs", "4", "--n-random", "2", "--steps", "2", "--batch-size", "8"]
    assert main(argv) == 0
    for name in ("tasks.csv", "nodes.csv", "faithfulness.csv", "summary.csv", "report.md", "circuit.json"):
        assert (out / name).is_file(), name
    for name in ("faithfulness.png", "circuit.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    tasks = pd.read_csv(out / "tasks.csv")
    assert list(tasks.task) == ["subject_verb"] and (tasks.n_generated == 24).all()  # only the asked task
    nodes = pd.read_csv(out / "nodes.csv")
    assert len(nodes) == 2 * (4 + 1) and {"eap", "eap-ig", "exact_effect"} <= set(nodes.columns)
    curve = pd.read_csv(out / "faithfulness.csv")
    assert set(curve.method) >= {"eap", "eap-ig", "random"}
    assert np.allclose(curve[curve.k == 0].faithfulness, 0.0)  # the empty circuit is the corrupted run
    assert np.allclose(curve[curve.proportion == 1].faithfulness, 1.0)  # the full one is the clean run
    info = json.loads((out / "circuit.json").read_text())
    assert info["task"] == "subject_verb" and info["circuit"][0] == "input"
    assert info["input"] == "prepend <|endoftext|>"  # SmolLM2's tokenizer: the probe's input convention
    assert "Faithfulness" in (out / "report.md").read_text()
    assert (out / ".interp-manifest.json").is_file()
    # edges (the tiny model is pre-norm and causal): top edges per method, and an edge-level curve
    edges = pd.read_csv(out / "edges.csv")
    assert set(edges.method) == {"eap", "eap-ig"} and {"upstream", "downstream", "score"} <= set(edges.columns)
    e = curve[curve.level == "edge"]
    assert len(e) and np.allclose(e[e.proportion == 1].faithfulness, 1.0)
    summary = pd.read_csv(out / "summary.csv")
    assert set(zip(summary.method, summary.level)) >= {("eap", "node"), ("eap-ig", "edge"), ("random", "edge")}
    # the page's head detail reads the run from MODEL_DIR/circuits/<task>/
    from analyses.circuits.report import page_circuits

    model_dir = tmp_path / "model"
    (model_dir / "circuits").mkdir(parents=True)
    out.rename(model_dir / "circuits" / "subject_verb")
    shown = page_circuits(model_dir)
    assert len(shown) == 2 * 4 and shown["1,3"][0]["task"] == "subject_verb"
    row = nodes[nodes.node == "a1.h3"].iloc[0]
    assert shown["1,3"][0]["importance"] == pytest.approx(-row.exact_normalised, rel=1e-3)


@pytest.mark.slow
def test_an_unsolved_task_is_reported_not_analysed(tiny_lm, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: tiny_lm)
    out = tmp_path / "out"
    argv = ["circuit", "--task", "ioi", "--out", str(out), "--n", "16", "--no-exact", "--no-edges"]
    assert main(argv) == 1  # a random tiny model solves about half the pairs: below 70%
    assert "not analysed" in capsys.readouterr().out
    assert (out / "tasks.csv").is_file() and not (out / "nodes.csv").exists()
    assert "No circuit analysis for `ioi`" in (out / "report.md").read_text()


def _heads_csv(path, model: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [dict(model=model, layer=0, head=1, role="subject_verb", reading="predictive", score=0.9, label=True)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_labels_of_another_model_are_refused(tiny_lm, tmp_path, monkeypatch, capsys):
    """`interp circuit --labels` refuses another model's heads.csv (MiniLM's labels as SmolLM2's
    pattern-label baseline) as `interp validate` does: one line naming the row and both models,
    before any pair is generated; nothing is written."""
    import importlib

    from interp.view import view

    circuit_run = importlib.import_module("analyses.circuits.run")  # the module, not the package's run()

    def no_pairs(*a, **k):
        raise AssertionError("the labels must be refused before the analysis")

    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: tiny_lm)
    monkeypatch.setattr(circuit_run, "_analyse", no_pairs)
    heads = _heads_csv(tmp_path / "minilm" / "heads.csv", "minilm")
    out = tmp_path / "out"
    assert main(["circuit", "--task", "subject_verb", "--labels", str(heads), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("interp circuit: ") and "Traceback" not in err, err
    name = view(tiny_lm).name
    assert f"{heads}:2" in err and "'minilm'" in err and repr(name) in err, err
    assert not out.exists()
    # the model's own table, from any folder, is taken (as a path and as a table)
    own = _heads_csv(tmp_path / "elsewhere" / "heads.csv", name)
    table, source = circuit_run.pick_labels(tiny_lm, "subject_verb", str(own))
    assert list(table["model"]) == [name] and source == f"read from `{own}`"
    with pytest.raises(ValueError, match=r"column 'model' is 'minilm'"):
        circuit_run.pick_labels(tiny_lm, "subject_verb", pd.read_csv(heads))
