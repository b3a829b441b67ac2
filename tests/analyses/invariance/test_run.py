"""The invariance façade: run (the contract: info, heads, OUTPUTS, write), the report section, the
files, the CLI, the deprecated names, and the guard."""

import pandas as pd
import pytest
import torch

import models
from analyses import invariance
from analyses.contract import HEAD_KEYS, check_result
from analyses.invariance.common import ROW_COLUMNS, tiny_model


@pytest.fixture(scope="module")
def tiny_result():
    m = tiny_model("learned", attention="bidirectional", seed=0, n_ctx=64)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    result = invariance.run(m, n_tokens=10, seed=3)
    return m, before, result


def test_run_agrees_with_theory_and_never_edits_the_model(tiny_result):
    m, before, result = tiny_result
    t = result.table
    assert list(t.columns) == ROW_COLUMNS
    assert t.passed.all(), t[~t.passed][["check", "quantity", "value", "tolerance"]]
    assert {"holds", "breaks"} == set(t.expected)
    for name in (
        "permutation: one attention layer",
        "permutation: whole model",
        "rotation: whole model",
        "relative position: shift all positions",
        "sqrt(d) scale",
        "rotation: what can be interpreted",
    ):
        assert name in set(t.check), name
    for k, v in m.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_a_model_that_ignores_its_input_cannot_pass():
    m = tiny_model("none", attention="bidirectional", seed=0)
    with torch.no_grad():
        m.W_E.zero_()  # every token embeds to 0: the output is the same for every input
    from analyses.invariance import permutation as perm

    df = perm.model_permutation(m)
    holds = df[df.expected == "holds"]
    assert len(holds) and not holds.passed.any()  # value 0, but the guard baseline is 0 as well
    from analyses.invariance import rotation as rot

    rows = rot.model_rotation_checks(m, fp64=False)
    assert not rows[rows.expected == "holds"].passed.any()


def test_invariance_section_and_errors(tiny_result):
    _, _, result = tiny_result
    md = invariance.invariance_section(result.table)
    assert md.startswith("## Invariances")
    assert f"{len(result.table)} of {len(result.table)} measurements agree" in md
    for check in result.table.check.unique():
        assert f"### {check}" in md
    with pytest.raises(ValueError, match="empty"):
        invariance.invariance_section(result.table.iloc[:0])
    with pytest.raises(ValueError, match="lacks columns"):
        invariance.invariance_section(result.table.drop(columns=["tolerance"]))


def test_result_keeps_the_contract(tiny_result):
    m, _, result = tiny_result
    assert check_result(result, scores_heads=True) == []
    assert result.info["analysis"] == "invariance" and result.info["seed"] == 3
    assert result.info["params"] == {"text": None, "n_tokens": 10}
    heads = result.heads
    assert tuple(heads.columns[:3]) == HEAD_KEYS
    with_pos = heads[~heads.positions_removed]
    assert len(with_pos) == m.cfg.n_layers * m.cfg.n_heads
    assert (heads["model"] == result.info["model"]).all()


def test_write_writes_exactly_the_outputs_as_one_set(tiny_result, tmp_path):
    import fnmatch

    _, _, result = tiny_result
    out = tmp_path / "out"
    assert invariance.write(result, out) == out
    names = [p.name for p in out.iterdir() if not p.name.startswith(".")]  # the set's manifest is hidden
    assert all(any(fnmatch.fnmatchcase(n, o) for o in invariance.OUTPUTS) for n in names), names
    assert all(any(fnmatch.fnmatchcase(n, o) for n in names) for o in invariance.OUTPUTS), names
    paths = {n: out / n for n in names}
    csv = pd.read_csv(paths["invariance.csv"])
    assert len(csv) == len(result.table)
    assert {"model", "check", "quantity", "value", "tolerance", "expected", "passed"} <= set(csv.columns)
    html = paths["invariance.html"].read_text()
    assert "data:image/png;base64," in html and "<img src='heads" not in html  # self-contained
    assert "heads_positional.png" in paths["invariance.md"].read_text()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]
    # the old names still work, with a warning
    with pytest.warns(DeprecationWarning, match="use analyses.invariance.write"):
        old = invariance.write_report(result, tmp_path / "old", figures_too=False)
    assert old["invariance.csv"].read_bytes() == paths["invariance.csv"].read_bytes()
    assert "heads_positional.png" not in old


def test_run_all_is_run_with_a_warning(monkeypatch):
    import analyses.invariance.runner as runner

    monkeypatch.setattr(runner, "run", lambda *a, **k: ("ran", a, k))
    with pytest.warns(DeprecationWarning, match="use analyses.invariance.run"):
        assert invariance.run_all("m", n_tokens=5) == ("ran", ("m",), {"n_tokens": 5})


def test_cli_on_a_checkpoint(tmp_path, capsys, monkeypatch):
    from analyses.cli import main

    m = tiny_model("rope", attention="causal", seed=1, n_ctx=64, n_kv_heads=2)
    models.save_checkpoint(m, tmp_path / "ckpt")
    before = torch.get_num_threads()
    threads = "2" if before == 1 else "1"  # another count than the caller's: it must be put back
    args = ["--n-tokens", "8", "--no-figures", "--threads", threads]
    import interp.io

    opened, output_dir = [], interp.io.output_dir

    def spy(path, owned, **kw):  # the command's output set is the library's OUTPUTS, not a copy
        opened.append(owned)
        return output_dir(path, owned, **kw)

    monkeypatch.setattr(interp.io, "output_dir", spy)
    rc = main(["invariance", "--model", str(tmp_path / "ckpt"), "--out", str(tmp_path / "rep"), *args])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert torch.get_num_threads() == before
    df = pd.read_csv(tmp_path / "rep" / "invariance.csv")
    assert df.passed.all()
    assert df.quantity.str.contains("kv group").any()  # GQA checks ran
    assert "agree with theory" in out
    assert opened[0] is invariance.OUTPUTS


@pytest.mark.parametrize(
    "flags, named", [(["--n-tokens", "3"], "--n-tokens must be at least 4"), (["--threads", "0"], "--threads")]
)
def test_cli_refuses_bad_numbers_in_one_line_before_loading(tmp_path, capsys, monkeypatch, flags, named):
    from analyses.cli import main

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded before the flags were checked")

    monkeypatch.setattr(models, "load", no_loading)
    rc = main(["invariance", "--model", "minilm", "--out", str(tmp_path / "rep"), *flags])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith(f"interp invariance: {named}") and "\n" not in err
    assert not (tmp_path / "rep").exists()
