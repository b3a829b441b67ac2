"""The notebooks: committed executed (a reader on a code host sees every output), each one what its
notebooks/make_0N.py writes, and each runs top to bottom on the real models.

Two checks, so that the cheap one runs on every edit and the expensive one once:
- ``test_committed_notebook_is_what_its_script_writes`` (fast): the script's cells, written without
  executing (``NOTEBOOKS_EXECUTE=0``), equal the committed notebook's cells (type, id, source), and
  the committed notebook is executed: every code cell has run, in order, with no error output.
- ``test_notebook_runs`` (slow): executes the committed notebook again with nbclient; any error fails.
Outputs are not compared byte for byte across machines (numbers may differ in the last bits between
CPUs); ``notebooks/nbwrite.py`` strips what differs between two runs on one machine (timings, widget
ids, progress bars, addresses), so regenerating an unchanged notebook leaves a small diff or none."""

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_notebooks_exist():
    names = [p.name for p in NOTEBOOKS]
    assert "01_hooks_tour.ipynb" in names, names


def _cells(nb) -> list[tuple[str, str, str]]:
    return [(c.cell_type, c.get("id", ""), c.source) for c in nb.cells]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_is_what_its_script_writes(path, tmp_path):
    """notebooks/make_0N.py is the source: rerun it (it executes the notebook) after editing it."""
    script = ROOT / "notebooks" / f"make_{path.name[:2]}.py"
    env = {**os.environ, "NOTEBOOKS_OUT": str(tmp_path), "NOTEBOOKS_EXECUTE": "0"}
    subprocess.run([sys.executable, str(script)], check=True, env=env, capture_output=True, timeout=60)
    fresh = nbformat.read(tmp_path / path.name, as_version=4)
    committed = nbformat.read(path, as_version=4)
    assert _cells(committed) == _cells(fresh), (
        f"the cells differ from the script's: run python {script.relative_to(ROOT)}"
    )
    code = [c for c in committed.cells if c.cell_type == "code"]
    counts = [c.get("execution_count") for c in code]
    assert counts == list(range(1, len(code) + 1)), (
        f"{path.name} is not committed executed: run python {script.relative_to(ROOT)}"
    )
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name} was committed with an error output"
    assert any(c.get("outputs") for c in code), f"{path.name} has no outputs"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:  # run from the sources, not from what the committed outputs say
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any failure
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
