"""The validation package's face (``analyses.contract``): ``run`` / ``write`` / ``OUTPUTS`` and
``run_powered`` / ``write_powered`` / ``POWERED_OUTPUTS``, their ``.info`` and per-head ``.heads``,
``job`` (what ``interp validate`` runs from a model's name), the command's output sets, and the old
names, which still work with a DeprecationWarning."""

from __future__ import annotations

import fnmatch
import json

import numpy as np
import pandas as pd
import pytest

import models
from analyses import validation as V
from analyses.contract import HEAD_KEYS, check_result
from analyses.validation import job
from analyses.validation.prompts import PromptSet, Task

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread is fastest on shared cores

LABELS = pd.DataFrame(
    [
        dict(model="planted", layer=0, head=0, role="previous_token", direction="back", score=0.99, label=True),
        dict(model="planted", layer=1, head=3, role="induction", direction="back", score=0.5, label=True),
    ]
)


@pytest.fixture(scope="module")
def planted():
    return V.planted_model(seed=0)[0]


@pytest.fixture(scope="module")
def result(planted):
    return V.run(planted, LABELS, prompts=V.planted_prompts(n=6, seed=0), seed=2, n_null=8, n_boot=50)


def _written(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))  # the manifest is hidden


def _matches(names, owned) -> bool:
    """Every name written is owned, and every owned name (or pattern) was written."""
    return all(any(fnmatch.fnmatchcase(n, o) for o in owned) for n in names) and all(
        any(fnmatch.fnmatchcase(n, o) for n in names) for o in owned
    )


def test_run_keeps_the_contract(planted, result):
    assert check_result(result, scores_heads=True) == []
    info = result.info
    assert info["analysis"] == "validation" and info["model"] == "planted" and info["seed"] == 2
    assert info["params"]["n_null"] == 8 and info["params"]["n_boot"] == 50 and "seed" not in info["params"]
    assert info["n_null"] == 8  # the run's own keys stay (validation.md and .json read them)
    heads = result.heads
    assert tuple(heads.columns[:3]) == HEAD_KEYS and {"metric", "effect", "in_null"} <= set(heads.columns)
    assert len(heads[["layer", "head"]].drop_duplicates()) == info["n_heads_evaluated"]
    json.dumps(info["params"])  # JSON-able


def test_empty_effects_give_an_empty_head_table():
    res = V.ValidationResult(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), {"model": "m"})
    assert list(res.heads.columns) == list(HEAD_KEYS) and res.heads.empty


def test_write_writes_exactly_the_outputs_with_the_labels_read(result, tmp_path):
    result.labels_source, result.labels_path, result.labels_sha256 = "read from `x.csv`", "x.csv", "ab" * 32
    try:
        assert V.write(result, tmp_path / "v") == tmp_path / "v"
        assert _matches(_written(tmp_path / "v"), V.OUTPUTS)
        record = json.loads((tmp_path / "v" / "validation.json").read_text())
        assert record["labels"] == "x.csv" and record["labels_sha256"] == "ab" * 32
        assert "read from `x.csv`" in (tmp_path / "v" / "validation.md").read_text()
        with pytest.warns(DeprecationWarning, match="use analyses.validation.write"):
            paths = V.write_outputs(result, tmp_path / "old", "read from `x.csv`", "x.csv", "ab" * 32)
    finally:
        result.labels_source, result.labels_path, result.labels_sha256 = "given", None, None
    for name in V.OUTPUTS:
        assert paths[name].read_bytes() == (tmp_path / "v" / name).read_bytes(), name


def test_validate_is_run_with_a_warning(planted, result):
    with pytest.warns(DeprecationWarning, match="use analyses.validation.run"):
        old = V.validate(planted, LABELS, prompts=V.planted_prompts(n=6, seed=0), seed=2, n_null=8, n_boot=50)
    pd.testing.assert_frame_equal(old.table, result.table, check_exact=True)


# -- the powered run ---------------------------------------------------------------------------------


def _copy_prompts(n=24, length=12, vocab=12) -> PromptSet:
    ps = V.planted_prompts(n=n, length=length, vocab=vocab, seed=0)
    pos, right = np.full(n, length - 1), ps.tokens[:, length - 2].numpy()  # period 2: the previous token
    task = Task("copy_logit_diff", "logit_diff", "logit(next) - logit(current)", np.arange(n), pos=pos, right=right)
    task.wrong = ps.tokens[:, length - 1].numpy()
    return PromptSet(ps.tokens, ps.attention_mask, ps.texts, ps.family, {"copy_logit_diff": task})


@pytest.fixture(scope="module")
def powered():
    model = V.planted_copies({(0, 2): 20.0, (0, 5): 20.0})
    labels = pd.DataFrame([dict(layer=0, head=h, role="copy", score=1.0, label=True) for h in (2, 5)])
    kw = dict(prompts={"copy_logit_diff": _copy_prompts()}, metrics={"copy": "copy_logit_diff"}, n_boot=50)
    return V.run_powered(model, labels, n_null=6, n_group_null=6, ablation="zero", seed=1, **kw)


