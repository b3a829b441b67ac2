"""`interp probe` end to end on MiniLM (tiny n; the session fixture stands in for models.load)."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest

import models
from analyses import heads
from analyses.cli import probe as heads_cli
from tests.analyses.data.test_data import needs_spacy


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
    with pytest.raises(ValueError, match="unknown data source .bogus.; known: clauses, generated, ioi, pairs, sonnets"):
        heads_cli._items(args)


def test_probe_examples_file_puts_your_sentences_in_the_page(minilm, tmp_path, monkeypatch, cheap_figures):
    """`interp probe --examples FILE`: the page's head detail shows the file's sentences (one a line,
    blank lines skipped) instead of the built-in ones, with the model's own attention on them."""
    from analyses.report import page

    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: minilm)
    mine = tmp_path / "mine.txt"
    mine.write_text("the dog that chased the cats barks\n\nmy own second sentence .\n", encoding="utf-8")
    parser = argparse.ArgumentParser()
    heads_cli.add_arguments(parser)
    out = tmp_path / "out"
    argv = ["--model", "minilm", "--out", str(out), "--n", "4", "--n-boot", "10", "--no-null", "--examples", str(mine)]
    assert heads_cli.run(parser.parse_args(argv)) == 0
    data = page.read_page_data((out / "report.html").read_text())
    shown = [s["text"] for s in data["examples"]]
    assert shown == ["the dog that chased the cats barks", "my own second sentence ."]
    expected = heads.example_patterns(minilm, sentences=shown).page()["patterns"]["2,8"]
    head = next(h for h in data["heads"] if (h["layer"], h["head"]) == (2, 8))
    assert head["examples"] == expected
    # report.md's figures stay on the built-in sentences (they mark a gold word); it says where yours are
    md = (out / "report.md").read_text()
    assert "the 2 sentences of `--examples` carry no gold word, so they are shown in report.html" in md
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ValueError, match="no sentence in it"):
        heads_cli.run(parser.parse_args([*argv[:-1], str(empty), "--force"]))


@needs_spacy
def test_a_text_files_left_out_sentences_are_named_with_why(tmp_path, monkeypatch, capsys):
    """Issue 41 item 4: `--sources text=FILE` used to count 28 of 30 sentences without saying which two
    were left out or why. One stderr line names each (before the model loads), and the report's data
    section says the same."""
    from analyses import data
    from analyses.cli import main
    from analyses.heads import report
    from analyses.heads.probe import _user_files

    mine = tmp_path / "mine.txt"
    mine.write_text("The cat sleeps on the mat.\nHello there.\n\nMy sister lives in Paris.\nGo!\n", encoding="utf-8")

    def stop(*a, **k):
        raise ValueError("stop before the model")

    monkeypatch.setattr(heads, "run", stop)
    assert main(["probe", "--sources", f"text={mine}", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        f'interp probe: {mine}: 2 of 4 sentences give no subject-verb item and are left out: line 2 ("Hello '
        'there.": spaCy found no noun or pronoun subject of a verb in it); line 5 ("Go!": 2 words, fewer than 3)'
    )
    assert err[1] == "interp probe: stop before the model"
    items = data.load_items(n=5, sources=f"text={mine}")
    text = report._data_text({"user_files": _user_files(items)})
    assert (
        f"Your data: `{mine}`, 2 of its 4 sentences, 2 subject-verb items from spaCy arcs (silver); left out: " in text
    )
    assert 'line 5 ("Go!": 2 words, fewer than 3).' in text
