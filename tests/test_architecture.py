"""The package structure holds: imports point one way, nothing imports in a circle, and the
command line starts without torch.

Layers, lowest first: ``interp`` <- ``models`` <- ``analyses.data`` <- ``analyses.heads`` /
``analyses.invariance`` / ``analyses.positional`` <- ``analyses.validation`` (it validates the
heads' labels) <- ``analyses.circuits`` (circuit discovery) <- ``analyses.catalogue`` (labels
joined with patching) <- ``analyses.report`` <- ``analyses.cli``. A module may import its own room
and any lower layer; never a higher layer nor a sibling room of the same layer.
"""

from __future__ import annotations

import ast
import functools
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
    "analyses.positional": 4,  # the study's distance claim is measured by invariance's shift check
    "analyses.validation": 4,
    "analyses.circuits": 5,  # circuits of heads per task; tasks from validation's prompts, labels from heads
    "analyses.longctx": 5,  # heads at long context: real text from data, scores from heads, ablations from validation
    "analyses.catalogue": 6,  # one verdict per head: heads' labels joined with circuits' tasks and patching
    "analyses.qk": 6,  # why a head attends: its score split into components, on circuits' tasks and positions
    "analyses.report": 7,
    "analyses.explore": 8,  # the live app reads heads.csv and the examples through report/heads
    "analyses.cli": 9,
    "analyses.positional.__main__": 10,  # an entry point above the command line: it runs `interp positional`
}


@functools.cache
def parse(path: Path, text: str) -> ast.Module:
    """One parse per file and text for every check of this module (the tests share the trees)."""
    return ast.parse(text, filename=str(path))


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
    tree = parse(path, path.read_text(encoding="utf-8"))
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


