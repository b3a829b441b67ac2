"""Hook shapes have one source, ``models.hook_state._HOOK_SHAPES`` (issue 20): the shape comments
beside each ``HookPoint()`` in the model's source and the table of docs/hooks.md are checked
against it here, so the three cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from models import mlp, transformer
from models.hook_state import _HOOK_SHAPES
from tests.factories import TINY, tiny_model

ROOT = Path(__file__).resolve().parents[2]
# ``self.hook_q = HookPoint()  # [batch, pos, head, d_head] ...``
COMMENT = re.compile(r"self\.(hook_\w+) = HookPoint\(\)\s*#\s*(\[[^\]]*\])")


def _comment_shapes(source: str) -> list[tuple[str, str]]:
    return COMMENT.findall(source)


def _doc_rows(markdown: str) -> list[tuple[list[str], list[str], str]]:
    """(hook leaf names, shapes, raw shape cell) for each row of the hook table (the table under
    the header ``| hook | shape | meaning |``)."""
    rows, inside = [], False
    for line in markdown.splitlines():
        inside = (inside and line.startswith("|")) or line.startswith("| hook | shape |")
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not inside or len(cells) != 3 or "hook_" not in cells[0]:
            continue
        names = [n.rsplit(".", 1)[-1] for n in re.findall(r"`([^`]+)`", cells[0])]
        shapes = re.findall(r"`(\[[^`]*\])`", cells[1])
        rows.append((names, shapes, cells[1]))
    return rows


def test_every_shape_comment_in_the_model_agrees_with_the_table():
    # the hook points live in models/transformer.py and (the MLP and the mixture of experts) models/mlp.py
    found = _comment_shapes(Path(transformer.__file__).read_text() + Path(mlp.__file__).read_text())
    assert len(found) >= 20, "the shape comments were not found: has their form changed?"
    bad = [f"{name}: comment {shape}, _HOOK_SHAPES {_HOOK_SHAPES.get(name)}" for name, shape in found]
    bad = [b for (name, shape), b in zip(found, bad) if _HOOK_SHAPES.get(name) != shape]
    assert not bad, "\n".join(bad)
    assert {name for name, _ in found} == set(_HOOK_SHAPES)  # no hook without a comment, none extra


def test_docs_hook_table_agrees_with_the_table():
    rows = _doc_rows((ROOT / "docs" / "hooks.md").read_text())
    documented, bad = set(), []
    for names, shapes, cell in rows:
        documented.update(names)
        if not shapes:  # "as `hook_q`, `hook_k`", "as `ln1`": a reference, checked through its target
            assert cell.startswith("as "), cell
            continue
        if len(shapes) == 1:
            shapes = shapes * len(names)
        assert len(shapes) == len(names), (names, shapes)
        bad += [
            f"{n}: docs {s}, _HOOK_SHAPES {_HOOK_SHAPES.get(n)}"
            for n, s in zip(names, shapes)
            if _HOOK_SHAPES.get(n) != s
        ]
    assert not bad, "\n".join(bad)
    assert set(_HOOK_SHAPES) <= documented, f"undocumented hooks: {sorted(set(_HOOK_SHAPES) - documented)}"


def test_the_checks_can_fail():
    """The parsers see a drift: a wrong comment and a wrong docs row are reported."""
    source = "        self.hook_q = HookPoint()  # [batch, pos, d_model]\n"
    assert _comment_shapes(source) == [("hook_q", "[batch, pos, d_model]")] != [("hook_q", _HOOK_SHAPES["hook_q"])]
    row = "| hook | shape | meaning |\n|---|---|---|\n| `blocks.l.attn.hook_z` | `[batch, pos, head, d_model]` | z |"
    ((names, shapes, _),) = _doc_rows(row)
    assert names == ["hook_z"] and shapes != [_HOOK_SHAPES["hook_z"]]


@pytest.mark.parametrize("key", sorted(TINY))
def test_every_hook_of_every_tiny_model_has_a_shape(key):
    """``hook_table`` reads ``_HOOK_SHAPES``: every hook point a model has is in it."""
    table = tiny_model(key).hook_table()
    assert table and all(shape for _, shape in table), [name for name, shape in table if not shape]
