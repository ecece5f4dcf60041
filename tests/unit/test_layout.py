"""The package's layout holds its architecture: a pure ``core`` at the bottom, ``typer`` only in
``cli``, nothing importing ``cli``, no import cycles, no module over 500 lines.

Read from the source with :mod:`ast` (every ``import``, also those inside functions), so the
rules hold for code paths no test happens to run. Each checker is also run on a small bad
example, so a rule that stopped seeing its violations would fail here too.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "infer_prof"

#: What ``core`` may import besides ``infer_prof.core``: the standard library's pure parts.
#: No sockets, processes, files, clocks of the machine, NVML, vLLM or databases.
CORE_MAY_IMPORT = frozenset({
    "__future__", "abc", "array", "bisect", "collections", "collections.abc", "dataclasses", "enum",
    "fnmatch", "functools", "heapq", "itertools", "math", "numbers", "operator", "random", "re",
    "statistics", "typing",
    "msgspec",  # declared types (Structs) and their JSON values: no I/O of its own
})
#: Builtins that do I/O; ``core`` calls none of them.
IO_BUILTINS = frozenset({"open", "print", "input", "exec", "eval", "__import__"})
#: The package's folders, top to bottom: each imports only folders below it (docs/development.md).
LAYERS = ["cli", "run", "estimate", "quality", "report", "servers", "loadgen", "telemetry",
          "results", "config", "catalog", "core"]
#: ``core``'s concept folders, top to bottom, by the same rule (docs/development.md).
CORE_FOLDERS = ["analysis", "quality", "estimate", "planning", "workload", "measurement", "catalog"]
#: Modules at ``core``'s top level (not one concept's), each with the reason.
CORE_SHARED = {"messages": "one-line error text for bad input, used by every concept's parser"}
MAX_LINES = 500
#: Modules allowed over :data:`MAX_LINES`, each with the reason it is one concept.
OVER_MAX_LINES: dict[str, str] = {}


def module_name(path: Path) -> str:
    """``infer_prof/run/runner.py`` -> ``infer_prof.run.runner`` (a package is its __init__)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every Python module of the package, by dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:`` (imports for annotations only, which
    never run, so they make no cycle)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def imported_modules(node: ast.AST, base: str) -> list[str]:
    """The modules one ``import`` / ``from ... import`` statement names (relative ones made
    absolute against the package ``base``); nothing for any other node."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    mod = node.module or ""
    if node.level:
        anchor = base.split(".")
        anchor = anchor[: len(anchor) - (node.level - 1)]
        mod = ".".join([*anchor, mod] if mod else anchor)
    return [mod]


def imports(source: str, name: str, is_package: bool = False) -> list[tuple[str, int]]:
    """The modules ``source`` imports when it runs (dotted, relative imports made absolute), with
    line numbers; ``from a import b`` yields both ``a`` and ``a.b`` (the caller keeps what is a
    module)."""
    return list(_imports(source, name, is_package))


@functools.cache
def _imports(source: str, name: str, is_package: bool) -> tuple[tuple[str, int], ...]:
    """:func:`imports`, found once per module: four rules below read every module's imports,
    and parsing the package took ~1 s a pass on the 2-core VM. Only the names are kept, not the
    trees (300 modules' trees held for the session made every full garbage collection ~0.25 s
    slower)."""
    found: list[tuple[str, int]] = []
    base = name if is_package else name.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(source)):
        for mod in imported_modules(node, base):
            found.append((mod, node.lineno))
            if isinstance(node, ast.ImportFrom):
                found += [(f"{mod}.{a.name}", node.lineno) for a in node.names]
    return tuple(found)


def core_violations(source: str, name: str) -> list[str]:
    """Why a ``core`` module is not pure: imports outside ``core`` and the pure standard
    library, and calls of I/O builtins."""
    bad = []
    base = name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in IO_BUILTINS):
            bad.append(f"{name}:{node.lineno} calls {node.func.id}()")
        for m in imported_modules(node, base):
            if not (m in CORE_MAY_IMPORT or m == "infer_prof.core"
                    or m.startswith("infer_prof.core.")):
                bad.append(f"{name}:{node.lineno} imports {m}")
    return bad


def typer_violations(sources: dict[str, str]) -> list[str]:
    """Modules outside ``infer_prof.cli`` that import typer (or click, which typer wraps)."""
    return [
        f"{name}:{line} imports {mod}"
        for name, src in sources.items()
        if not (name == "infer_prof.cli" or name.startswith("infer_prof.cli."))
        for mod, line in imports(src, name)
        if mod.split(".")[0] in ("typer", "click")
    ]


def cli_importers(sources: dict[str, str]) -> list[str]:
    """Modules outside ``cli`` that import it; ``infer_prof.__main__`` (``python -m``) may."""
    return [
        f"{name}:{line} imports {mod}"
        for name, src in sources.items()
        if not (name.startswith("infer_prof.cli") or name == "infer_prof.__main__")
        for mod, line in imports(src, name)
        if mod == "infer_prof.cli" or mod.startswith("infer_prof.cli.")
    ]


def import_graph(sources: dict[str, str], packages: Iterable[str] = ()) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a package counts as its ``__init__``)."""
    pkgs = set(packages)
    graph: dict[str, set[str]] = {}
    for name, src in sources.items():
        targets = {m for m, _ in imports(src, name, name in pkgs) if m in sources and m != name}
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _sources() -> dict[str, str]:
    return {name: path.read_text() for name, path in modules().items()}


def _packages() -> list[str]:
    return [name for name, path in modules().items() if path.name == "__init__.py"]


# -- the rules, on the package ---------------------------------------------------------------


