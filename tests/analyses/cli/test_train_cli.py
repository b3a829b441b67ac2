"""``interp train``: config files in, a resumable checkpoint out."""

from __future__ import annotations

import json

import pytest

import models
from analyses.cli import main
from models.training import read_config
from tests.factories import tiny_train_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread is fastest on shared cores


CONFIG = tiny_train_config(steps=4)


def test_train_then_resume_from_a_json_config(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(CONFIG))
    assert main(["train", "--config", str(path), "--out", str(tmp_path / "run"), "--no-progress", "--steps", "2"]) == 0
    assert main(["train", "--config", str(path), "--out", str(tmp_path / "run"), "--no-progress", "--resume"]) == 0
    meta = json.loads((tmp_path / "run" / "interp_config.json").read_text())
    assert meta["extra"]["step"] == 4 and len(meta["extra"]["history"]) == 4
    assert meta["config"]["positional"] == "alibi" and meta["config"]["d_vocab"] <= 280
    model = models.load(str(tmp_path / "run"))
    assert model.tokenizer is not None and model.cfg.name == "cli-tiny"
    assert "resuming" in capsys.readouterr().out


def test_toml_config_matches_the_study(tmp_path):
    from pathlib import Path

    conf = read_config(Path(__file__).resolve().parents[3] / "configs" / "positional_rope.toml")
    from analyses.positional import BUDGETS

    full = BUDGETS["full"]
    assert conf["training"]["steps"] == full.train.steps and conf["training"]["batch_size"] == full.train.batch_size
    assert conf["model"]["d_model"] == full.d_model and conf["model"]["n_ctx"] == full.n_ctx


def test_bad_configs_are_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"training": {}}))
    with pytest.raises(ValueError, match="model"):
        read_config(bad)
    with pytest.raises(ValueError, match="json or .toml"):
        read_config(tmp_path / "x.yaml") if (tmp_path / "x.yaml").write_text("a") else None
    with pytest.raises(FileNotFoundError):
        read_config(tmp_path / "missing.toml")
