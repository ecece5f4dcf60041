"""Many result files at once: loading files/folders/globs, the history.

* :func:`load_results` turns command-line arguments (files, folders, glob patterns) into
  ``(path, result dict)`` pairs.
* What makes runs "the same configuration" is :mod:`infer_prof.results.identity`.
* :func:`requests_path` / :func:`load_request_records`: the per-request records beside a result.
* :func:`record_result`: record one result in the history database (the runner calls it).
"""

from __future__ import annotations

import glob
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.results import history, history_database
from infer_prof.results.document import Result, decode_result
from infer_prof.results.identity import (
    config_fields,
    config_fingerprint,
    gpu_name,
    model_name,
    precision_of,
    readable_name,
)
from infer_prof.results.schema import RESULT_KIND, ResultFileError, load_result, typed_document
from infer_prof.results.store import parse_requests, read_requests, write_file


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# --- loading -----------------------------------------------------------------------------------


def _is_result_file(path: Path) -> bool:
    """A ``.json`` file in a folder that holds an infer-prof result (cheap check on the kind)."""
    if not path.name.endswith(".json") or path.name.startswith("."):
        return False
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("kind") == RESULT_KIND


def expand_paths(specs: Iterable[str]) -> list[Path]:
    """Result file paths from files, folders (their ``*.json`` results, not recursive) and glob
    patterns (``**`` allowed); sorted within a folder or pattern, in argument order otherwise,
    each file once. A pattern matching nothing or a missing path raises ResultFileError.

    A file named explicitly must be a result (checked on load); files found in folders or by
    patterns that are not infer-prof results (reports, other JSON) are skipped.
    """
    out: list[Path] = []
    seen: set[Path] = set()

    def add(p: Path) -> None:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            out.append(p)

    for spec in specs:
        p = Path(spec)
        if p.is_dir():
            found = sorted(q for q in p.glob("*.json") if _is_result_file(q))
            if not found:
                raise ResultFileError(f"{spec}: no infer-prof result files in this folder")
            for q in found:
                add(q)
        elif p.exists():
            add(p)
        elif glob.has_magic(spec):
            matches = sorted(Path(m) for m in glob.glob(spec, recursive=True))
            found = [q for q in matches if q.is_file() and _is_result_file(q)]
            if not found:
                raise ResultFileError(f"{spec}: no infer-prof result files match this pattern")
            for q in found:
                add(q)
        else:
            raise ResultFileError(f"{spec}: no such file or folder")
    return out


def load_results(specs: Iterable[str]) -> list[tuple[Path, dict[str, Any]]]:
    """``(path, result)`` for every result named by ``specs`` (see :func:`expand_paths`).

    Raises ResultFileError (a ValueError) naming the first bad argument or file.
    """
    return [(p, load_result(p)) for p in expand_paths(specs)]


def load_typed_results(specs: Iterable[str]) -> list[tuple[Path, Result]]:
    """:func:`load_results` as typed :class:`infer_prof.results.document.Result` (attributes)."""
    return [(p, decode_result(r)) for p, r in load_results(specs)]


def requests_path(result_path: str | Path, requests_file: Any) -> Path:
    """The per-request file of a result: its ``requests_file`` (the name the result gives)
    beside the result file, or else ``<name>.requests.jsonl`` beside it."""
    rp = Path(result_path)
    name = requests_file
    if isinstance(name, str) and name:
        return rp.parent / Path(name).name
    stem = rp.name[: -len(".json")] if rp.name.endswith(".json") else rp.name
    return rp.with_name(stem + ".requests.jsonl")


def load_request_records(
    result_path: str | Path, requests_file: Any
) -> list[RequestRecord] | None:
    """The per-request records of a result (``requests_file``: the name it gives), or None
    when its requests file is missing."""
    path = requests_path(result_path, requests_file)
    if not path.is_file():
        return None
    try:
        return read_requests(path)
    except (OSError, ValueError, TypeError) as exc:
        raise ResultFileError(f"{path}: not a readable requests file: {exc}") from None


# --- history -----------------------------------------------------------------------------------


def _finite(value: Any) -> Any:
    """``value`` with NaN/inf floats replaced by None (the history stores strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


#: What the history leaves out of a result's ``quality`` section: the per-item and per-token
#: records (the result file, kept in the history too, holds them).
_QUALITY_RECORDS = ("outcomes", "passages")


def history_summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the history stores of a result: its summary, plus ``cost``, ``energy`` and
    ``reasoning`` subtrees when present (so ``cost.usd_per_1m_output_tokens`` and
    ``reasoning.reasoning_tokens.mean`` are metrics like ``ttft_ms.p99``), and the ``quality``
    section's figures (``quality.accuracy``, ``quality.perplexity``,
    ``quality.reference.mean_kl``, ...; not its per-item and per-token records)."""
    summary = dict(_as_dict(result.get("summary")))
    for key in ("cost", "energy", "reasoning"):
        if isinstance(result.get(key), dict):
            summary[key] = result[key]
    quality = result.get("quality")
    if isinstance(quality, dict):
        summary["quality"] = {k: v for k, v in quality.items() if k not in _QUALITY_RECORDS}
    out = _finite(summary)
    assert isinstance(out, dict)
    return out


