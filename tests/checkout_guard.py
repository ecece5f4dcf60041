"""The suite leaves the checkout as it found it: nothing written into ``results/`` (the user's
own results and history), no new untracked file.

Every test gets its own results folder through ``INFER_PROF_RESULTS_DIR`` (the default of
``--results-dir`` and, under it, of the history ``history.sqlite``) and runs with
``INFER_PROF_HISTORY`` unset (tests/conftest.py). :func:`snapshot` is taken when the session
starts and again when it ends; :func:`changes` lists what differs, and conftest fails the
session when anything does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

Snapshot = dict[str, tuple[int, int]]


def snapshot(repo: Path) -> Snapshot:
    """Every file under ``repo/results`` and every untracked, not ignored file of the checkout,
    by path relative to ``repo``, with its (size, mtime in ns)."""
    paths = [p for p in (repo / "results").rglob("*") if p.is_file()]
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "ls-files", "--others", "--exclude-standard", "-z"],
            capture_output=True, timeout=60, check=True,
        ).stdout  # fmt: skip
        paths += [repo / name for name in out.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        pass  # not a git checkout (an unpacked sdist): results/ alone
    found: Snapshot = {}
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            continue
        found[p.relative_to(repo).as_posix()] = (st.st_size, st.st_mtime_ns)
    return found


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What differs, one line each: ``added PATH``, ``changed PATH``, ``removed PATH``."""
    lines = [f"added {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    lines += [f"removed {p}" for p in sorted(before.keys() - after.keys())]
    return lines
