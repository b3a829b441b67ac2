"""The notebooks: committed executed (a reader on a code host sees every output), each one what
``notebooks/build.py`` builds from its source ``notebooks/NN_name.py``, and each runs top to bottom on
the real models.

Two checks, so that the cheap one runs on every edit and the expensive one once:
- ``test_committed_notebook_is_what_its_source_builds`` (fast, in process): the source's cells, built
  without executing, equal the committed notebook's cells (type, id, source), and the committed notebook
  is executed: every code cell has run, in order, with no error output.
- ``test_notebook_runs`` (slow): executes every cell of the source again. To make that cheaper the
  five notebooks share one kernel (started once: torch, transformers and the models' files are read
  once), each starting from an emptied namespace (``%reset -f``: a name a notebook forgot to define or
  import still fails) with torch's grad mode, thread count and default dtype, pandas' options and
  matplotlib's figures put back; ``models.load("minilm")`` and ``models.load("smollm2")`` load each
  model once for all five and hand every call a deep copy (``_SHARED_LOADS``); and with
  ``NOTEBOOKS_SMOKE=1``, which notebooks 02 and 04 read to probe and validate fewer sentences.
Outputs are not compared byte for byte across machines (numbers may differ in the last bits between
CPUs); ``build.clean`` strips what differs between two runs on one machine."""

import os

import nbformat
import pytest
import torch
from nbclient import NotebookClient

from notebooks import build

SOURCES = build.sources()
IDS = [p.stem for p in SOURCES]


def test_every_notebook_has_its_source():
    committed = sorted(p.stem for p in build.HERE.glob("*.ipynb"))
    assert "01_hooks_tour" in IDS, IDS
    assert committed == IDS, "each notebooks/NN_name.ipynb is built from notebooks/NN_name.py"


def _cells(nb) -> list[tuple[str, str, str]]:
    return [(c.cell_type, c.get("id", ""), c.source) for c in nb.cells]


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_committed_notebook_is_what_its_source_builds(source):
    """notebooks/NN_name.py is the source: rebuild (it executes the notebook) after editing it."""
    how = f"run python notebooks/build.py {source.stem[:2]}"
    committed = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    assert _cells(committed) == _cells(build.notebook(source)), f"the cells differ from the source's: {how}"
    code = [c for c in committed.cells if c.cell_type == "code"]
    counts = [c.get("execution_count") for c in code]
    assert counts == list(range(1, len(code) + 1)), f"{source.stem} is not committed executed: {how}"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{source.stem} was committed with an error output"
    assert any(c.get("outputs") for c in code), f"{source.stem} has no outputs"


def test_a_source_edit_shows_as_a_difference(tmp_path):
    """The comparison above can fail: a source whose one cell changed builds other cells."""
    source = SOURCES[0]
    edited = tmp_path / source.name
    edited.write_text(source.read_text(encoding="utf-8").replace("# %%\n", "# %%\nx = 1\n", 1), encoding="utf-8")
    committed = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    fresh = build.notebook(edited)
    assert [c.id for c in fresh.cells] == [c.id for c in committed.cells]
    assert _cells(fresh) != _cells(committed)


def _reset_cell() -> str:
    """What one notebook may leave behind for the next in the shared kernel, put back."""
    return (
        "%reset -f\n"
        "import warnings as _w, torch as _t, pandas as _pd, matplotlib.pyplot as _plt\n"
        f"_t.set_grad_enabled(True); _t.set_num_threads({torch.get_num_threads()}); _t.set_default_dtype(_t.float32)\n"
        "with _w.catch_warnings():\n"
        "    _w.simplefilter('ignore'); _pd.reset_option('all')\n"
        "_plt.close('all')\n"
        "del _w, _t, _pd, _plt\n"
    )


@pytest.fixture(scope="module")
def kernel():
    """One kernel for every notebook of this module (see the module docstring)."""
    nb = nbformat.v4.new_notebook(metadata=dict(build.KERNEL))
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", record_timing=False, resources={"metadata": {"path": str(build.ROOT)}}
    )
    env = {**os.environ, "NOTEBOOKS_SMOKE": "1", "PYTHONHASHSEED": "0"}
    with client.setup_kernel(env=env):
        client.nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(_SHARED_LOADS)])
        client.execute_cell(client.nb.cells[0], 0)
        yield client


# Four notebooks load MiniLM and SmolLM2 (a SmolLM2 load is most of a notebook's model time): in the
# shared kernel the first load of each is the real one, and every call gets a deep copy of it, so a
# notebook that edits its model (weights, hooks, train/eval) edits its own copy only.
_SHARED_LOADS = """
import copy as _copy, models as _models
def _shared_load(name, *args, _load=_models.load, _copy=_copy.deepcopy, _seen={}, **kwargs):
    if name not in ("minilm", "smollm2") or args or kwargs:
        return _load(name, *args, **kwargs)
    if name not in _seen:
        _seen[name] = _load(name)
    return _copy(_seen[name])
_models.load = _shared_load
del _copy, _models, _shared_load
"""


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_notebook_runs(source, kernel):
    nb = build.notebook(source)  # the committed notebook's cells (checked above), without its outputs
    nb.cells.insert(0, nbformat.v4.new_code_cell(_reset_cell()))
    kernel.nb = nb
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            kernel.execute_cell(cell, index)  # raises CellExecutionError, naming the cell, on any failure
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