def through_init(module: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """The imports in ``module`` that reach a sibling through an enclosing package's ``__init__``
    (``from analyses.data import corpora`` or ``from . import corpora`` inside ``analyses/data/x.py``):
    running that ``__init__`` re-enters the package being imported, a circle the graph above does not
    see because it credits ``analyses.data.corpora`` directly. Siblings are imported by full name
    (``from analyses.data.corpora import X``); a lower room's ``__init__`` (its public API) is fine."""
    tree = parse(path, path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            anchor = module.split(".") if is_pkg else module.split(".")[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        if modules.get(base, Path()).name != "__init__.py" or not module.startswith(base + "."):
            continue  # not an enclosing package: a lower room's public API
        own = module if is_pkg else module.rpartition(".")[0]
        names = [
            a.name
            for a in node.names
            if base == own  # a sibling, or a name the own package's __init__ re-exports
            or f"{base}.{a.name}" not in modules  # a name an enclosing package's __init__ re-exports
            or (module + ".").startswith(f"{base}.{a.name}.")  # the module's own package, through its parent
        ]
        if names:
            bad.append(f"{module} (line {node.lineno}): from {base} import {', '.join(names)}")
    return bad


def layer_of(module: str) -> tuple[str, int]:
    room = max((r for r in LAYERS if module == r or module.startswith(r + ".")), key=len)
    return room, LAYERS[room]


@functools.cache
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


def test_the_init_check_finds_a_sibling_imported_through_its_package(tmp_path):
    modules = module_files()
    path = tmp_path / "m.py"
    path.write_text("from analyses.data import corpora, poetry\nfrom analyses.data.items import Item\n")
    assert through_init("analyses.data.sources", path, modules) == [
        "analyses.data.sources (line 1): from analyses.data import corpora, poetry"
    ]
    path.write_text("def f():\n    from . import corpora\n")
    assert through_init("analyses.data.sources", path, modules) == [
        "analyses.data.sources (line 2): from analyses.data import corpora"
    ]
    # a higher room using a lower room's public API, and a package's own __init__ importing its modules
    path.write_text("from analyses.data import load_items\nfrom . import corpora\n")
    assert through_init("analyses.heads.probe", path, modules) == [
        "analyses.heads.probe (line 2): from analyses.heads import corpora"
    ]
    init = tmp_path / "__init__.py"
    init.write_text("from analyses.data.corpora import load_corpus\nfrom . import poetry\nfrom analyses import data\n")
    assert through_init("analyses.data", init, modules) == ["analyses.data (line 3): from analyses import data"]


def test_no_module_imports_a_sibling_through_its_packages_init():
    modules = module_files()
    bad = [line for m, p in modules.items() for line in through_init(m, p, modules)]
    assert not bad, "import siblings by their full module name, never through __init__:\n" + "\n".join(bad)


def api_style_problems(source: str) -> list[str]:
    """What keeps a package ``__init__`` from the one public-API style: explicit re-exports
    (``from pkg.mod import a, b``, absolute) and a literal ``__all__`` that lists exactly the names it
    re-exports or defines (``def``, ``class``); no ``import *``, no lazy module ``__getattr__``."""
    tree = ast.parse(source)
    problems, public, listed = [], set(), None
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            problems.append(f"line {node.lineno}: import * (list the names)")
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            if node.level:
                problems.append(f"line {node.lineno}: relative import (use the full module name)")
            if node.level or (node.module or "").split(".")[0] in PACKAGES:  # a re-export; not `typing.Any`
                public |= {a.asname or a.name for a in node.names if a.name != "*"}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__":
                problems.append(f"line {node.lineno}: module __getattr__ (lazy exports: re-export explicitly)")
            public.add(node.name)
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            ok = isinstance(node.value, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts
            )
            if not ok:
                problems.append(f"line {node.lineno}: __all__ is not a literal list of strings")
            listed = [e.value for e in node.value.elts if isinstance(e, ast.Constant)] if ok else []
    public = {n for n in public if not n.startswith("_")}
    if listed is None:
        if public:
            problems.append("no __all__ (list the public names: " + ", ".join(sorted(public)) + ")")
        return problems
    if len(set(listed)) != len(listed):
        problems.append("__all__ lists a name twice")
    if missing := sorted(set(listed) - public):
        problems.append("__all__ names what the file does not bind: " + ", ".join(missing))
    if unlisted := sorted(public - set(listed)):
        problems.append("public names missing from __all__: " + ", ".join(unlisted))
    return problems


def test_the_api_style_check_finds_each_other_style():
    assert api_style_problems('"""Doc."""\n') == []
    good = "from __future__ import annotations\n\nfrom interp.x import f, g as h\n\n__all__ = ['f', 'h']\n"
    assert api_style_problems(good) == []
    assert api_style_problems("from interp.x import *\n") == ["line 1: import * (list the names)"]
    assert api_style_problems("from interp.x import f\n") == ["no __all__ (list the public names: f)"]
    lazy = "_EXPORTS = {'f': 'interp.x'}\n\ndef __getattr__(name):\n    pass\n\n__all__ = []\n"
    assert api_style_problems(lazy) == ["line 3: module __getattr__ (lazy exports: re-export explicitly)"]
    assert api_style_problems("from .a import f\n__all__ = ['f']\n") == [
        "line 1: relative import (use the full module name)"
    ]
    assert api_style_problems("from interp.x import f, g\n__all__ = ['f', 'k']\n") == [
        "__all__ names what the file does not bind: k",
        "public names missing from __all__: g",
    ]
    assert api_style_problems("__all__ = sorted(['f'])\n") == ["line 1: __all__ is not a literal list of strings"]


def test_every_package_init_has_one_public_api_style():
    bad = []
    for path in sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py")):
        for problem in api_style_problems(path.read_text(encoding="utf-8")):
            bad.append(f"{path.relative_to(ROOT)}: {problem}")
    assert not bad, "package __init__ files: explicit re-exports and __all__ only:\n" + "\n".join(bad)


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


def test_a_missing_data_package_skips_a_test_and_fails_it_under_ci(monkeypatch):
    """``tests.packages.needs_package``: a data source's package missing skips its tests on a
    developer's machine; under CI=true (setup installs it) it fails them, never passing silently."""
    from tests.packages import missing_package, needs_package

    mark = needs_package(False, "frobnicate not installed")
    assert mark.name == "needs_package" and mark.kwargs == {"missing": "frobnicate not installed"}
    assert needs_package(True, "unused").kwargs == {"missing": None}
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="frobnicate"):
        missing_package("frobnicate not installed")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and a package scripts/setup.sh installs is missing"):
        missing_package("frobnicate not installed")
