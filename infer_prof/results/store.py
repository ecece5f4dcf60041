"""Result files on disk: ``<dir>/<run_id>.json`` and ``<dir>/<run_id>.requests.jsonl``."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from infer_prof.core.metrics import RequestRecord

#: The environment variable that names the default results folder (``--results-dir``), and with
#: it the default history ``<results folder>/history.sqlite``.
RESULTS_DIR_ENV_VAR = "INFER_PROF_RESULTS_DIR"
DEFAULT_RESULTS_DIR = "results"


def default_results_dir() -> str:
    """The folder results go to when ``--results-dir`` is not given: ``$INFER_PROF_RESULTS_DIR``
    if set and not empty, else ``results`` (relative to the working directory)."""
    return os.environ.get(RESULTS_DIR_ENV_VAR, "").strip() or DEFAULT_RESULTS_DIR


def safe_name(model: str) -> str:
    """The last path part of a model name, with anything unsafe in a file name replaced."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model.strip("/").split("/")[-1])[:60]


def make_run_id(started_at_compact: str, model: str, load_label: str) -> str:
    """A file-name-safe run id: ``20261122-031500-tiny-llama-c128`` (``c``: concurrency,
    ``r``: rate)."""
    return f"{started_at_compact}-{safe_name(model)}-{load_label}"


def result_paths(output: str | Path | None, results_dir: Path, run_id: str) -> tuple[Path, Path]:
    """(result JSON path, requests JSONL path) for ``--output`` or the default results folder."""
    main = Path(output) if output else results_dir / f"{run_id}.json"
    if main.suffix != ".json":
        main = main.with_suffix(main.suffix + ".json") if main.suffix else main / f"{run_id}.json"
    return main, main.with_name(main.name[: -len(".json")] + ".requests.jsonl")


def _atomic_write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_result(path: Path, result: dict[str, Any]) -> None:
    """Write the result JSON atomically (a reader never sees half a file)."""
    _atomic_write(path, json.dumps(result, indent=2, default=str) + "\n")


def write_requests(path: Path, records: Iterable[RequestRecord]) -> None:
    """Write per-request records, one JSON object per line."""
    _atomic_write(path, "".join(json.dumps(r.to_dict()) + "\n" for r in records))


def write_file(path: Path, content: str | bytes) -> None:
    """Write a file atomically, exactly as given (an exported result or requests file)."""
    _atomic_write(path, content)


def parse_requests(data: bytes | str) -> list[RequestRecord]:
    """Per-request records from the text of a requests file (one JSON object per line)."""
    text = data.decode() if isinstance(data, bytes) else data
    return [RequestRecord.from_dict(json.loads(line)) for line in text.splitlines() if line.strip()]


def read_requests(path: Path) -> list[RequestRecord]:
    """Read per-request records written by :func:`write_requests`."""
    with open(path) as f:
        return [RequestRecord.from_dict(json.loads(line)) for line in f if line.strip()]
