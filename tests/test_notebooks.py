"""Every notebook runs top to bottom on real models (executed with nbclient, outputs discarded)."""

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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_is_what_its_script_writes(path, tmp_path):
    """notebooks/make_0N.py is the source; the committed .ipynb must be its output, byte for byte
    (rerun the script after editing it)."""
    script = ROOT / "notebooks" / f"make_{path.name[:2]}.py"
    env = {**os.environ, "NOTEBOOKS_OUT": str(tmp_path)}
    subprocess.run([sys.executable, str(script)], check=True, env=env, capture_output=True, timeout=60)
    assert (tmp_path / path.name).read_bytes() == path.read_bytes(), f"run python {script.relative_to(ROOT)}"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any failure
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
