"""The notebooks: committed executed (a reader on a code host sees every output), each one what
``notebooks/build.py`` builds from its source ``notebooks/NN_name.py``, and each runs top to bottom on
the real models.

Two checks, so that the cheap one runs on every edit and the expensive one once:
- ``test_committed_notebook_is_what_its_source_builds`` (fast, in process): the source's cells, built
  without executing, equal the committed notebook's cells (type, id, source), and the committed notebook
  is executed: every code cell has run, in order, with no error output.
- ``test_notebook_runs`` (slow): executes every cell of the source again, on the same data as the
  build, and compares the fresh text outputs with the committed ones cell by cell
  (``output_differences``): a library change that moves a count, a label or a number the committed
  notebook shows fails here, naming the notebook, the cell and the number, until the notebook is
  rebuilt. To make the run cheaper the five notebooks share one kernel (started once: torch,
  transformers and the models' files are read once), each starting from an emptied namespace
  (``%reset -f``: a name a notebook forgot to define or import still fails) with torch's grad mode,
  thread count and default dtype, pandas' options and matplotlib's figures put back; and
  ``models.load("minilm")`` and ``models.load("smollm2")`` load each model once for all five and hand
  every call a deep copy (``_SHARED_LOADS``).
Outputs are not compared byte for byte (numbers may differ in the last bits between CPUs and thread
counts): ``build.clean`` strips what differs between two runs on one machine, and the comparison
reads numbers at their printed precision (see ``REL_TOL``)."""

import itertools
import os
import re

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


# The comparison of a fresh run's text outputs (stdout, text/plain, text/markdown; figures and HTML
# are not compared) with the committed ones: the text around the numbers exactly, with runs of
# whitespace collapsed (a wider number shifts a table's columns); a number written without a decimal
# point or exponent (a count, an index, a shape, a layer) exactly; any other number within REL_TOL of
# the committed value or one unit of its last printed digit, whichever is larger; two numbers both
# under ROUNDOFF in magnitude are equal (measured fp32/fp64 round-off and p-values like 1e-41 differ
# between CPUs and thread counts); a number followed by "s", "ms" or "seconds" is a timing and is not
# compared. Object ids (0x...) and temporary folders are masked by build.clean on both sides.
REL_TOL = 1e-3
ROUNDOFF = 1e-5
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?!\w)")
_TIMING = re.compile(r" ?(?:s|ms|seconds)\b")


def _texts(cell) -> list[str]:
    texts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            texts.append(out["text"])
        elif "data" in out:
            texts += [out["data"][mime] for mime in ("text/plain", "text/markdown") if mime in out["data"]]
    return texts


