"""The face of ``analyses.heads``: every public name of its modules re-exported, one defaults record
read by every entry point (the one-liner, ``run`` and ``interp probe``), the contract (``run`` ->
``ProbeResult``, ``OUTPUTS``, ``write``), and the deprecated names that still work with a warning."""

from __future__ import annotations

import argparse
import ast
import fnmatch
import importlib
import inspect
import pickle
import pkgutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analyses import contract, heads
from analyses.cli import main
from tests.factories import planted_items, planted_model

# used as modules (``from analyses.heads import report``), not re-exported name by name
PRESENTATION = {"report", "figures"}


def _modules():
    names = sorted(m.name for m in pkgutil.iter_modules(heads.__path__))
    return {n: importlib.import_module(f"analyses.heads.{n}") for n in names if n not in PRESENTATION}


def _defined_public(module) -> set[str]:
    """The public functions and classes a module's own file defines."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    kinds = (ast.FunctionDef, ast.ClassDef)
    return {n.name for n in tree.body if isinstance(n, kinds) and not n.name.startswith("_")}


def test_the_package_reexports_every_public_name_of_its_modules():
    modules = _modules()
    assert {"adapter", "design", "engine", "labels", "summaries", "probe", "pipeline", "defaults"} <= set(modules)
    listed = {name: set(m.__all__) for name, m in modules.items()}
    everything = set().union(*listed.values())
    for name, names in listed.items():
        assert not names - set(heads.__all__), (
            f"analyses.heads does not re-export {sorted(names - set(heads.__all__))} of {name}"
        )
        unbound = [n for n in names if not hasattr(modules[name], n)]
        assert not unbound, f"analyses.heads.{name}.__all__ names what it does not bind: {unbound}"
        unlisted = _defined_public(modules[name]) - names
        assert not unlisted, f"analyses.heads.{name} defines public {sorted(unlisted)} outside its __all__"
    assert set(heads.__all__) == everything, sorted(set(heads.__all__) ^ everything)
    assert len(heads.__all__) == len(set(heads.__all__))
    for n in heads.__all__:
        owner = next(m for m, names in listed.items() if n in names)
        assert getattr(heads, n) is getattr(modules[owner], n), n


def test_every_entry_point_reads_the_one_defaults_record():
    d = heads.DEFAULTS
    items = inspect.signature(heads.probe_items).parameters
    for name in ("repeat_length", "seed", "null_n", "n_boot", "alpha", "margin", "mass_margin", "batch_size"):
        assert items[name].default == getattr(d, name), name
    assert tuple(items["weighting"].default) == d.weighting == ("attention", "norm")
    assert tuple(items["specials"].default) == d.specials
    assert items["n_repeat"].default == heads.n_repeat_for(d.n) == 100
    one_liner = inspect.signature(heads.probe_heads).parameters
    assert one_liner["n"].default == d.n and one_liner["seed"].default == d.seed
    run = inspect.signature(heads.run).parameters
    for name in ("n", "seed", "n_boot", "alpha", "batch_size", "weighting"):
        assert run[name].default == getattr(d, name), name
    from analyses.cli import probe as probe_cli

    parser = argparse.ArgumentParser()
    probe_cli.add_arguments(parser)
    args = parser.parse_args(["--out", "x"])
    assert (args.n, args.seed, args.n_boot, args.alpha, args.batch_size) == (
        d.n,
        d.seed,
        d.n_boot,
        d.alpha,
        d.batch_size,
    )
    assert tuple(w.strip() for w in args.weighting.split(",")) == d.weighting


def test_n_repeat_for_clips_to_20_and_200():
    assert [heads.n_repeat_for(n) for n in (1, 20, 60, 200, 5000)] == [20, 20, 60, 200, 200]


def test_has_norm_rows():
    assert heads.has_norm_rows(pd.DataFrame({"weighting": ["attention", "norm"]}))
    assert not heads.has_norm_rows(pd.DataFrame({"weighting": ["attention"]}))
    assert not heads.has_norm_rows(pd.DataFrame({"weighting": []}))
    assert not heads.has_norm_rows(pd.DataFrame({"score": [1.0]}))  # an older heads.csv


def test_the_one_liner_scores_the_norm_lens_as_interp_probe_does():
    """probe_heads without options: both weightings, so a boundary label needs the norm row too
    (the planted head 1 attends to '.' and moves nothing from it: a noop_sink, not a delimiter)."""
    df = heads.probe_heads(planted_model(values=True), items=planted_items(60, seed=1), n_repeat=0, n_boot=20)
    assert heads.has_norm_rows(df) and df.attrs["weighting"] == ["attention", "norm"]
    roles = heads.labelled_roles(df)
    assert "delimiter" not in set(roles.loc[roles["head"] == 1, "role"])


@pytest.fixture(scope="module")
def result():
    return heads.run(planted_model(values=True), planted_items(40, seed=2), n=20, n_boot=10, null_model=False)


def test_run_gives_a_result_that_keeps_the_contract(result):
    assert contract.check_result(result, scores_heads=True) == []
    assert list(result.heads.columns[:3]) == list(contract.HEAD_KEYS)
    assert list(result.heads.columns) == heads.COLUMNS  # heads.csv's own order: .heads is the table itself
    info = result.info
    assert info["analysis"] == "heads" and info["model"] == "planted" and info["seed"] == 0
    assert info["params"]["weighting"] == ["attention", "norm"] and info["params"]["n_repeat"] == 20
    assert result.name == "planted" and result.n_items == 40 and result.n_dropped == 0
    assert result.page_examples is not None and set(result.page_examples) == {"sentences", "patterns"}
    back = pickle.loads(pickle.dumps(result))  # what a worker sends: the model stays behind
    assert back.model is None and result.model is not None
    pd.testing.assert_frame_equal(back.heads, result.heads)


def test_run_in_query_blocks_gives_the_whole_pattern_table(result):
    """``run(query_block=3)`` (``interp probe --query-block 3``): each layer's pattern reduced three
    query rows at a time gives the whole-pattern run's table (the same sums, to float rounding), and
    the block size is in ``info``; ``--query-block 0`` is refused naming the flag."""
    blocked = heads.run(
        planted_model(values=True), planted_items(40, seed=2), n=20, n_boot=10, null_model=False, query_block=3
    )
    assert blocked.info["params"]["query_block"] == 3 and "query_block" not in result.info["params"]
    a, b = result.heads, blocked.heads
    numeric = [c for c in a.columns if pd.api.types.is_float_dtype(a[c])]
    pd.testing.assert_frame_equal(a.drop(columns=numeric), b.drop(columns=numeric))
    np.testing.assert_allclose(b[numeric].to_numpy(float), a[numeric].to_numpy(float), rtol=1e-5, atol=1e-6)
    with pytest.raises(SystemExit):
        main(["probe", "--out", "unused", "--query-block", "0"])


def test_write_writes_the_outputs_as_one_set(result, tmp_path, cheap_figures):
    from analyses.heads import report

    out = heads.write(result, tmp_path / "run")
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    written = [n for n in names if any(fnmatch.fnmatchcase(n, o) for o in heads.OUTPUTS)]
    assert written and {"heads.csv", "report.md", "examples.json", "role_map.png", "heatmaps.png"} <= set(written)
    assert "report.html" not in names  # the report layer renders it (analyses.report.page)
    assert [n for n in names if n not in written] == []
    report.write_csv(result.heads, tmp_path / "direct.csv")
    assert (out / "heads.csv").read_bytes() == (tmp_path / "direct.csv").read_bytes()
    from interp.io import OutputError

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "heads.csv").write_text("my own\n")
    with pytest.raises(OutputError):  # a file of these names that no toolkit run wrote
        heads.write(result, tmp_path / "mine")
    heads.write(result, tmp_path / "mine", force=True)
    assert (tmp_path / "mine" / "heads.csv").read_bytes() == (out / "heads.csv").read_bytes()


def test_the_cli_uses_the_library_outputs():
    from analyses.cli import probe as probe_cli

    assert not hasattr(probe_cli, "OWNS")
    assert "from analyses.heads import OUTPUTS" in inspect.getsource(probe_cli.run)


def test_old_names_still_work_with_a_warning(result):
    import analyses.heads.probe as old

    with pytest.warns(DeprecationWarning, match="analyses.heads.labels.role_map"):
        assert old.role_map is heads.role_map
    with pytest.warns(DeprecationWarning, match="summaries.top_head"):
        assert old.top_head is heads.top_head
    with pytest.raises(AttributeError):
        old.no_such_name  # noqa: B018
    with pytest.warns(DeprecationWarning, match="ProbeResult.heads"):
        assert result.df is result.heads
    with pytest.warns(DeprecationWarning, match="ProbeRun is now ProbeResult"):
        heads.ProbeRun(heads=None, info={}, n_items=0, n_dropped=0)
    with pytest.warns(DeprecationWarning, match="run_probe is now"):
        got = heads.run_probe(planted_model(), planted_items(8, seed=0), n=20, n_boot=5, null_model=False)
    assert isinstance(got, heads.ProbeResult) and got.examples is None and len(got.heads)