def run_files_of(result: Mapping[str, Any], result_path: str | Path | None) -> history.RunFiles:
    """What the history keeps of a result's files: the result file's text as written (the
    document as JSON when there is no file) and its per-request records when they are beside it.
    """
    text = None
    if result_path is not None and Path(result_path).is_file():
        try:
            text = Path(result_path).read_text()
        except OSError:
            text = None
    if text is None:
        text = json.dumps(result, indent=2, default=str) + "\n"
    requests = None
    if result_path is not None:
        rp = requests_path(result_path, result.get("requests_file"))
        try:
            requests = rp.read_bytes() if rp.is_file() else None
        except OSError:
            requests = None
    return history.RunFiles(text, requests)


def record_result(
    db_path: str | Path | history_database.Location,
    result: Mapping[str, Any],
    result_path: str | Path | None,
) -> str:
    """Record one result in the history at ``db_path`` (a path or URL, see
    :func:`infer_prof.results.history_database.parse_location`); returns its fingerprint.

    Stores the run id, start time, :func:`config_fingerprint`, :func:`history_summary`, model,
    GPU (:func:`gpu_name`), precision, concurrency, workload, labels, the git revision from the
    environment, the result path, whether the run completed, the readable run name, and the
    result file with its per-request records (:func:`run_files_of`). Recording the same run id
    again replaces it.
    Raises :class:`infer_prof.results.history_database.HistoryError` when the history cannot be
    written.
    """
    typed = decode_result(result)  # the document as written; its summary and text kept as is
    fp = config_fingerprint(typed)
    labels = typed.labels or typed.config.labels
    concurrency = typed.config.concurrency
    history.record_run(db_path, history.RunEntry(
        run_id=typed.run_id,
        started_at=str(typed.started_at),
        config_fingerprint=fp,
        summary=history_summary(result),
        model=model_name(typed),
        gpu=gpu_name(typed),
        precision=precision_of(typed),
        concurrency=concurrency if isinstance(concurrency, int) else None,
        workload=config_fields(typed)["workload"],
        labels={str(k): str(v) for k, v in labels.items()},
        git_rev=typed.environment.git_revision if typed.environment else None,
        result_path=str(result_path) if result_path is not None else None,
        complete=typed.complete,
        files=run_files_of(result, result_path),
        run_name=readable_name(typed),
    ))
    return fp


def history_result(
    db: str | Path | history_database.Location, run_id: str
) -> tuple[Result, list[RequestRecord] | None] | None:
    """:func:`history_document` with the document typed (:func:`schema.typed_document`: its
    frontier axes derived where an older file lacks them). Raises HistoryError, or
    ResultFileError when the stored text is damaged or not of the result type."""
    kept = history_document(db, run_id)
    if kept is None:
        return None
    try:
        return typed_document(kept[0]), kept[1]
    except msgspec.ValidationError as exc:
        raise ResultFileError(f"history:{run_id}: stored result is damaged: {exc}") from None


def history_document(
    db: str | Path | history_database.Location, run_id: str
) -> tuple[dict[str, Any], list[RequestRecord] | None] | None:
    """A run's result document (parsed JSON) and per-request records as the history keeps them
    (records None when they were not kept), or None when the history holds no result file for
    it (not recorded, or recorded before schema 2). Raises HistoryError, or ResultFileError when
    the stored text is damaged."""
    files = history.load_files(db, run_id)
    if files is None:
        return None
    try:
        result = files.result()
        records = None if files.requests_jsonl is None else parse_requests(files.requests_jsonl)
    except (ValueError, TypeError, AssertionError) as exc:
        raise ResultFileError(f"history:{run_id}: stored result is damaged: {exc}") from None
    return result, records


def export_run(files: history.RunFiles, folder: Path, run_id: str) -> tuple[Path, Path | None]:
    """Write a run's kept files into ``folder``: ``<run_id>.json`` (``run_id``: the file name to
    use, the run's name as a rule; the text as recorded) and its
    requests file under the name the result gives (``requests_file``); returns both paths (the
    second None when no records were kept)."""
    result_path = folder / f"{run_id}.json"
    write_file(result_path, files.result_text)
    if files.requests_jsonl is None:
        return result_path, None
    try:
        rp = requests_path(result_path, files.result().get("requests_file"))
    except (ValueError, AssertionError):
        rp = folder / f"{run_id}.requests.jsonl"
    write_file(rp, files.requests_jsonl)
    return result_path, rp
