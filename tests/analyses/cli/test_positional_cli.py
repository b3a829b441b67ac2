"""``interp positional``: the positional study on the output-set rules of every command (``OUTPUTS``
committed as a set, ``--force``, comma-separated lists), and the package's contract face."""

from __future__ import annotations

import dataclasses
import fnmatch
import json

import pytest

from analyses import positional as P
from analyses.cli import main
from analyses.contract import check_result
from analyses.positional import runs as U
from analyses.positional import synthetic as S
from analyses.positional.report import CLAIMS_COLUMNS
from analyses.positional.tasks import OrderTask
from models.training import TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def tiny_budget(monkeypatch):
    return add_tiny_budget(monkeypatch)


def add_tiny_budget(monkeypatch):
    """A budget named "tiny" whose order runs train for a few steps (seconds for the whole study)."""
    tc = TrainConfig(steps=4, batch_size=8, lr=3e-3, warmup_steps=1, eval_every=2, checkpoint_every=250)
    order = S.TaskSpec(OrderTask(length=8, n_fill=4), tc, d_model=16, n_layers=2, n_heads=2, d_mlp=16)
    budget = dataclasses.replace(U.STUDY_BUDGETS["quick"], name="tiny", order=order, seeds=(0,))
    monkeypatch.setitem(U.STUDY_BUDGETS, "tiny", budget)
    return budget


def _owned(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in P.OUTPUTS)


def test_the_study_writes_its_outputs_as_a_set_and_regenerates_them_from_stored_results(tmp_path, tiny_budget, capsys):
    out, work = tmp_path / "study", tmp_path / "work"
    argv = ["positional", "--budget", "tiny", "--kinds", "order", "--schemes", "none,rope"]
    argv += ["--out", str(out), "--work", str(work)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    written = sorted(p.name for p in out.iterdir())
    manifest = json.loads((out / ".interp-manifest.json").read_text())
    assert {"claims.md", "order.md", "order.png", "runs.csv", "cpu.md"} <= set(written)
    assert all(_owned(n) for n in written if n != ".interp-manifest.json")
    assert set(manifest["files"]) == set(written) - {".interp-manifest.json"}
    assert (out / "claims.md").read_text().strip() in printed
    assert len(list((work / "results").glob("order-*.json"))) == 4  # 2 schemes x 2 attentions x 1 seed
    claims = (out / "claims.md").read_bytes()
    (out / "claims.md").write_text("stale")
    assert main(argv) == 0  # every run stored: read back, not trained, and the tables rewritten
    assert (out / "claims.md").read_bytes() == claims


def test_a_folder_holding_a_users_file_of_its_names_needs_force(tmp_path, tiny_budget, capsys):
    out = tmp_path / "docs"
    out.mkdir()
    (out / "claims.md").write_text("my own notes")
    argv = ["positional", "--budget", "tiny", "--kinds", "order", "--schemes", "none"]
    argv += ["--out", str(out), "--work", str(tmp_path / "work")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("interp positional:") and "claims.md" in err and "--force" in err
    assert (out / "claims.md").read_text() == "my own notes"
    assert main([*argv, "--force"]) == 0
    assert (out / "claims.md").read_text() != "my own notes"


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--kinds", "order,nope"], "unknown run kind 'nope'"),
        (["--schemes", "rope,nope"], "unknown positional scheme 'nope'"),
        (["--budget", "nope"], "unknown budget 'nope'"),
        (["--jobs", "0"], "--jobs"),
    ],
)
def test_bad_selections_fail_in_one_line_before_the_folder_is_touched(tmp_path, capsys, flags, named):
    assert main(["positional", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "w"), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("interp positional:") and named in err and "\n" not in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "w").exists()


def test_the_package_face_follows_the_contract(tmp_path, tiny_budget):
    result = P.run("tiny", work=tmp_path / "work", kinds=["order"], schemes=["rope"], progress=False)
    assert isinstance(result, P.PositionalResult) and check_result(result, scores_heads=False) == []
    assert result.info["analysis"] == "positional" and result.info["model"] == "positional-tiny"
    assert result.info["params"]["kinds"] == ["order"] and result.info["params"]["seeds"] == {"order": [0]}
    assert list(result.runs.id) == ["order-causal-rope-s0", "order-bidirectional-rope-s0"]
    assert list(result.claims.columns) == CLAIMS_COLUMNS
    folder = P.write(result, tmp_path / "report")
    names = [p.name for p in folder.iterdir() if p.name != ".interp-manifest.json"]
    assert names and all(_owned(n) for n in names)