def _numbers(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The text with every compared number replaced by #, whitespace collapsed, and the numbers with
    the line each sits in."""
    skeleton, numbers, at = [], [], 0
    for m in _NUMBER.finditer(text):
        if _TIMING.match(text, m.end()):
            skeleton.append(text[at : m.start()] + "<time>")
        else:
            skeleton.append(text[at : m.start()] + "#")
            line_start = text.rfind("\n", 0, m.start()) + 1
            line_end = text.find("\n", m.end())
            numbers.append((m.group(), text[line_start : line_end if line_end >= 0 else None].strip()))
        at = m.end()
    skeleton.append(text[at:])
    return " ".join("".join(skeleton).split()), numbers


def _unit(number: str) -> float:
    """One unit of the last printed digit: 0.034 -> 0.001, 6.8205e-24 -> 1e-28."""
    mantissa, _, exponent = number.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def same_number(committed: str, fresh: str) -> bool:
    """Whether a fresh output's number equals the committed one at its printed precision."""
    if not re.search(r"[.eE]", committed) or not re.search(r"[.eE]", fresh):
        return committed.lstrip("+") == fresh.lstrip("+")  # counts, indices, shapes: exactly
    a, b = float(fresh), float(committed)
    if abs(a) < ROUNDOFF and abs(b) < ROUNDOFF:
        return True
    return abs(a - b) <= max(REL_TOL * abs(b), _unit(committed), _unit(fresh)) * (1 + 1e-9)  # 1e-9: 0.035 - 0.034


def output_differences(committed, fresh, name: str) -> list[str]:
    """Where ``fresh`` (a notebook run again, cleaned by build.clean) shows other text or numbers than
    ``committed``, cell by cell (cells matched by id), one line per difference."""
    runs = {c.get("id"): c for c in fresh.cells if c.cell_type == "code"}
    found = []
    for cell in (c for c in committed.cells if c.cell_type == "code"):
        where = f"{name} {cell.id}"
        old, new = _texts(cell), _texts(runs.get(cell.id, {}))
        if len(old) != len(new):
            found.append(f"{where}: {len(old)} text outputs committed, {len(new)} in a fresh run")
            continue
        for old_text, new_text in zip(old, new):
            (old_skeleton, old_numbers), (new_skeleton, new_numbers) = _numbers(old_text), _numbers(new_text)
            if old_skeleton != new_skeleton:
                lines = itertools.zip_longest(old_text.splitlines(), new_text.splitlines(), fillvalue="")
                first = next(((a, b) for a, b in lines if _numbers(a)[0] != _numbers(b)[0]), (old_text, new_text))
                found.append(f"{where}: the text differs: committed {first[0].strip()!r}, fresh {first[1].strip()!r}")
                continue
            for (a, line), (b, fresh_line) in zip(old_numbers, new_numbers):
                if not same_number(a, b):
                    found.append(f"{where}: committed {a}, fresh {b} (committed line {line!r}, fresh {fresh_line!r})")
    return found


def _one_cell(text: str):
    cell = nbformat.v4.new_code_cell("print(...)", id="cell-01")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    return nbformat.v4.new_notebook(cells=[cell])


_COMMITTED = "155 hook points\nrelative change 0.034\nlogit 3.4096603393554688\np 6.8205e-24 err 2.5e-07\nran in 3 s\n"


@pytest.mark.parametrize(
    "fresh, shown",
    [
        (_COMMITTED, None),
        (_COMMITTED.replace("155", "156"), "committed 155, fresh 156"),  # a count: exactly
        (_COMMITTED.replace("0.034", "0.036"), "committed 0.034, fresh 0.036"),  # two units of the last digit
        (_COMMITTED.replace("0.034", "0.035"), None),  # one unit: the last printed digit may flip
        (_COMMITTED.replace("3.4096603393554688", "3.4200"), "committed 3.4096603393554688, fresh 3.4200"),
        (_COMMITTED.replace("3.4096603393554688", "3.4096593141555786"), None),  # within REL_TOL
        (_COMMITTED.replace("6.8205e-24", "6.9e-24").replace("2.5e-07", "3.1e-07"), None),  # both under ROUNDOFF
        (
            _COMMITTED.replace("hook points", "hooks"),
            "the text differs: committed '155 hook points', fresh '155 hooks'",
        ),
        (_COMMITTED.replace("155 hook", "155   hook").replace("3 s", "41 s"), None),  # column widths, timings
        (_COMMITTED.replace("0.034", "1"), "committed 0.034, fresh 1"),  # a float that became an integer
    ],
)
def test_output_comparison(fresh, shown):
    """The comparison ``test_notebook_runs`` makes: what it reports, naming the notebook, cell and number."""
    found = output_differences(_one_cell(_COMMITTED), _one_cell(fresh), "01_hooks_tour")
    if shown is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith("01_hooks_tour cell-01: ") and shown in found[0], found


def test_a_moved_count_in_a_committed_notebook_shows():
    """On a committed notebook itself: no difference with itself, one when its hook count moves."""
    committed = nbformat.read(SOURCES[0].with_suffix(".ipynb"), as_version=4)
    assert output_differences(committed, committed, "01_hooks_tour") == []
    moved = nbformat.reads(nbformat.writes(committed), as_version=4)
    cell = next(c for c in moved.cells if any(" hook points" in t for t in _texts(c)))
    stream = next(o for o in cell.outputs if o.output_type == "stream")
    count = int(stream.text.split()[0])
    stream.text = stream.text.replace(f"{count} hook points", f"{count + 1} hook points")
    found = output_differences(committed, moved, "01_hooks_tour")
    assert found and found[0].startswith(f"01_hooks_tour {cell.id}: committed {count}, fresh {count + 1}"), found


def _reset_cell() -> str:
    """What one notebook may leave behind for the next in the shared kernel, put back."""
    return (
        "%reset -f\n"
        "%matplotlib inline\n"  # the library's figure functions switch to Agg, where plt.show() shows nothing
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
    env = {**os.environ, "PYTHONHASHSEED": "0"}
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
    committed = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    differences = output_differences(committed, build.clean(nb), source.stem)
    assert not differences, "\n".join(differences[:12] + [f"rebuild it: python notebooks/build.py {source.stem[:2]}"])


# What the notebooks teach (issue 41, "a student's first day"), read from the committed outputs, which
# test_notebook_runs keeps equal to a fresh run's.
def _committed(stem: str):
    return nbformat.read(build.HERE / f"{stem}.ipynb", as_version=4)


def _output_lines(nb) -> list[str]:
    return [line for c in nb.cells if c.cell_type == "code" for t in _texts(c) for line in t.splitlines()]


@pytest.mark.parametrize(
    "stem, term",
    [
        ("02_head_roles", "p_adjusted"),
        ("02_head_roles", "null_score"),
        ("02_head_roles", "relative"),
        ("02_head_roles", "Holm"),
        ("04_causal_validation", "sv_probe"),
        ("05_positional_encodings", "seeds"),
    ],
)
def test_a_term_is_explained_before_an_output_shows_it(stem, term):
    """The first cell that uses ``term`` (code or output) comes after a markdown cell that explains it: its
    name in backticks followed by a colon or '=' (or, for Holm, the method; for the seeds, both meanings)."""
    explained = {
        "Holm": re.compile(r"Holm's method"),
        "seeds": re.compile(r"seed documents.*\.\./shared/seeds/.*Random seeds", re.S),
    }.get(term, re.compile(rf"`{term}`\s*(?:\([^)]*\))?\s*(?:[:=]|at|is)"))
    nb = _committed(stem)
    used = next(
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (re.search(rf"\b{term}\b", c.source) or any(term in t for t in _texts(c)))
    )
    where = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and explained.search(c.source)), None)
    assert where is not None and where < used, (
        f"{stem}: {term} is used in cell {used} before a markdown cell explains it"
    )


