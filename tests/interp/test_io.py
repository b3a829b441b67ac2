"""The one writer (atomic files and folders) and the one number/table formatter."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest

from interp.io import atomic_dir, atomic_save, atomic_write, fmt, md_table


def test_atomic_write_replaces_and_leaves_nothing_behind(tmp_path):
    target = tmp_path / "sub" / "report.md"
    atomic_write(target, "old")
    atomic_write(target, b"new \xe2\x9c\x93")
    assert target.read_text(encoding="utf-8") == "new \u2713"
    assert os.listdir(target.parent) == ["report.md"]
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # an ordinary file, not mkstemp's 0600


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "report.md"
    atomic_write(target, "old")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["report.md"]


def test_atomic_save_passes_a_path_with_the_suffix_and_cleans_up_on_error(tmp_path):
    seen = []
    atomic_save(tmp_path / "t.csv", lambda p: (seen.append(p.suffix), pd.DataFrame({"a": [1]}).to_csv(p)))
    assert seen == [".csv"] and (tmp_path / "t.csv").read_text().startswith(",a")

    def half_then_fail(p):
        p.write_text("half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        atomic_save(tmp_path / "t.csv", half_then_fail)
    assert (tmp_path / "t.csv").read_text().startswith(",a")
    assert sorted(os.listdir(tmp_path)) == ["t.csv"]


def test_atomic_dir_swaps_a_whole_folder_or_nothing(tmp_path):
    target = tmp_path / "ckpt"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("1")
        assert not target.exists()  # nothing visible before the block ends
    assert (target / "a.txt").read_text() == "1"
    with pytest.raises(ValueError):
        with atomic_dir(target) as tmp:
            (tmp / "b.txt").write_text("2")
            raise ValueError("crash half-way")
    assert sorted(os.listdir(target)) == ["a.txt"]  # the old folder, untouched
    with atomic_dir(target) as tmp:
        (tmp / "c.txt").write_text("3")
    assert sorted(os.listdir(target)) == ["c.txt"]  # replaced as a whole
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # no temporary siblings left


@pytest.mark.parametrize(
    "x, kwargs, expected",
    [
        (None, {}, ""),
        (float("nan"), {}, ""),
        (np.float32("nan"), {}, ""),
        (math.inf, {}, "inf"),
        (0.0, {}, "0"),
        (0.12345, {}, "0.123"),
        (1234.5, {}, "1.23e+03"),
        (12345.0, {}, "1.23e+04"),
        (1.5e-7, {}, "1.50e-07"),
        (0.575, {"fixed": True}, "0.575"),
        (0.5, {"digits": 2, "fixed": True}, "0.50"),
        (3, {}, "3"),
        (np.int64(7), {}, "7"),
        (True, {}, "True"),
        ("L3H7", {}, "L3H7"),
        (np.float64(2.0), {}, "2"),
    ],
)
def test_fmt(x, kwargs, expected):
    assert fmt(x, **kwargs) == expected


def test_md_table_formats_escapes_and_handles_empty():
    df = pd.DataFrame({"check": ["a|b", "c"], "value": [1.5e-7, 0.25], "n": [3, 4]})
    text = md_table(df)
    assert text.splitlines() == [
        "| check | value | n |",
        "|---|---|---|",
        "| a\\|b | 1.50e-07 | 3 |",
        "| c | 0.25 | 4 |",
    ]
    assert md_table(df, columns=["n", "check"]).splitlines()[2] == "| 3 | a\\|b |"
    assert md_table(df.iloc[:0]) == "_(none)_\n"
    assert md_table(df.iloc[:0], empty="(none)") == "(none)\n"
