"""Find, read and list workload and suite files (``--workload NAME|PATH``).

A *path* (anything ending in ``.toml``, holding a path separator, or starting with ``.`` or
``~``) loads that file. A *name* is looked up as ``<name>.toml`` in, first to last:

1. the folders in ``$INFER_PROF_WORKLOADS`` (``os.pathsep``-separated), if set;
2. ``./workloads`` in the current directory (a user's own and edited workloads);
3. the ``workloads/`` folder of the source checkout this package runs from, if any;
4. the copies shipped inside the package, ``infer_prof/catalog/data/workloads/``.

The first hit wins, so a user's file shadows a shipped one of the same name. The workload files
live in one folder, ``infer_prof/catalog/data/workloads/`` (shipped in the wheel as package
data); ``workloads/`` at the repository root is a symbolic link to it, so that
``workloads/nightly.toml`` names the same file in a checkout (a unit test holds both).
"""

from __future__ import annotations

import os
import sys
import tomllib
from dataclasses import dataclass, replace
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from infer_prof.core.workload.workload_fields import WorkloadError
from infer_prof.core.workload.workload_suites import Suite, SuiteRun
from infer_prof.core.workload.workloads import Workload

ENV_VAR = "INFER_PROF_WORKLOADS"
_SHIPPED_SUBDIR = "workloads"


class WorkloadNotFoundError(ValueError):
    """A ``--workload`` name or path that matches no file; the message lists the known names."""


@dataclass(frozen=True)
class WorkloadInfo:
    """One entry of :func:`list_workloads`: ``kind`` is "workload", "suite" or "invalid"
    (then ``description`` holds the error), ``origin`` says which search folder it came from."""

    name: str
    kind: str
    description: str
    path: str
    origin: str


def repo_workloads_dir() -> Path | None:
    """``workloads/`` of the source checkout this package was imported from, if it exists."""
    candidate = Path(__file__).resolve().parents[2] / "workloads"
    return candidate if candidate.is_dir() else None


def shipped_workloads_dir() -> Traversable:
    """The copies shipped in the package: ``infer_prof/catalog/data/workloads/``."""
    return resources.files("infer_prof.catalog.data").joinpath(_SHIPPED_SUBDIR)


def search_dirs() -> list[tuple[str, Traversable]]:
    """The folders a name is looked up in, in order, as ``(origin, folder)`` pairs."""
    out: list[tuple[str, Traversable]] = []
    seen: set[str] = set()

    def add(origin: str, folder: Traversable) -> None:
        key = str(Path(str(folder)).resolve()) if isinstance(folder, Path) else str(folder)
        if key not in seen and folder.is_dir():
            seen.add(key)
            out.append((origin, folder))

    for part in os.environ.get(ENV_VAR, "").split(os.pathsep):
        if part:
            add(ENV_VAR, Path(part).expanduser())
    add("cwd", Path.cwd() / "workloads")
    repo = repo_workloads_dir()
    if repo is not None:
        add("checkout", repo)
    add("shipped", shipped_workloads_dir())
    return out


def _looks_like_path(value: str) -> bool:
    return (value.endswith(".toml") or "/" in value or os.sep in value
            or value.startswith((".", "~")))


def _known_names() -> list[str]:
    return sorted({info.name for info in list_workloads()})


def find_workload_file(name_or_path: str) -> Traversable:
    """The file ``name_or_path`` refers to (see the module docstring for the lookup order).
    Raises :class:`WorkloadNotFoundError` naming the known workloads when there is none."""
    if _looks_like_path(name_or_path):
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise WorkloadNotFoundError(
                f"workload file {name_or_path!r} does not exist; give an existing .toml file or "
                f"a workload name ({', '.join(_known_names())})")
        return path
    for _, folder in search_dirs():
        candidate = folder.joinpath(f"{name_or_path}.toml")
        if candidate.is_file():
            return candidate
    raise WorkloadNotFoundError(
        f"unknown workload {name_or_path!r}; known: {', '.join(_known_names())} "
        "(or give a path to a .toml file)")


