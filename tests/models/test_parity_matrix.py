"""The parity matrix (``models.parity``, ``interp parity``): every architecture of ``models/tiny.py``
against the installed Hugging Face, compared with the committed docs/parity.md as ``interp parity
--check`` compares it, and README's table made from that file.

The matrix runs once for the module (every tiny architecture, every check, each model saved once
and shared); the planted bugs rerun only the checks they hit:

* an off-by-one in the positions ours derive from a padded row's mask (the bug class of
  TransformerLens #1609 and nnsight #672) fails every architecture's ``eager`` cell, and the
  ``padding`` cell of every architecture with learned positions;
* a RoPE angle off by one position from position 5 on fails ``eager`` and ``fused`` on every RoPE
  architecture and leaves the others bitwise.

Each failing cell names the architecture, the check and the numbers.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import models
import models.transformer
from analyses.cli import main
from models import parity
from models.tiny import ARCHITECTURES, available, save_tiny

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "parity.md"
README = ROOT / "README.md"
KEYS = [k for k in ARCHITECTURES if available(k) is None]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Every architecture the installed transformers has, saved once for every test here."""
    root = tmp_path_factory.mktemp("parity")
    with parity._quiet():
        return {key: save_tiny(key, root / key)[0] for key in KEYS}


@pytest.fixture(scope="module")
def matrix(folders):
    return parity.run(folders=folders)


@pytest.fixture(scope="module")
def committed():
    return DOCS.read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------------
# The matrix and the committed document


def test_every_tiny_architecture_agrees_with_the_committed_matrix(matrix, committed):
    """What CI runs: ``interp parity --check`` on every tiny architecture. A failed cell, or one that
    drifted from docs/parity.md, fails here naming the architecture, the check and both numbers."""
    failures = matrix.failures()
    drifted, _ = parity.drift(matrix, committed)
    assert not failures + drifted, "\n".join(failures + drifted)


def test_every_architecture_is_a_row_and_every_check_a_column(matrix):
    assert matrix.rows == list(ARCHITECTURES)
    assert list(matrix.values.columns) == list(parity.CHECKS) == list(matrix.status.columns)
    for key in ARCHITECTURES:
        why = available(key)
        for check in parity.CHECKS:
            cell = matrix.cells[(key, check)]
            assert matrix.status.loc[key, check] == cell.status
            if why is not None:  # a family the installed transformers lacks: skipped, never a failure
                assert cell.status == f"skipped ({why})" and cell.value is None
            elif check == "generate" and ARCHITECTURES[key].encoder:
                assert cell.status == "n/a"
            elif cell.value is not None:
                assert matrix.values.loc[key, check] == cell.value
                if cell.status == "bitwise":
                    assert cell.value == 0.0
                elif cell.status == "within tol":
                    assert 0.0 < cell.value <= cell.bound == parity.bound(key, check)


def test_no_hf_reference_is_read_off_the_error_hugging_face_raises(matrix, folders):
    """Gemma 2 has no SDPA attention in transformers: the fused cells say so, from HF's ValueError."""
    for key in KEYS:
        hf = parity._hf_from_folder(key, folders[key], torch.float32)
        try:
            hf.set_attn_implementation("sdpa")
            has_sdpa = True
        except ValueError:
            has_sdpa = False
        for check in ("fused", "bf16_fused"):
            cell = matrix.cells[(key, check)]
            assert (cell.status == "no HF reference") == (not has_sdpa), (key, check, cell)
            if not has_sdpa:
                assert "scaled_dot_product_attention" in cell.where


def test_readme_table_is_the_committed_matrix(committed):
    readme = README.read_text(encoding="utf-8")
    table = parity.between_markers(readme, parity.README_START, parity.README_END)
    assert table == parity.readme_table(committed).strip(), "README's table is stale: run interp parity --write-docs"


def test_the_document_reads_back_what_it_was_written_from(matrix):
    text = parity.render_markdown(matrix)
    cells, model_types = parity.parse_markdown(text)
    assert set(cells) == set(matrix.cells) and model_types == matrix.model_types
    for key, cell in matrix.cells.items():
        assert cells[key].status == cell.status and cells[key].text() == cell.text()
    assert parity.drift(matrix, text) == ([], [])
    assert f"transformers {matrix.info['transformers']} and torch {matrix.info['torch']}" in " ".join(text.split())
    for check in parity.CHECKS:  # what each check means
        assert f"- `{check}`: " in text


# --------------------------------------------------------------------------------------------------
# Drift: --check


def _with_cell(text: str, row: str, check: str, new: parity.Cell) -> str:
    """docs/parity.md's ``text`` with one cell replaced."""
    old = parity.parse_markdown(text)[0][(row, check)]
    lines = text.splitlines(keepends=True)
    (i,) = [i for i, line in enumerate(lines) if line.startswith(f"| {row} |")]
    parts = lines[i].split(" | ")
    header = [h.strip() for h in next(line for line in lines if line.startswith("| architecture |")).split("|")[1:-1]]
    j = header.index(check)
    assert parts[j].strip() == old.text()
    parts[j] = new.text()
    lines[i] = " | ".join(parts)
    return "".join(lines)


