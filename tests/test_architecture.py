"""The package structure holds: imports point one way, nothing imports in a circle, and the
command line starts without torch.

Layers, lowest first: ``interp`` <- ``models`` <- ``analyses.data`` <- ``analyses.heads`` /
``analyses.invariance`` / ``analyses.positional`` <- ``analyses.validation`` (it validates the
heads' labels) <- ``analyses.report`` <- ``analyses.cli``. A module may import its own room and any
lower layer; never a higher layer nor a sibling room of the same layer.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("interp", "models", "analyses")
LAYERS = {
    "interp": 0,
    "models": 1,
    "analyses": 2,  # the (empty) package itself
    "analyses.data": 2,
    "analyses.heads": 3,
    "analyses.invariance": 3,
    "analyses.positional": 3,
    "analyses.validation": 4,
    "analyses.report": 5,
    "analyses.cli": 6,
}


def module_files() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module an import of ``name`` runs last (``a.b.c`` -> itself if it is a module, else the
    nearest enclosing module), or None for a third-party name."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every first-party module that ``module`` imports, at any depth of the file (inside functions,
    behind ``if TYPE_CHECKING``, in a module ``__getattr__``): ``from a import b`` counts as an import
    of ``a.b`` when that is a module, else of ``a``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                anchor = module.split(".") if is_pkg else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
            else:
                continue
        else:
            continue
        for n in names:
            target = resolve(n, modules)
            if target and target != module:
                found.add(target)
    return found


def layer_of(module: str) -> tuple[str, int]:
    room = max((r for r in LAYERS if module == r or module.startswith(r + ".")), key=len)
    return room, LAYERS[room]


def graph() -> dict[str, set[str]]:
    modules = module_files()
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(g.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_the_graph_sees_imports_everywhere_in_a_file(tmp_path):
    src = (
        "import os\nfrom interp import io\n\ndef f():\n    from models import config\n\n"
        "def __getattr__(name):\n    from analyses.data import corpora\n    return corpora\n"
    )
    path = tmp_path / "m.py"
    path.write_text(src)
    modules = module_files()
    assert imports_of("analyses.data.items", path, modules) == {"interp.io", "models.config", "analyses.data.corpora"}


def test_cycle_finder_finds_a_planted_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    cycle = find_cycle(g)
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_imports_point_down_or_stay_in_their_room():
    bad = []
    for module, targets in graph().items():
        room, rank = layer_of(module)
        for t in targets:
            t_room, t_rank = layer_of(t)
            if t_rank > rank or (t_rank == rank and t_room != room and t_room != "analyses"):
                bad.append(f"{module} ({room}) imports {t} ({t_room})")
    assert not bad, "upward or sideways imports:\n" + "\n".join(sorted(bad))


@pytest.mark.parametrize("argv", [["--help"], ["probe", "--help"], ["validate", "--help"], ["train", "--help"]])
def test_cli_help_imports_no_torch(argv):
    code = (
        "import sys\nfrom analyses.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('torch', 'transformer_lens', 'transformers', 'pandas') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout, out.stdout[-2000:]
    assert "usage:" in out.stdout


def test_import_interp_is_light():
    code = "import sys, interp\nprint('torch' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
