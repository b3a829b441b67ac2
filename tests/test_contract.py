"""One test walks every analysis package (``circuits.agreement`` too, an analysis with its own face),
like scikit-learn's ``check_estimator``: each package's ``run()`` on a tiny or planted model (the
positional study on a tiny training budget), ``write()`` into a folder, and the contract of ``analyses.contract``:

- ``check_result``: ``.info`` holds ``analysis``, ``model``, ``seed`` and ``params``; a package that
  scores heads gives ``.heads`` keyed ``model, layer, head``;
- ``info['model']`` is the model's identity (``model_identity``) and ``params`` is not empty;
- the files ``write()`` puts in a folder are ``OUTPUTS`` (every name written is owned; every owned
  name is written, apart from the ones a package lists below with the reason);
- ``write()`` inside an output set open on ``OUTPUTS`` writes into it (the command's way);
- the command's output set *is* the library's ``OUTPUTS`` object (the command opens it; no copy).

Each package's own tests check its numbers; this one checks only that all of them have one shape."""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import analyses.catalogue as catalogue
import analyses.circuits as circuits
import analyses.heads as heads
import analyses.invariance as invariance
import analyses.positional as positional
import analyses.qk as qk
import analyses.validation as validation
from analyses.contract import HEAD_KEYS, check_result, model_identity
from analyses.longctx import retrieval, sinks

pytestmark = pytest.mark.usefixtures("one_thread", "cheap_figures")


@dataclasses.dataclass
class Package:
    name: str
    module: Any  # run, write, OUTPUTS (or the names below)
    make: Callable[[Any], tuple[Any, Any]]  # (monkeypatch) -> (result, the model or its identity)
    scores_heads: bool
    argv: list[str]  # the command, up to --out (the test adds --out)
    outputs: str = "OUTPUTS"
    write: str = "write"
    # owned names a write may leave out, and why
    optional: dict[str, str] = dataclasses.field(default_factory=dict)


def _heads(mp):
    from tests.factories import planted_items, planted_model

    m = planted_model(values=True)
    return heads.run(m, planted_items(40, seed=2), n=20, n_boot=10, null_model=False, seed=4), m


def _invariance(mp):
    from analyses.invariance.common import tiny_model

    m = tiny_model("learned", attention="bidirectional", seed=0, n_ctx=64)
    return invariance.run(m, n_tokens=10, seed=3), m


def _validation(mp):
    from tests.analyses.validation.test_validation import _planted_labels

    m, _ = validation.planted_model(seed=0)
    return validation.run(m, _planted_labels(), prompts=validation.planted_prompts(n=12, seed=0), seed=5), m


def _powered(mp):
    from tests.analyses.validation.test_powered import _copy_prompts, _labels

    m = validation.planted_copies({(1, 0): 20.0, (1, 1): 20.0})
    kw = dict(prompts={"copy_logit_diff": _copy_prompts()}, metrics={"copy": "copy_logit_diff"}, n_boot=50)
    return validation.run_powered(m, _labels([(1, 0), (1, 1)]), ablation="zero", seed=6, **kw), m


def _circuits(mp):
    from tests.analyses.circuits.test_contract_face import make_tiny_lm

    m = make_tiny_lm()
    kw = dict(n=24, steps=2, n_random=2, batch_size=8, edges=False, exact_pairs=4, all_tasks=False)
    return circuits.run(m, "subject_verb", seed=3, min_accuracy=0, min_pairs=4, **kw), m


def _agreement(mp):
    from tests.analyses.circuits.test_contract_face import make_tiny_lm

    m = make_tiny_lm()
    kw = dict(n=16, n_boot=20, min_accuracy=0, min_pairs=4, batch_size=8)
    return circuits.agreement.run(m, ["subject_verb"], seed=3, **kw), m


def _catalogue(mp):
    from analyses.catalogue.planted import ROLE_TASKS as PLANTED_ROLES
    from analyses.catalogue.planted import planted_catalogue_inputs

    m, labels, pairs = planted_catalogue_inputs(n=12)
    return catalogue.run(m, labels, n=12, eap_pairs=4, ig_steps=2, seed=3, pairs=pairs, role_tasks=PLANTED_ROLES), m


def _qk(mp):
    import torch

    from analyses.qk.planted import INDUCTION, composition_model, composition_prompt
    from interp.pairs import Pairs

    m, p = composition_model(), composition_prompt()
    clean = p["tokens"].repeat(3, 1)
    corrupted = clean.clone()
    corrupted[:, p["induction"]] = (clean[:, p["induction"]] + 1) % m.cfg.d_vocab  # the target: the one difference
    n = torch.full((3,), p["query"])
    pairs = Pairs(clean, corrupted, right=clean[:, 0], wrong=clean[:, 1], position=n)
    return qk.run(m, "subject_verb", [INDUCTION], seed=3, pairs=pairs, top=3), m


def _sinks(mp):
    from tests.analyses.longctx.test_sinks import _sink_model

    m, tok = _sink_model()
    return sinks.run(m, (8, 16), (2, 2), seed=3, progress=False, tokenizer=tok), m


