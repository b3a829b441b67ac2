"""What every make_0N.py calls to write its notebook: stable cell ids (so regenerating a notebook
that did not change changes no byte) and one kernelspec. ``NOTEBOOKS_OUT`` redirects the output
folder (the test that checks the committed notebooks against their scripts uses it)."""

import os
from pathlib import Path

import nbformat

KERNEL = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}


def write(cells: list, name: str) -> Path:
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i:02d}"
    nb = nbformat.v4.new_notebook(cells=cells, metadata=KERNEL)
    out = Path(os.environ.get("NOTEBOOKS_OUT") or Path(__file__).parent) / name
    nbformat.write(nb, out)
    print(f"wrote {out}")
    return out