def test_01_builds_attention_by_hand():
    """softmax(q k^T / sqrt(d) + mask) from the rotated q and k equals hook_pattern; from q and k before RoPE it
    does not; and on MiniLM from hook_q/hook_k."""
    found = {}
    for line in _output_lines(_committed("01_hooks_tour")):
        m = re.match(r"(.+?)\s+max \|by hand - hook_pattern\| = (\S+)", line)
        if m:
            found[m.group(1)] = float(m.group(2))
    assert found.get("SmolLM2 layer 3, rotated q, k", 1) < 1e-5, found
    assert found.get("MiniLM layer 2, q, k", 1) < 1e-5, found
    assert found.get("SmolLM2 layer 3, q, k before RoPE", 0) > 1e-2, found


def test_02_own_role_labels_a_head_or_says_why_not():
    lines = _output_lines(_committed("02_head_roles"))
    counts = {
        m[1]: int(m[2]) for m in (re.match(r"attends to \[(\w+)\]: (\d+) of \d+ heads labelled", x) for x in lines) if m
    }
    assert counts and max(counts.values()) > 0, counts
    if min(counts.values()) == 0:  # a role that labels nothing shows its best head's effect against the margin
        assert any(re.match(r"best head L\d+H\d+: score \S+ - uniform \S+ = \S+", x) for x in lines), lines
        assert any("beat the uniform head by more than the margin" in x for x in lines), lines


def test_03_rotating_wq_wk_needs_the_biases_too():
    changes = {}
    for line in _output_lines(_committed("03_invariances")):
        m = re.match(r"W_Q R, W_K R, (.+?)\s+relative score change (\S+)", line)
        if m:
            changes[m.group(1)] = float(m.group(2))
    assert changes.get("biases rotated too", 1) < 1e-5 and changes.get("biases kept", 0) > 0.1, changes
