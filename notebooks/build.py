"""Builds the committed notebooks from their sources: ``notebooks/NN_name.py`` (jupytext py:percent:
``# %%`` code cells, ``# %% [markdown]`` prose cells; ruff reads them like any other module) becomes
``notebooks/NN_name.ipynb``, executed, so that a reader on a code host sees every figure and table
without running anything.

    python notebooks/build.py             # all five (about three minutes on 2 cores)
    python notebooks/build.py 02 05       # by number, by name (02_head_roles) or by path
    python notebooks/build.py --no-execute --out /tmp/nb 03   # the cells only, elsewhere

Each cell gets the stable id ``cell-NN`` (its index), the notebook one kernelspec, and the notebook
runs top to bottom with nbclient (working folder: the repository root, as the test suite runs it).
What changes from run to run is stripped: no timing metadata, no kernel or language versions, no
widget state or widget outputs (tqdm progress bars), no stderr streams (progress and loading noise),
memory addresses and temporary paths masked. PNGs from matplotlib are deterministic for the same
inputs; the notebooks seed everything they sample. So rebuilding an unchanged notebook leaves a small
diff or none.

``tests/test_notebooks.py`` compares ``notebook(source)`` (not executed: cheap) with the committed
notebook's cells and executes each source once."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import nbformat

KERNEL = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WIDGET = "application/vnd.jupyter.widget-view+json"
_NOISE = [
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0x..."),  # object reprs
    (re.compile(r"/tmp/tmp[\w.-]+"), "/tmp/..."),  # tempfile.mkdtemp folders
]


def sources() -> list[Path]:
    """Every notebook source, in order: ``NN_name.py`` beside this file."""
    return sorted(HERE.glob("[0-9][0-9]_*.py"))


def find(name: str) -> Path:
    """A source by number (``02``), stem (``02_head_roles``), file name or path."""
    path = Path(name)
    if path.suffix in (".py", ".ipynb") and path.with_suffix(".py").exists():
        return path.with_suffix(".py").resolve()
    matches = [p for p in sources() if p.stem == path.stem or p.stem.split("_")[0] == path.stem]
    if len(matches) != 1:
        known = ", ".join(p.stem for p in sources())
        raise ValueError(f"no notebook source {name!r}: expected a number, a name or a path among {known}")
    return matches[0]


def notebook(source: Path) -> nbformat.NotebookNode:
    """The notebook a source describes, not executed: its cells with stable ids, one kernelspec."""
    import jupytext

    nb = jupytext.read(source, fmt="py:percent")
    cells = []
    for i, cell in enumerate(nb.cells):
        new = nbformat.v4.new_markdown_cell if cell.cell_type == "markdown" else nbformat.v4.new_code_cell
        cells.append(new(cell.source, id=f"cell-{i:02d}"))  # no jupytext cell metadata
    return nbformat.v4.new_notebook(cells=cells, metadata=dict(KERNEL))


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
                if kept and kept[-1].get("output_type") == "stream":  # how the kernel split a print is timing
                    kept[-1]["text"] += out["text"]
                    continue
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
    """Run every cell in a fresh kernel (raises nbclient's CellExecutionError, naming the cell, on a
    failure)."""
    from nbclient import NotebookClient

    os.environ["PYTHONHASHSEED"] = "0"  # the kernel inherits it: set and dict orders, hence float sums, repeat
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", record_timing=False, resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    return nb


def build(source: Path, out_dir: Path | None = None, run: bool = True) -> Path:
    """Write ``source``'s notebook (executed unless ``run`` is false) into ``out_dir`` (default: beside
    the source)."""
    from interp.io import atomic_write  # a reader (or the test) never sees half a notebook

    nb = notebook(source)
    if run:
        nb = clean(execute(nb))
    return atomic_write(Path(out_dir or source.parent) / f"{source.stem}.ipynb", nbformat.writes(nb))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python notebooks/build.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="notebooks to build (default: all): 01, 02_head_roles, a path")
    parser.add_argument("--out", type=Path, help="write the notebooks here instead of beside their sources")
    parser.add_argument("--no-execute", action="store_true", help="write the cells without running them")
    args = parser.parse_args(argv)
    try:
        chosen = [find(n) for n in args.names] or sources()
    except ValueError as err:
        print(f"build.py: {err}", file=sys.stderr)
        return 2
    for source in chosen:
        start = time.perf_counter()
        path = build(source, args.out, run=not args.no_execute)
        print(f"wrote {path} ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # `python notebooks/build.py` from anywhere imports the toolkit from here
    raise SystemExit(main())
