"""Result files on disk: ``<dir>/<run_name>.json`` and ``<dir>/<run_name>.requests.jsonl``.

Every file is written to a temporary file in its folder first and then put in place in one
step, so that no reader (and no crash) ever sees half a file. Run files are created
exclusively (:func:`save_run_files`): a name that exists gets ``-2``, ``-3``, ... instead, so
runs started together in one folder never overwrite each other.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.results.document import check_document
from infer_prof.results.matrix_summary import MATRIX_SUMMARY_KIND, check_matrix_summary
from infer_prof.results.schema import RESULT_KIND
from infer_prof.results.sweep_document import SWEEP_KINDS, check_sweep

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


def make_run_name(started_at_compact: str, model: str, load_label: str) -> str:
    """A file-name-safe readable run name: ``20261122-031500-tiny-llama-c128`` (``c``:
    concurrency, ``r``: rate). Not unique: the run's ID is its ``run_id``
    (:func:`infer_prof.results.run_ids.new_run_id`)."""
    return f"{started_at_compact}-{safe_name(model)}-{load_label}"


def result_paths(
    output: str | Path | None, results_dir: Path, run_name: str
) -> tuple[Path, Path]:
    """(result JSON path, requests JSONL path) for ``--output`` or the default results folder."""
    main = Path(output) if output else results_dir / f"{run_name}.json"
    if main.suffix != ".json":
        main = (
            main.with_suffix(main.suffix + ".json") if main.suffix else main / f"{run_name}.json"
        )
    return main, main.with_name(main.name[: -len(".json")] + ".requests.jsonl")


def _temp_copy(folder: Path, name: str, text: str | bytes) -> str:
    """``text`` in a new temporary file of ``folder`` (hidden, named after ``name``), flushed
    to the disk; its path. Raises OSError (a full disk: ENOSPC) with nothing left behind."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _atomic_write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_copy(path.parent, path.name, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _link_new(tmp: str, path: Path) -> None:
    """Put the complete file ``tmp`` at ``path`` only if ``path`` does not exist (a hard link
    fails with FileExistsError when it does); a file system without hard links gets the name
    claimed with O_EXCL and then replaced in one step."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.replace(tmp, path)


def write_new_file(path: Path, text: str | bytes) -> Path:
    """Write ``path`` exclusively and atomically: if it exists, ``<stem>-2<suffix>``, ``-3``,
    ... is written instead. Returns the path written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_copy(path.parent, path.name, text)
    try:
        for n in range(1, 10_000):
            cand = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
            try:
                _link_new(tmp, cand)
            except FileExistsError:
                continue
            return cand
        raise FileExistsError(errno.EEXIST, "no free file name", str(path))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def save_run_files(
    result_path: Path,
    result: dict[str, Any],
    records: Iterable[RequestRecord],
    *,
    overwrite: bool = False,
) -> tuple[Path, Path]:
    """Write a run's requests file and result file, each atomically (a temporary file put in
    place in one step: never half a JSON). Unless ``overwrite``, both are created exclusively:
    when ``<stem>.json`` or ``<stem>.requests.jsonl`` exists (another run chose the same name),
    ``<stem>-2``, ``<stem>-3``, ... is used instead; never an existing file replaced. Sets the
    result's ``requests_file`` to the requests file's name. Returns (result path, requests
    path). Raises OSError (unwritable folder, full disk) with no file of this run left."""
    folder = result_path.parent
    folder.mkdir(parents=True, exist_ok=True)
    stem = result_path.name[: -len(".json")] if result_path.name.endswith(".json") else (
        result_path.name
    )
    requests_text = "".join(json.dumps(r.to_dict()) + "\n" for r in records)
    req_tmp = _temp_copy(folder, f"{stem}.requests.jsonl", requests_text)
    res_tmp: str | None = None
    try:
        for n in range(1, 10_000):
            name = stem if n == 1 else f"{stem}-{n}"
            res_p, req_p = folder / f"{name}.json", folder / f"{name}.requests.jsonl"
            result["requests_file"] = req_p.name
            if n == 1:
                check_result_type(result)
            text = json.dumps(result, indent=2, default=str) + "\n"
            if res_tmp is not None:
                os.unlink(res_tmp)
            res_tmp = _temp_copy(folder, f"{name}.json", text)
            if overwrite:
                os.replace(req_tmp, req_p)
                os.replace(res_tmp, res_p)
                return res_p, req_p
            try:
                _link_new(req_tmp, req_p)  # claims the name
            except FileExistsError:
                continue
            try:
                _link_new(res_tmp, res_p)
            except FileExistsError:
                os.unlink(req_p)  # ours: give the name back, take the next
                continue
            except BaseException:
                os.unlink(req_p)
                raise
            return res_p, req_p
        raise FileExistsError(errno.EEXIST, "no free file name", str(result_path))
    finally:
        for tmp in (req_tmp, res_tmp):
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def write_result(path: Path, result: dict[str, Any]) -> None:
    """Write the result JSON atomically (a reader never sees half a file); a run's result is
    held to its declared type first (:func:`check_result_type`)."""
    check_result_type(result)
    _atomic_write(path, json.dumps(result, indent=2, default=str) + "\n")


class ResultTypeError(ValueError):
    """A result built for writing does not match :class:`infer_prof.results.document.Result`
    (raised only with ``INFER_PROF_STRICT_SCHEMA=1``, as the tests run)."""


def check_result_type(result: dict[str, Any]) -> None:
    """Hold a run's result document (``kind`` ``infer-prof.run``), sweep summary
    (``infer-prof.sweep``, ``infer-prof.engine-sweep``) or matrix summary
    (``infer-prof-matrix``) to its declared type before it is
    written. A mismatch is a bug in infer-prof: with ``INFER_PROF_STRICT_SCHEMA=1`` (the test
    suite) it raises :class:`ResultTypeError`; otherwise one warning line goes to stderr and the
    document is written as it is (what was measured is never lost to it)."""
    if result.get("kind") == RESULT_KIND:
        problems = check_document(result)
    elif result.get("kind") in SWEEP_KINDS:
        problems = check_sweep(result)
    elif result.get("kind") == MATRIX_SUMMARY_KIND:
        problems = check_matrix_summary(result)
    else:
        return
    if not problems:
        return
    line = "result document does not match its declared type: " + "; ".join(problems[:5])
    if os.environ.get("INFER_PROF_STRICT_SCHEMA") == "1":
        raise ResultTypeError(line)
    sys.stderr.write(f"warning: {line} (an infer-prof bug: please report it)\n")


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