def test_a_drifted_committed_number_fails_with_both_numbers(matrix, committed):
    measured = matrix.cells[("llama", "padding")]
    drifted = _with_cell(committed, "llama", "padding", parity.Cell(measured.value * 100, measured.bound, "within tol"))
    failures, _ = parity.drift(matrix, drifted)
    (line,) = failures
    assert line.startswith("llama padding: ")
    assert parity._num(measured.value) in line and parity._num(measured.value * 100) in line
    # a bitwise cell that the document says is not
    drifted = _with_cell(committed, "gpt2", "eager", parity.Cell(3e-7, 1e-6, "within tol"))
    (line,) = parity.drift(matrix, drifted)[0]
    assert line.startswith("gpt2 eager: measured **0**, docs/parity.md has 3e-07 (≤ 1e-06)")
    # rounding noise within a factor of 10 is not drift
    noisy = _with_cell(committed, "llama", "padding", parity.Cell(measured.value * 3, measured.bound, "within tol"))
    assert parity.drift(matrix, noisy) == ([], [])


def test_a_row_the_document_lacks_or_no_longer_has_fails(matrix, committed):
    lines = [line for line in committed.splitlines(keepends=True) if not line.startswith("| qwen2 |")]
    failures, _ = parity.drift(matrix, "".join(lines))
    assert failures == ["qwen2: not in docs/parity.md (run interp parity --real --write-docs)"]
    gone = committed.replace("| qwen2 | qwen2 |", "| qwen9 | qwen9 |")
    failures, _ = parity.drift(matrix, gone)
    assert "qwen9: in docs/parity.md but not in models/tiny.py (run interp parity --write-docs)" in failures


def test_interp_parity_check_exits_1_naming_the_drifted_cell(tmp_path, committed, capsys):
    cell = parity.parse_markdown(committed)[0][("llama", "padding")]
    docs = tmp_path / "parity.md"
    docs.write_text(_with_cell(committed, "llama", "padding", parity.Cell(0.5, cell.bound, "FAIL")))
    assert main(["parity", "--only", "llama", "--check", "--docs", str(docs)]) == 1
    out, err = capsys.readouterr()
    assert "| llama | llama |" in out
    (line,) = err.strip().splitlines()
    assert re.fullmatch(r"interp parity: llama padding: measured \S+ \(≤ 1e-05\), docs/parity.md has FAIL 0.5 .*", line)
    docs.write_text(committed)
    assert main(["parity", "--only", "llama", "--check", "--docs", str(docs)]) == 0
    assert "every cell agrees with" in capsys.readouterr().out


def test_an_architecture_the_installed_transformers_lacks_is_skipped_not_failed(monkeypatch, matrix, committed):
    monkeypatch.setattr(parity, "available", lambda key: "needs transformers >= 99.0 (installed lacks X)")
    cells = parity.measure("llama")
    assert {c.status for c in cells.values()} == {"skipped (needs transformers >= 99.0 (installed lacks X))"}
    result = parity.run(only=["llama"])
    assert result.failures() == []
    failures, notes = parity.drift(result, committed, complete=False)
    assert failures == [] and len(notes) == len(parity.CHECKS) and notes[0].startswith("llama eager: not measured here")
    assert "needs a newer transformers" in parity._readme_word(cells["eager"])


def test_the_command_refuses_write_docs_with_only_in_one_line(capsys):
    assert main(["parity", "--only", "llama", "--write-docs"]) == 2
    assert capsys.readouterr().err == "interp parity: --write-docs writes every architecture's row: drop --only\n"
    assert main(["parity", "--only", "nope"]) == 2
    assert "unknown architecture 'nope'; models/tiny.py has bert, " in capsys.readouterr().err


def test_write_docs_writes_the_document_and_readme_table(tmp_path, monkeypatch, matrix, capsys):
    monkeypatch.setattr(parity, "run", lambda **kwargs: matrix)  # the module's run, not a second one
    docs, readme = tmp_path / "parity.md", tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n\n{parity.README_START}\nold\n{parity.README_END}\n\nafter\n")
    assert main(["parity", "--write-docs", "--docs", str(docs), "--readme", str(readme)]) == 0
    text = docs.read_text()
    assert text == parity.render_markdown(matrix)
    assert readme.read_text() == (
        f"# x\n\nbefore\n\n{parity.README_START}\n{parity.readme_table(text).strip()}\n{parity.README_END}\n\nafter\n"
    )
    readme.write_text("no markers\n")
    assert main(["parity", "--write-docs", "--docs", str(docs), "--readme", str(readme)]) == 2
    assert "needs one <!-- parity-table:start --> line" in capsys.readouterr().err


