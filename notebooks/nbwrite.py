"""What every make_0N.py calls to write its notebook, executed, so that a reader on a code host sees
the outputs without running anything.

``write(cells, name)`` gives the cells stable ids and one kernelspec, executes the notebook top to
bottom with nbclient (working folder: the repository root, as the test suite runs it), strips what
changes from run to run, and writes it. One script per notebook, so ``python notebooks/make_02.py``
is the whole recipe; ``for f in notebooks/make_0*.py; do .venv/bin/python $f; done`` rewrites all.

Stable outputs: no timing metadata, no kernel or language versions, no widget state or widget
outputs (tqdm progress bars), no stderr streams (progress and loading noise), memory addresses and
temporary paths masked. PNGs from matplotlib are deterministic for the same inputs; the notebooks
seed everything they sample.

``NOTEBOOKS_OUT`` redirects the output folder; ``NOTEBOOKS_EXECUTE=0`` writes the cells without
executing them (``tests/test_notebooks.py`` compares those with the committed notebook's cells, which
is cheap; executing every notebook is the suite's slow test)."""

import os
import re
from pathlib import Path

import nbformat

KERNEL = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
ROOT = Path(__file__).resolve().parents[1]
WIDGET = "application/vnd.jupyter.widget-view+json"
_NOISE = [
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0x..."),  # object reprs
    (re.compile(r"/tmp/tmp[\w.-]+"), "/tmp/..."),  # tempfile.mkdtemp folders
]


def _mask(text: str) -> str:
    for pattern, repl in _NOISE:
        text = pattern.sub(repl, text)
    return text


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop what differs between two runs of the same notebook (see the module docstring)."""
    nb.metadata = nbformat.from_dict({**KERNEL})
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                if out.get("name") == "stderr":
                    continue
                out["text"] = _mask(out["text"])
            elif "data" in out:
                if WIDGET in out["data"]:
                    continue
                for mime in ("text/plain", "text/html"):
                    if mime in out["data"]:
                        out["data"][mime] = _mask(out["data"][mime])
                out.get("metadata", {}).pop("execution", None)
            kept.append(out)
        cell.outputs = kept
    return nb


def execute(nb: nbformat.NotebookNode, timeout: int = 900) -> nbformat.NotebookNode:
    """Run every cell (raises nbclient's CellExecutionError, naming the cell, on a failure)."""
    from nbclient import NotebookClient

    os.environ["PYTHONHASHSEED"] = "0"  # the kernel inherits it: set and dict orders, hence float sums, repeat

    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", record_timing=False, resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    return nb


def write(cells: list, name: str) -> Path:
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i:02d}"
    nb = nbformat.v4.new_notebook(cells=cells, metadata=dict(KERNEL))
    if os.environ.get("NOTEBOOKS_EXECUTE", "1") != "0":
        nb = clean(execute(nb))
    from interp.io import atomic_write  # a reader (or the test) never sees half a notebook

    out = atomic_write(Path(os.environ.get("NOTEBOOKS_OUT") or Path(__file__).parent) / name, nbformat.writes(nb))
    print(f"wrote {out}")
    return out