def _retrieval(mp):
    from tests.analyses.longctx.test_retrieval import run_planted_study

    res = run_planted_study()
    return res, res.info["model"]


def _positional(mp):
    from tests.analyses.cli.test_positional_cli import add_tiny_budget

    add_tiny_budget(mp)
    res = positional.run("tiny", work=Path(mp.tmp) / "work", kinds=["order"], schemes=["rope"], progress=False)
    return res, "positional-tiny"


PACKAGES = [
    Package(
        "heads", heads, _heads, True, ["probe"],
        optional={"report.html": "rendered from the written files by analyses.report.page in the same set"},
    ),
    Package("invariance", invariance, _invariance, True, ["invariance"]),
    Package("validation", validation, _validation, True, ["validate", "--labels", "patterns"]),
    Package(
        "validation.powered", validation, _powered, True, ["validate", "--powered", "--model", "smollm2",
        "--labels", "patterns"], outputs="POWERED_OUTPUTS", write="write_powered",
    ),
    Package(
        "circuits", circuits, _circuits, True, ["circuit", "--task", "ioi"],
        optional={"edges.csv": "written only when edges are scored (edges=False here)"},
    ),
    Package("circuits.agreement", circuits.agreement, _agreement, True, ["agreement", "--task", "ioi"]),
    Package("catalogue", catalogue, _catalogue, True, ["catalogue", "--labels", "{heads}"]),
    Package("qk", qk, _qk, True, ["qk", "--task", "ioi", "--heads", "L1H0"]),
    Package("longctx.sinks", sinks, _sinks, True, ["sinks"]),
    Package("longctx.retrieval", retrieval, _retrieval, True, ["retrieval"]),
    Package(
        "positional", positional, _positional, False, ["positional", "--budget", "quick"],
        optional={n: "a kind's own table or figure; this study runs only `order`" for n in positional.OUTPUTS
                  if n not in ("runs.csv", "claims.md", "cpu.md", "order.md", "order.png")},
    ),
]  # fmt: skip


@pytest.fixture(params=PACKAGES, ids=lambda p: p.name)
def case(request, monkeypatch, tmp_path):
    pkg: Package = request.param
    monkeypatch.tmp = tmp_path  # the positional study's work folder
    result, model = pkg.make(monkeypatch)
    return pkg, result, model


def _written(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if not p.name.startswith(".")}


def _owned(name: str, owned) -> bool:
    return any(fnmatch.fnmatchcase(name, o) for o in owned)


@pytest.mark.slow
def test_every_analysis_keeps_the_contract(case, tmp_path):
    from interp.io import output_dir

    pkg, result, model = case
    assert check_result(result, scores_heads=pkg.scores_heads) == []
    info = result.info
    assert info["model"] == model_identity(model)
    assert isinstance(info["params"], dict) and info["params"], f"{pkg.name}: info['params'] is empty"
    if pkg.scores_heads:
        assert tuple(result.heads.columns[:3]) == HEAD_KEYS
        assert set(result.heads["model"]) == {info["model"]}
    owned = getattr(pkg.module, pkg.outputs)
    write = getattr(pkg.module, pkg.write)
    folder = write(result, tmp_path / "alone")
    assert Path(folder) == tmp_path / "alone"
    names = _written(tmp_path / "alone")
    assert names and all(_owned(n, owned) for n in names), f"{pkg.name} wrote {names - set(owned)} not in OUTPUTS"
    missing = [o for o in owned if not any(c in o for c in "*?[") and o not in names and o not in pkg.optional]
    assert missing == [], f"{pkg.name}: OUTPUTS names {missing}, which write() did not write"
    for name in sorted(n for n in names if n.endswith(".csv")):  # an empty table still has its header row
        assert len(pd.read_csv(tmp_path / "alone" / name).columns), f"{pkg.name}: {name} has no columns"
    with output_dir(tmp_path / "in-a-set", owned, command=f"the {pkg.name} command") as staging:
        write(result, staging)
        assert _written(staging) == names
    assert _written(tmp_path / "in-a-set") == names


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_the_command_opens_the_librarys_own_outputs(pkg, tmp_path, monkeypatch):
    """The command's output set is the library's ``OUTPUTS`` object: the command is stopped when it
    opens its folder, before any model is loaded."""
    import interp.io
    from analyses.cli import main

    seen = []

    def opened(folder, owned, **kw):
        seen.append(owned)
        raise ValueError("stopped where the command opens its output set")

    monkeypatch.setattr(interp.io, "output_dir", opened)
    heads = tmp_path / "heads.csv"  # a command that reads a heads table checks it before its folder
    pd.DataFrame(dict(layer=[0], head=[0], role=["local"], label=[True])).to_csv(heads, index=False)
    argv = [str(heads) if a == "{heads}" else a for a in pkg.argv]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert seen and seen[0] is getattr(pkg.module, pkg.outputs), f"interp {pkg.argv[0]} opened {seen}"