def test_out_writes_the_csv_and_the_document_as_a_set(tmp_path, monkeypatch, matrix):
    monkeypatch.setattr(parity, "run", lambda **kwargs: matrix)
    assert main(["parity", "--out", str(tmp_path / "p")]) == 0
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [".interp-manifest.json", "parity.csv", "parity.md"]
    import pandas as pd

    table = pd.read_csv(tmp_path / "p" / "parity.csv", index_col="architecture")
    assert list(table.index) == matrix.rows
    assert (table["eager_status"] == matrix.status["eager"]).all()
    assert table["padding"].tolist() == matrix.values["padding"].tolist()


def test_every_tiny_tol_names_a_check():
    """A bound under a name no check reads would be silently ignored."""
    names = set(parity.CHECKS) | {"bf16"}
    for key, tiny in ARCHITECTURES.items():
        assert set(tiny.tol) <= names, f"{key}: Tiny.tol names {sorted(set(tiny.tol) - names)}; the checks: {names}"


def test_a_check_that_raises_is_a_failed_cell_naming_the_error(monkeypatch, folders):
    def broken(*args):
        raise RuntimeError("the installed transformers changed generate. Details follow")

    monkeypatch.setattr(parity, "_generate_cell", broken)
    cells = parity.measure("llama", folders["llama"], checks=("eager", "generate"))
    assert cells["eager"].status == "bitwise"
    assert (
        cells["generate"].failed
        and cells["generate"].where == "RuntimeError: the installed transformers changed generate."
    )
    assert cells["generate"].text() == "FAIL nan (> 0)"


# --------------------------------------------------------------------------------------------------
# Planted bugs


def _positions_off_by_one(monkeypatch) -> None:
    """A padded row's positions counted one too far (its mask read as if one more real token came
    first); rows without padding keep theirs."""
    setup = models.transformer.Transformer._attention_setup

    def off_by_one(self, batch, n, past, key_mask, device):
        positions, masks, rope = setup(self, batch, n, past, key_mask, device)
        if key_mask is None:
            return positions, masks, rope
        padded = (key_mask == 0).any(-1, keepdim=True).to(key_mask.dtype)
        positions, _, rope = setup(self, batch, n, past + 1, torch.cat([padded, key_mask], -1), device)
        return positions, masks, rope

    monkeypatch.setattr(models.transformer.Transformer, "_attention_setup", off_by_one)


def test_an_off_by_one_in_padded_positions_fails_the_padded_cells(monkeypatch, folders):
    _positions_off_by_one(monkeypatch)
    result = parity.run(checks=("eager", "padding"), folders=folders)
    failures = "\n".join(result.failures())
    positional = {key: models.load(str(folders[key])).cfg.positional for key in KEYS}
    for key in KEYS:
        cell = result.cells[(key, "eager")]
        if positional[key] not in ("learned", "rope", "sinusoidal"):  # ALiBi, none: positions unused
            assert cell.status == "bitwise", (key, cell)
            continue
        assert cell.failed and cell.value > 0 and ("left" in cell.where or "right" in cell.where), (key, cell)
        limit = parity._num(parity.bound(key, "eager"))
        assert f"{key} eager: max |diff| {parity._num(cell.value)} > bound {limit} (" in failures
        # learned positions move by a whole embedding; RoPE angles all shift alike, rounding only
        learned = positional[key] == "learned"
        assert result.cells[(key, "padding")].failed == learned, (key, result.cells[(key, "padding")])
    assert "learned" in positional.values() and "rope" in positional.values()


def test_a_rope_off_by_one_fails_every_rope_architecture_and_no_other(monkeypatch, folders):
    rope_cos_sin = models.transformer.rope_cos_sin
    monkeypatch.setattr(
        models.transformer,
        "rope_cos_sin",
        lambda cfg, positions, inv_freq: rope_cos_sin(cfg, positions + (positions >= 5), inv_freq),
    )
    result = parity.run(checks=("eager", "fused"), folders=folders)
    rope = {k for k in KEYS if models.load(str(folders[k])).cfg.positional == "rope"}
    assert rope and rope != set(KEYS)
    failures = result.failures()
    for key in KEYS:
        eager, fused = result.cells[(key, "eager")], result.cells[(key, "fused")]
        if key in rope:
            assert eager.failed and eager.value > 1e-3, (key, eager)
            assert fused.failed or fused.status == "no HF reference", (key, fused)
            limit = parity._num(parity.bound(key, "eager"))
            line = f"{key} eager: max |diff| {parity._num(eager.value)} > bound {limit}"
            assert any(f.startswith(line) for f in failures)
        else:
            assert eager.status == fused.status == "bitwise", (key, eager, fused)


# --------------------------------------------------------------------------------------------------
# A real model


def test_minilm_real_row_agrees_with_the_committed_matrix(committed):
    cells = parity.measure_real("minilm")
    if cells["eager"].status.startswith("skipped"):
        pytest.skip(cells["eager"].status)
    then, _ = parity.parse_markdown(committed)
    for check, cell in cells.items():
        assert cell.text() == then[("minilm (real)", check)].text() == "**0**", (check, cell)
