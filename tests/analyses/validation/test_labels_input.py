"""What ``interp validate`` accepts as labels: only a table written for the model being validated
(issue 24 item 11: SmolLM2's heads.csv validated on MiniLM with exit 0), from a file or a pipe
(``--labels <(...)``), and a role -> metric table that covers every role the heads analysis labels."""

from __future__ import annotations

import os
import threading

import pandas as pd
import pytest

import models
from analyses import validation as V
from analyses.cli import main
from analyses.heads.roles import MAP_ROLES, ROLES

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread is fastest on shared cores


def _rows(model: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(model=model, layer=0, head=0, role="previous_token", direction="back", score=0.99, label=True),
            dict(model=model, layer=1, head=2, role="induction", direction="back", score=0.5, label=False),
        ]
    )


@pytest.fixture
def planted_cli(monkeypatch):
    """`interp validate --model planted`: the hand-set causal model (named "planted") and its prompts."""
    import analyses.validation.runner as run

    model, _ = V.planted_model(seed=0)
    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: model)
    monkeypatch.setattr(run, "build_prompts", lambda m, n=8, seed=0: V.planted_prompts(n=n, seed=seed))
    return model


def _validate(labels, out) -> int:
    # alpha 0.2: a null of 6 heads can reach it (p >= 1/7), so no small-null warning precedes a refusal
    argv = ["validate", "--model", "planted", "--labels", str(labels), "--out", str(out), "--n-null", "6"]
    return main([*argv, "--alpha", "0.2"])


def test_labels_of_another_model_are_refused(tmp_path, capsys, planted_cli):
    heads = tmp_path / "smollm2" / "heads.csv"
    heads.parent.mkdir()
    _rows("smollm2").to_csv(heads, index=False)
    assert _validate(heads, tmp_path / "v") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("interp validate: "), err
    assert f"{heads}:2" in err and "'smollm2'" in err and "'planted'" in err, err
    assert not list((tmp_path / "v").glob("*"))  # refused before anything was written


def test_labels_of_the_same_model_from_any_folder_are_accepted(tmp_path, planted_cli):
    heads = tmp_path / "somewhere" / "else" / "heads.csv"  # the folder's name is not the model's
    heads.parent.mkdir(parents=True)
    _rows("planted").to_csv(heads, index=False)
    assert _validate(heads, tmp_path / "v") == 0
    assert pd.read_csv(tmp_path / "v" / "validation.csv")["model"].tolist() == ["planted"]


def test_the_api_refuses_another_models_labels_and_accepts_a_table_without_the_column():
    model, _ = V.planted_model(n_layers=2, n_heads=4)
    mixed = pd.concat([_rows("planted"), _rows("minilm")], ignore_index=True)
    with pytest.raises(ValueError, match=r"labels row 2: column 'model' is 'minilm'.*'planted'"):
        V.run(model, mixed, prompts=V.planted_prompts(n=4), n_boot=10)
    hand_written = _rows("planted").drop(columns=["model"])
    assert len(V.run(model, hand_written, prompts=V.planted_prompts(n=4), n_boot=10).table) == 1


def _fifo_with(tmp_path, text: str):
    """A named pipe a thread writes ``text`` into once: what ``--labels <(...)`` hands in."""
    fifo = tmp_path / "labels.fifo"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "w") as f:
            f.write(text)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return fifo, thread


def test_labels_from_a_pipe_are_read(tmp_path):
    fifo, thread = _fifo_with(tmp_path, _rows("planted").to_csv(index=False))
    table = V.read_labels(fifo)
    thread.join(timeout=10)
    assert table["layer"].tolist() == [0, 1] and table["label"].tolist() == [True, False]
    assert table.attrs["path"] == str(fifo) and len(table.attrs["sha256"]) == 64


def test_labels_cli_reads_a_pipe(tmp_path, planted_cli):
    fifo, thread = _fifo_with(tmp_path, _rows("planted").to_csv(index=False))
    assert _validate(fifo, tmp_path / "v") == 0
    thread.join(timeout=10)
    assert (tmp_path / "v" / "validation.csv").exists()


def test_labels_path_that_is_no_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="labels file not found: .*missing.csv .expected the heads.csv"):
        V.read_labels(tmp_path / "missing.csv")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        V.read_labels(tmp_path)
    with pytest.raises(ValueError, match="not a regular file or a pipe"):
        V.read_labels("/dev/zero")  # a device would never end: refused before a byte is read


def test_every_role_the_heads_analysis_labels_has_its_metric_in_the_table():
    """The role -> metric table names every role ``analyses.heads`` can label (and the pattern
    labels' roles): a metric, or None stated explicitly; no role falls to the default by accident."""
    pattern_roles = set(V.pattern_labels(V.planted_model(n_layers=1, n_heads=2)[0])["role"])
    for role in {*ROLES, *MAP_ROLES, *pattern_roles}:
        assert role in V.ROLE_METRICS, role
        causal, encoder = V.ROLE_METRICS[role]
        assert causal is None or isinstance(causal, str)
        assert encoder is None or isinstance(encoder, str)
        assert V.role_metric(role, True) == causal and V.role_metric(role, False) == encoder
    # the table's metrics are ones the prompts measure
    metrics = {m for pair in V.ROLE_METRICS.values() for m in pair if m}
    assert metrics <= {
        "sv_logit_diff",
        "anaphora_logit_diff",
        "delimiter_loss",
        "induction_loss",
        "loss",
        "sv_probe",
        "anaphora_probe",
        "prev_word_probe",
        "delimiter_probe",
    }


def test_role_metric_is_a_table_lookup_not_a_substring_match():
    # these names contain "sep", "self", "prev" but are no role of the table: the default, not a guess
    assert V.role_metric("separatrix", False) is None and V.role_metric("separatrix", True) == "loss"
    assert V.role_metric("selfish", False) is None
    assert V.role_metric("prevalence", False) is None
    assert V.role_metric("Previous_Token", False) == "prev_word_probe"  # case-insensitive