def _display(file: Traversable) -> str:
    if isinstance(file, Path):
        try:
            return str(file.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(file)
    return str(file)


def read_toml(file: Traversable, label: str | None = None) -> tuple[dict[str, Any], str]:
    """Parse a TOML file; returns ``(mapping, source label)``: ``label`` when given, else the
    path (relative to the current directory when below it). Syntax errors raise
    :class:`WorkloadError` with the file and tomllib's line and column."""
    source = label or _display(file)
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(source, "", f"not UTF-8 text: {exc}") from None
    except OSError as exc:
        raise WorkloadError(source, "", f"cannot read it: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(text), source
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadError(source, "", f"not valid TOML: {exc}") from None
    except RecursionError:
        raise WorkloadError(source, "", "not valid TOML: nested too deeply") from None


def _stem(file: Traversable) -> str:
    name = file.name
    return name[:-5] if name.endswith(".toml") else name


def load_file(name_or_path: str) -> Workload | Suite:
    """Load a workload or a suite, whichever the file's ``kind`` says (default workload)."""
    file = find_workload_file(name_or_path)
    # errors name a path the way the user wrote it; a looked-up name shows where it was found
    data, source = read_toml(file, name_or_path if _looks_like_path(name_or_path) else None)
    if isinstance(data, dict) and data.get("kind") == "suite":
        return Suite.from_dict(data, source=source, default_name=_stem(file))
    wl = Workload.from_dict(data, source=source, default_name=_stem(file))
    if wl.dataset and isinstance(file, Path) and not Path(wl.dataset).expanduser().is_absolute():
        # a dataset path is relative to the workload file, not to the current directory
        wl = replace(wl, dataset=str(file.parent / wl.dataset))
    return wl


def load_workload(name_or_path: str) -> Workload:
    """Load and validate one workload by name or path. Raises :class:`WorkloadNotFoundError`
    or :class:`WorkloadError` (one line naming the file, the field and what is allowed)."""
    loaded = load_file(name_or_path)
    if isinstance(loaded, Suite):
        raise WorkloadError(loaded.source, "kind", "this file is a suite; run it as a suite "
                                                   "(load_suite), or name one of its members")
    return loaded


def load_suite(name_or_path: str) -> Suite:
    """Load and validate a suite (``kind = "suite"``) by name or path."""
    loaded = load_file(name_or_path)
    if not isinstance(loaded, Suite):
        raise WorkloadError(loaded.source, "kind", "must be 'suite' for a suite; this file is a "
                                                   "single workload")
    return loaded


def expand_suite(suite: Suite | str, scale: str | None = None) -> list[SuiteRun]:
    """Load a suite's members and apply its points and the named ``scale`` (None = full).

    A member's relative path is taken relative to the suite file's folder; a member name is
    looked up in that folder first, then as :func:`load_workload` does."""
    s = load_suite(suite) if isinstance(suite, str) else suite
    base = Path(s.source).parent if s.source and not s.source.startswith("<") else None

    def loader(ref: str) -> Workload:
        if base is not None:
            local = base / ref if _looks_like_path(ref) else base / f"{ref}.toml"
            if local.is_file():
                return load_workload(str(local))
        return load_workload(ref)

    return s.expand(loader, scale)


def list_workloads() -> list[WorkloadInfo]:
    """Every workload and suite found on the search path, by name; a name found in several
    folders is listed once, from the folder that wins the lookup. A file that does not parse
    is listed with kind "invalid" and its error as the description."""
    found: dict[str, WorkloadInfo] = {}
    for origin, folder in search_dirs():
        for file in sorted(folder.iterdir(), key=lambda f: f.name):
            if not file.name.endswith(".toml") or not file.is_file():
                continue
            name = _stem(file)
            if name in found:
                continue
            try:
                data, source = read_toml(file)
                kind = "suite" if data.get("kind") == "suite" else "workload"
                if kind == "suite":
                    Suite.from_dict(data, source=source, default_name=name)
                else:
                    Workload.from_dict(data, source=source, default_name=name)
                desc = str(data.get("description", ""))
            except WorkloadError as exc:
                kind, desc = "invalid", str(exc)
            found[name] = WorkloadInfo(name, kind, desc, _display(file), origin)
    return [found[k] for k in sorted(found)]


def _main(argv: list[str]) -> int:
    for info in list_workloads():
        print(f"{info.name:20} {info.kind:9} {info.description}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