def test_core_is_pure():
    bad = [v for name, src in _sources().items() if name.startswith("infer_prof.core.")
           for v in core_violations(src, name)]
    assert not bad, "core must not do I/O or import outside core:\n" + "\n".join(bad)


def test_only_cli_imports_typer():
    bad = typer_violations(_sources())
    assert not bad, "typer belongs to cli only:\n" + "\n".join(bad)


def test_nothing_imports_cli():
    bad = cli_importers(_sources())
    assert not bad, "cli is the top; nothing may import it:\n" + "\n".join(bad)


def test_no_import_cycles():
    found = cycles(import_graph(_sources(), _packages()))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def layer_violations(graph: dict[str, set[str]], layers: list[str],
                     under: str = "infer_prof") -> list[str]:
    """Imports from a folder of ``layers`` (the folders of package ``under``) into one above it
    (another folder's)."""
    prefix = under.split(".")
    n = len(prefix)

    def folder(m: str) -> str | None:
        parts = m.split(".")
        inside = len(parts) > n + 1 and parts[:n] == prefix
        return parts[n] if inside and parts[n] in layers else None

    bad = []
    for a, targets in sorted(graph.items()):
        for b in sorted(targets):
            fa, fb = folder(a), folder(b)
            if fa and fb and fa != fb and layers.index(fb) < layers.index(fa):
                bad.append(f"{a} imports {b} ({fb}/ is above {fa}/)")
    return bad


def test_folders_import_only_downwards():
    bad = layer_violations(import_graph(_sources(), _packages()), LAYERS)
    assert not bad, "imports up the layers:\n" + "\n".join(bad)
    folders = sorted(p.name for p in PACKAGE.iterdir()
                     if p.is_dir() and (p / "__init__.py").exists())
    assert folders == sorted(LAYERS)  # every folder has its place in the order


def test_core_folders_import_only_downwards():
    bad = layer_violations(import_graph(_sources(), _packages()), CORE_FOLDERS, "infer_prof.core")
    assert not bad, "imports up core's folders:\n" + "\n".join(bad)
    core = PACKAGE / "core"
    folders = sorted(p.name for p in core.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == sorted(CORE_FOLDERS)  # every concept folder has its place in the order
    loose = sorted(p.stem for p in core.glob("*.py") if p.stem != "__init__")
    assert loose == sorted(CORE_SHARED), f"core modules outside a concept folder: {loose}"


def test_no_module_over_500_lines():
    long = {
        name: n for name, path in modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES and name not in OVER_MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split by concept): {long}"
    stale = [name for name in OVER_MAX_LINES if name not in modules()
             or len(modules()[name].read_text().splitlines()) <= MAX_LINES]
    assert not stale, f"no longer over {MAX_LINES} lines, drop from OVER_MAX_LINES: {stale}"


def test_no_loose_modules_at_the_package_root():
    """Every concept has a folder; the root holds only the package's entry points."""
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert root == ["__init__.py", "__main__.py"], root


# -- the checkers see what they must ---------------------------------------------------------


def test_checkers_catch_violations():
    bad_core = "import subprocess\nfrom infer_prof.run import config\nx = open('f')\n"
    assert core_violations(bad_core, "infer_prof.core.x") == [
        "infer_prof.core.x:1 imports subprocess",
        "infer_prof.core.x:2 imports infer_prof.run",
        "infer_prof.core.x:3 calls open()",
    ]
    assert core_violations("import math\nfrom infer_prof.core.measurement.stats import p\n",
                           "infer_prof.core.x") == []
    assert core_violations("from ..run import config\nfrom . import stats\n",
                           "infer_prof.core.x") == ["infer_prof.core.x:1 imports infer_prof.run"]
    srcs = {
        "infer_prof.run.a": "def f():\n    import typer\n",
        "infer_prof.cli.b": "import typer\nfrom infer_prof.run import a\n",
        "infer_prof.report.c": "from infer_prof.cli import b\n",
    }
    assert typer_violations(srcs) == ["infer_prof.run.a:2 imports typer"]
    assert cli_importers(srcs) == ["infer_prof.report.c:1 imports infer_prof.cli",
                                   "infer_prof.report.c:1 imports infer_prof.cli.b"]
    ring = {
        "infer_prof.a": "from infer_prof import b\n",
        "infer_prof.b": "def f():\n    import infer_prof.c\n",
        "infer_prof.c": "from . import a\n",
        "infer_prof.d": "import infer_prof.a\n",
    }
    assert cycles(import_graph(ring)) == [["infer_prof.a", "infer_prof.b", "infer_prof.c"]]
    assert cycles(import_graph({k: v for k, v in ring.items() if k != "infer_prof.c"})) == []
    assert layer_violations(import_graph({
        "infer_prof.core.x": "from infer_prof.run import y\n",
        "infer_prof.run.y": "from infer_prof.core import x\n",
        "infer_prof.run.z": "from infer_prof.run import y\n",
    }), ["run", "core"]) == ["infer_prof.core.x imports infer_prof.run.y (run/ is above core/)"]
    assert layer_violations(import_graph({
        "infer_prof.core.catalog.x": "from infer_prof.core.planning import y\n",
        "infer_prof.core.planning.y": "from infer_prof.core.catalog import x\n",
    }), ["planning", "catalog"], "infer_prof.core") == [
        "infer_prof.core.catalog.x imports infer_prof.core.planning.y"
        " (planning/ is above catalog/)"]
    typed = dict(ring, **{"infer_prof.c": "from typing import TYPE_CHECKING\n"
                                          "if TYPE_CHECKING:\n    from . import a\n"})
    assert cycles(import_graph(typed)) == []  # annotations only: never imported at run time
