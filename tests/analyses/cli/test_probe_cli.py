"""`interp probe` end to end on MiniLM (tiny n; the session fixture stands in for models.load)."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest

import models
from analyses import heads
from analyses.cli import probe as heads_cli


@pytest.mark.slow
def test_probe_cli_writes_the_report(minilm, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: minilm)
    parser = argparse.ArgumentParser()
    heads_cli.add_arguments(parser)
    args = parser.parse_args(["--model", "minilm", "--out", str(tmp_path), "--n", "6", "--n-boot", "10", "--no-null"])
    assert heads_cli.run(args) == 0
    df = pd.read_csv(tmp_path / "heads.csv")
    assert list(df.columns[: len(heads.COLUMNS)]) == heads.COLUMNS
    key = ["layer", "head", "role", "direction", "source", "subset", "specials", "weighting"]
    assert len(df) == len(df.drop_duplicates(key))
    assert set(df.layer) == set(range(6)) and set(df["head"]) == set(range(12))
    html = (tmp_path / "report.html").read_text()
    # role map, heatmaps, the attention-against-norm lens (both weightings by default), examples
    assert html.count("data:image/png;base64,") == 3 + len(heads.EXAMPLES)
    assert "wrote" in capsys.readouterr().out


def test_unknown_source_is_a_clear_error(tmp_path):
    parser = argparse.ArgumentParser()
    heads_cli.add_arguments(parser)
    args = parser.parse_args(["--out", str(tmp_path), "--sources", "generated,bogus"])
    with pytest.raises(ValueError, match="unknown data source .bogus.; known: generated, sonnets"):
        heads_cli._items(args)