def test_run_powered_keeps_the_contract(powered):
    assert check_result(powered, scores_heads=True) == []
    info = powered.info
    assert info["analysis"] == "validation.powered" and info["seed"] == 1
    assert info["params"]["n_null"] == 6 and info["params"]["prompts_given"] is True
    assert tuple(powered.heads.columns[:3]) == HEAD_KEYS and len(powered.heads) == 2


def test_write_powered_writes_the_powered_outputs_as_before(powered, tmp_path):
    powered.labels_source, powered.labels_sha256 = "read from `h.csv`", "cd" * 32
    try:
        V.write_powered(powered, tmp_path / "p", seconds=1.5)
        with pytest.warns(DeprecationWarning, match="set them on the result"):
            V.write_powered(powered, tmp_path / "old", labels_source="read from `h.csv`", labels_sha256="cd" * 32)
        with pytest.raises(TypeError, match="labels_source now"):
            V.write_powered(powered, tmp_path / "bad", "read from `h.csv`")
    finally:
        powered.labels_source, powered.labels_sha256 = "given", None
    assert _matches(_written(tmp_path / "p"), V.POWERED_OUTPUTS)
    record = json.loads((tmp_path / "p" / "powered.json").read_text())
    # powered.json holds the run's info as before the contract: no analysis or params keys
    assert list(record)[-3:] == ["labels_source", "labels_sha256", "seconds"] and "params" not in record
    assert record["labels_sha256"] == "cd" * 32 and record["seconds"] == 1.5
    assert json.loads((tmp_path / "old" / "powered.json").read_text())["labels_source"] == "read from `h.csv`"


def test_validate_powered_is_run_powered_with_a_warning(monkeypatch):
    from analyses.validation import powered as P

    monkeypatch.setattr(P, "run_powered", lambda *a, **k: ("ran", a, k))
    with pytest.warns(DeprecationWarning, match="use analyses.validation.run_powered"):
        assert V.validate_powered("m", "l", n=5) == ("ran", ("m", "l"), {"n": 5})


def test_every_pair_metric_reads_a_pair_task():
    from analyses.validation.powered import _PAIR_METRICS

    assert set(_PAIR_METRICS.values()) <= set(V.PAIR_TASKS)  # was an import-time assert


# -- job: from a model's name, as interp validate runs it -------------------------------------------


def test_run_named_loads_picks_the_sizes_and_records_the_labels(planted, monkeypatch):
    import analyses.validation.runner as runner

    seen = {}
    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: seen.setdefault(name, planted))

    def prompts(m, n=8, seed=0):
        seen["n"] = n
        return V.planted_prompts(n=n, seed=seed)

    monkeypatch.setattr(runner, "build_prompts", prompts)
    table = LABELS.copy()
    table.attrs["sha256"] = "ef" * 32
    res = job.run_named("planted", table, labels_path="heads.csv", n_null=8, n_boot=20)
    assert "planted" in seen and seen["n"] == job.default_n(planted) == 8  # a causal LM: 8 prompts per family
    assert res.labels_source == "read from `heads.csv`" and res.labels_path == "heads.csv"
    assert res.labels_sha256 == "ef" * 32 and res.info["n_heads_total"] == 48
    res = job.run_named("planted", "patterns", n=4, n_null=8, n_boot=20)
    assert "from patterns" in res.labels_source and res.labels_path is None and res.labels_sha256 is None


def test_job_refuses_unknown_labels_and_an_encoder_for_the_powered_run(planted, minilm, monkeypatch):
    with pytest.raises(ValueError, match="'nonsense': give a table, 'patterns' or None"):
        job.labels_for(planted, "nonsense")
    assert job.default_n(minilm) == 32
    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: minilm)
    with pytest.raises(ValueError, match="--powered needs a causal LM .* minilm is not one"):
        job.run_powered_named("minilm", LABELS)


def test_the_command_opens_the_librarys_output_sets(tmp_path, planted, monkeypatch):
    """``interp validate`` opens its set with ``V.OUTPUTS`` (``--powered``: ``V.POWERED_OUTPUTS``),
    not a copy: the cli module holds no list of its own."""
    import analyses.cli.validate as cli
    from analyses.cli import main

    assert not hasattr(cli, "OWNS")
    opened = []
    monkeypatch.setattr(cli, "run_with_workers", lambda args, command, owns, *a: opened.append(owns))
    assert main(["validate", "--model", "planted", "--out", str(tmp_path / "v")]) == 0
    assert main(["validate", "--model", "planted", "--out", str(tmp_path / "p"), "--powered"]) == 0
    assert opened[0] is V.OUTPUTS and opened[1] is V.POWERED_OUTPUTS
