"""Head-probing report: files, schema, self-contained HTML, atomic writes, comparison."""

from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd
import pytest

from analyses import heads, report
from tests.analyses.test_heads import planted_items, planted_model


@pytest.fixture(scope="module")
def probed():
    out = {}
    for attention in ("bidirectional", "causal"):
        m = planted_model(attention)
        df = heads.probe_items(m, planted_items(60, seed=5), n_repeat=20, n_boot=30, null_model=False)
        df["model"] = df.attrs["model"] = f"planted-{attention}"
        out[attention] = (m, df)
    return out


@pytest.fixture(scope="module")
def written(probed, tmp_path_factory):
    m, df = probed["bidirectional"]
    examples = heads.example_patterns(m, df, roles=["subject_verb", "delimiter"])
    out = tmp_path_factory.mktemp("report")
    return out, report.write_report(df, out, examples=examples), examples


def test_report_files_and_csv_round_trip(probed, written):
    _, df = probed["bidirectional"]
    tmp_path, paths, _ = written
    for name in ("heads.csv", "report.md", "report.html", "heatmaps.png", "pattern_subject_verb.png", "pattern_delimiter.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    back = pd.read_csv(paths["csv"])
    assert list(back.columns[: len(heads.COLUMNS)]) == heads.COLUMNS
    assert back["label"].dtype == bool
    np.testing.assert_allclose(back["score"], df["score"], rtol=1e-5)
    assert (back["label"] == df["label"]).all()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_html_is_self_contained_and_md_lists_labels(probed, written):
    _, df = probed["bidirectional"]
    tmp_path, _, examples = written
    page = (tmp_path / "report.html").read_text()
    srcs = re.findall(r'src="([^"]*)"', page)
    assert len(srcs) == 3 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "href=" not in page
    md = (tmp_path / "report.md").read_text()
    n_labels = int(df.label.sum())
    assert f"Labelled heads ({n_labels} labels)" in md
    assert "| 0 | 2 | subject_verb | verb->subject |" in md  # the planted subject-verb head
    assert "Holm" in md
    # the example: the row of 'sleeps' puts its weight on 'cat' in the planted head
    ex = examples[0]
    assert (ex["layer"], ex["head"]) == (0, 2) and ex["query_word"] == "sleeps"
    assert ex["pattern"][ex["row"], ex["col"]] > 0.99


def test_causal_example_has_an_empty_upper_triangle(probed):
    m, df = probed["causal"]
    ex = heads.example_patterns(m, df, roles=["subject_verb"])[0]
    p = np.asarray(ex["pattern"])
    assert ex["causal"] and np.all(np.triu(p, k=1) == 0) and p[ex["row"], ex["col"]] > 0.99


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "report.md"
    report.atomic_write(target, "old")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        report.atomic_write(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["report.md"]


def test_csv_needs_the_stable_columns(probed, tmp_path):
    _, df = probed["bidirectional"]
    with pytest.raises(ValueError, match="p_value"):
        report.write_csv(df.drop(columns=["p_value"]), tmp_path / "heads.csv")


def test_comparison_counts_labelled_heads_per_role(probed, tmp_path):
    dfs = {name: df for name, (_, df) in probed.items()}
    path = report.write_comparison(dfs, tmp_path)
    text = path.read_text()
    for name, df in dfs.items():
        for role in ("previous_token", "subject_verb", "delimiter"):
            n = df[(df.role == role) & df.label][["layer", "head"]].drop_duplicates().shape[0]
            table = report.role_layers(df).set_index("role")
            assert table.loc[role, "heads"] == n
    assert "bidirectional heads" in text and "causal heads" in text  # one column group per model (dict keys)
    row = next(line for line in text.splitlines() if line.startswith("| subject_verb |"))
    assert row.count("| 1 |") == 2  # one planted subject-verb head in each model
