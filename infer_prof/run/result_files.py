"""Where a run's result files go, checked before the engine starts and written at the end
without losing anything: never over another run's files, never half a JSON, and when the
results folder cannot take them (full disk, no permission), in a new temporary folder that the
run names.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_prof.config.run_groups import ResultsConfig
from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.results.store import result_paths, save_run_files
from infer_prof.run.config import ConfigError

MIN_FREE_BYTES = 1 << 20
"""A results folder with less free space than this (1 MiB) is refused before a run starts:
a result file with its per-request records of a few hundred requests is about that size."""


@dataclass(frozen=True)
class WrittenFiles:
    """Where a point's files are, and why not where asked (None when they are)."""

    result_path: Path
    requests_path: Path
    error: str | None = None


def check_result_location(results: ResultsConfig) -> None:
    """Before anything starts: ``--output`` must not exist (unless ``--overwrite``), and the
    folder the result goes to must be a writable folder with free space (a file is created
    there and removed). Raises ConfigError, one line naming the path and the fix."""
    if results.output:
        out, _ = result_paths(results.output, Path(results.results_dir), "run")
        if out.exists() and not results.overwrite:
            raise ConfigError(
                f"--output {out} exists; give another path, or --overwrite to replace it"
            )
        folder = out.parent
    else:
        folder = Path(results.results_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".infer-prof-probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
        st = os.statvfs(folder)
    except OSError as exc:
        raise ConfigError(
            f"cannot write result files in {folder}: {exc.strerror or exc}; give a writable "
            "folder with --results-dir (or --output)"
        ) from None
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE_BYTES:
        raise ConfigError(
            f"{folder} has {free // 1024} KiB free, too little for the result files; free some "
            "space or give another folder with --results-dir (or --output)"
        )


def write_point(
    results: ResultsConfig, result: dict[str, Any], records: list[RequestRecord], result_path: Path
) -> WrittenFiles:
    """Write a point's result and requests files (:func:`save_run_files`: exclusive unless
    ``--output`` with ``--overwrite``, atomic). When that fails (a full disk, a folder made
    read-only meanwhile), the files go to a new temporary folder instead, and ``error`` says
    why and where (or, when that fails too, that the result is lost)."""
    overwrite = bool(results.output and results.overwrite)
    try:
        res, req = save_run_files(result_path, result, records, overwrite=overwrite)
        return WrittenFiles(res, req)
    except OSError as exc:
        why = f"cannot write {result_path}: {exc.strerror or exc}"
    try:
        folder = Path(tempfile.mkdtemp(prefix="infer-prof-result-"))
        res, req = save_run_files(folder / result_path.name, result, records)
    except OSError as exc:  # nowhere to put it: said, not raised over the other points
        req = result_path.with_name(result_path.name[: -len(".json")] + ".requests.jsonl")
        return WrittenFiles(
            result_path, req,
            f"{why}; nor in a temporary folder ({exc.strerror or exc}): the result is lost",
        )
    return WrittenFiles(res, req, f"{why}; the result is in {res} instead")
