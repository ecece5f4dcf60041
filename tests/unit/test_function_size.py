"""No function over 100 lines, none with more than 8 parameters (``self``/``cls`` not counted)
unless it is a constructor (``__init__`` of a declared class): related parameters travel as one
declared (frozen) dataclass instead.

Read from the source with :mod:`ast`, as :mod:`tests.unit.test_layout` reads imports, so the rule
holds for code no test runs; the checker is also run on a small bad example.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "infer_prof"
MAX_FUNCTION_LINES = 100
MAX_PARAMETERS = 8
#: Functions still over a limit, ``path:name`` -> who shrinks them. Remove an entry when it is
#: fixed (the test then holds the line); never add one.
KNOWN_OVER: dict[str, str] = {
}


def oversized(source: str, where: str) -> list[str]:
    """``where:name (what)`` for each function in ``source`` over :data:`MAX_FUNCTION_LINES`
    lines or over :data:`MAX_PARAMETERS` parameters (``__init__`` exempt from the latter)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        lines = (node.end_lineno or node.lineno) - node.lineno + 1
        a = node.args
        params = (len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg)
                  + bool(a.kwarg))
        if a.args and a.args[0].arg in ("self", "cls"):
            params -= 1
        if lines > MAX_FUNCTION_LINES:
            found.append(f"{where}:{node.name} ({lines} lines)")
        if params > MAX_PARAMETERS and node.name != "__init__":
            found.append(f"{where}:{node.name} ({params} parameters)")
    return found


@functools.cache
def package_oversized() -> tuple[str, ...]:
    """:func:`oversized` of every module of the package, read once for both tests below (a pass
    over the package's ~300 modules took ~1 s on the 2-core VM)."""
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += oversized(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    return tuple(found)


def test_no_function_over_the_limits() -> None:
    found = [f for f in package_oversized() if f.split(" (")[0] not in KNOWN_OVER]
    assert found == [], (
        "split by concept (named helpers, a class of named steps) or bundle related parameters "
        "in a declared frozen dataclass: " + "; ".join(found)
    )


def test_known_exceptions_still_exist() -> None:
    """An entry of :data:`KNOWN_OVER` that no longer exceeds a limit is removed from it."""
    over = {f.split(" (")[0] for f in package_oversized()}
    assert sorted(set(KNOWN_OVER) - over) == []


def test_checker_sees_long_functions_and_many_parameters() -> None:
    long_body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = (
        f"def long():\n{long_body}\n"
        "def many(a, b, c, d, e, f, g, h, i):\n    pass\n"
        "class C:\n"
        "    def __init__(self, a, b, c, d, e, f, g, h, i):\n        pass\n"
        "    def method(self, a, b, c, d, e, f, g, h):\n        pass\n"
    )
    assert oversized(source, "m.py") == [
        f"m.py:long ({MAX_FUNCTION_LINES + 1} lines)",
        "m.py:many (9 parameters)",
    ]
