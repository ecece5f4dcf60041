"""Many result files at once: loading files/folders/globs, configuration fingerprints, history.

* :func:`load_results` turns command-line arguments (files, folders, glob patterns) into
  ``(path, result dict)`` pairs.
* :func:`config_fields` / :func:`config_fingerprint`: the fields that make two runs "the same
  configuration", and a stable short hash of them (the key of the run history).
* :func:`settings_fields` / :func:`differing_fields`: which settings differ between runs (what
  ``compare`` and ``regress`` refuse to mix without ``--force``).
* :func:`requests_path` / :func:`load_request_records`: the per-request records beside a result.
* :func:`record_result`: record one result in the history database (the runner calls it).
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from infer_prof.core.metrics import RequestRecord
from infer_prof.results import history, history_database
from infer_prof.results.run_ids import run_name_of
from infer_prof.results.schema import RESULT_KIND, ResultFileError, load_result
from infer_prof.results.store import parse_requests, read_requests, write_file

FINGERPRINT_VERSION = 2
FINGERPRINT_LENGTH = 16

# The fields of config_fields(), in order. Changing this list changes every fingerprint: bump
# FINGERPRINT_VERSION when it changes (it is part of the hashed text).
FINGERPRINT_FIELDS = (
    "model",
    "engine_path",
    "precision",
    "quantization",
    "dtype",
    "concurrency",
    "request_rate",
    "input_len",
    "output_len",
    "workload",
    "load_format",
    "gpu",
    "gpu_count",
    "served_model",
)

# Engine settings that change performance; they must match for a fair comparison, but they are
# not part of the fingerprint (history keys stay stable as options are added).
ENGINE_SETTINGS = (
    "tensor_parallel_size",
    "max_model_len",
    "enforce_eager",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "engine_args",
)

# Fields that describe where a run ran rather than what it ran: compare ignores them.
PLACEMENT_FIELDS = ("gpu", "gpu_count", "labels", "host", "environment")


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def gpu_name(result: Mapping[str, Any]) -> str:
    """The GPU the run used: ``environment.gpu_name`` (what NVML saw), else ``gpu.key`` (the GPU
    named with ``--gpu``, e.g. for an endpoint on another machine), else ``"cpu"``."""
    env = _as_dict(result.get("environment"))
    name = env.get("gpu_name") or _as_dict(result.get("gpu")).get("key")
    return str(name) if name else "cpu"


def gpu_count(result: Mapping[str, Any]) -> int:
    """How many GPUs: ``environment.gpu_count`` when NVML saw a GPU, else ``gpu.count`` when a
    GPU was named (``gpu.key``), else 0."""
    env = _as_dict(result.get("environment"))
    declared = _as_dict(result.get("gpu"))
    if env.get("gpu_name"):
        count = env.get("gpu_count")
    else:
        count = declared.get("count") if declared.get("key") else 0
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def device_name(result: Mapping[str, Any]) -> str:
    """What the run ran on, for telling configurations apart: :func:`gpu_name`, or without a GPU
    ``cpu: <CPU model>``."""
    name = gpu_name(result)
    if name != "cpu":
        return name
    cpu = _as_dict(result.get("environment")).get("cpu")
    return f"cpu: {cpu}" if cpu else "cpu"


def precision_of(result: Mapping[str, Any]) -> str:
    """``plan.precision``, else the result's ``precision``, else ``config.quantization``, else
    ``config.dtype``, else ``"auto"``."""
    plan = _as_dict(result.get("plan"))
    cfg = _as_dict(result.get("config"))
    value = (
        plan.get("precision")
        or result.get("precision")
        or cfg.get("quantization")
        or cfg.get("dtype")
        or "auto"
    )
    return str(value)


def model_name(result: Mapping[str, Any]) -> str | None:
    """``model.name``, else ``config.model``."""
    model = _as_dict(result.get("model"))
    name = model.get("name") or _as_dict(result.get("config")).get("model")
    return str(name) if name else None


def config_fields(result: Mapping[str, Any]) -> dict[str, Any]:
    """The fields that define "the same configuration" (:data:`FINGERPRINT_FIELDS`).

    model name; engine path (``model.engine_path``, else the hub id); precision
    (:func:`precision_of`), quantization and dtype; concurrency and request rate; input and
    output length; workload name; load format; GPU name (``cpu: <model>`` without one) and count;
    the served model name; the dataset's SHA-256 (``dataset_sha256``) only for a result whose
    prompts came from a dataset; the session settings (``sessions``) only for a multi-turn
    run; ``api`` only for a chat-API result (the chat template adds prompt tokens, so it is
    another configuration). Absent fields are None, so a field added to results later does not
    change the fingerprint of older ones.
    """
    cfg = _as_dict(result.get("config"))
    model = _as_dict(result.get("model"))
    server = _as_dict(result.get("server"))
    workload = _as_dict(result.get("workload")).get("name") or cfg.get("workload")
    if isinstance(workload, dict):
        workload = workload.get("name")
    load = _as_dict(result.get("load"))
    fields = {
        "model": model_name(result),
        "engine_path": model.get("engine_path") or model.get("hub_id") or model.get("path"),
        "precision": precision_of(result),
        "quantization": cfg.get("quantization"),
        "dtype": cfg.get("dtype"),
        "concurrency": cfg.get("concurrency"),
        "request_rate": cfg.get("request_rate") or cfg.get("rate") or load.get("rate"),
        "burstiness": load.get("burstiness"),
        "max_concurrency": load.get("max_concurrency"),
        "input_len": cfg.get("input_len"),
        "output_len": cfg.get("output_len"),
        "workload": workload,
        "load_format": cfg.get("load_format"),
        "gpu": device_name(result),
        "gpu_count": gpu_count(result),
        "served_model": server.get("served_model_name") or cfg.get("served_model_name"),
    }
    dataset = _as_dict(cfg.get("dataset"))
    if dataset:  # only results with a dataset carry the field: older fingerprints stay the same
        fields["dataset_sha256"] = dataset.get("sha256")
    if cfg.get("api") == "chat":  # likewise: completions results keep their fingerprints
        fields["api"] = "chat"
    trace = _as_dict(cfg.get("trace"))
    if trace:  # likewise: a replayed trace, its window and time scale
        fields["trace_sha256"] = trace.get("sha256")
        fields["trace_window"] = trace.get("window_s")
        fields["trace_time_scale"] = trace.get("time_scale")
    sessions = _as_dict(cfg.get("sessions"))
    if sessions:  # likewise: multi-turn sessions (turns, think time, source, prompt, dataset)
        ds = _as_dict(sessions.get("dataset"))
        kept = {k: sessions.get(k) for k in ("turns", "think_time_s", "source", "prompt")}
        kept["dataset_sha256"] = ds.get("sha256") if ds else None
        fields["sessions"] = kept
    return fields


def config_fingerprint(result: Mapping[str, Any]) -> str:
    """A stable hash of :func:`config_fields`: the first 16 hex digits of SHA-256 of
    ``v<FINGERPRINT_VERSION>:`` + the fields as canonical JSON (sorted keys, no spaces)."""
    fields = config_fields(result)
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(f"v{FINGERPRINT_VERSION}:{text}".encode()).hexdigest()
    return digest[:FINGERPRINT_LENGTH]


def settings_fields(result: Mapping[str, Any]) -> dict[str, Any]:
    """Everything :func:`differing_fields` looks at: :func:`config_fields`, the engine settings
    (:data:`ENGINE_SETTINGS`), and the placement fields labels and host."""
    cfg = _as_dict(result.get("config"))
    env = _as_dict(result.get("environment"))
    out = config_fields(result)
    for key in ENGINE_SETTINGS:
        value = cfg.get(key)
        out[key] = list(value) if isinstance(value, (list, tuple)) else value
    out["labels"] = dict(_as_dict(result.get("labels")) or _as_dict(cfg.get("labels")))
    out["host"] = env.get("host")
    return out


def differing_fields(
    results: Sequence[Mapping[str, Any]], ignore: Iterable[str] = ()
) -> dict[str, list[Any]]:
    """The settings that are not the same in every result: ``{field: [value per result]}``.

    Fields named in ``ignore`` are skipped; ``"environment"`` in ``ignore`` also skips ``host``.
    The order of the dict follows :func:`settings_fields`.
    """
    skip = set(ignore)
    if "environment" in skip:
        skip.add("host")
    all_fields = [settings_fields(r) for r in results]
    if not all_fields:
        return {}
    out: dict[str, list[Any]] = {}
    keys = list(dict.fromkeys(k for f in all_fields for k in f))  # a field only some results have
    for key in keys:
        if key in skip:
            continue
        values = [f.get(key) for f in all_fields]
        canon = {json.dumps(v, sort_keys=True, default=str) for v in values}
        if len(canon) > 1:
            out[key] = values
    return out


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


def requests_path(result_path: str | Path, result: Mapping[str, Any]) -> Path:
    """The per-request file of a result: ``requests_file`` beside the result file, or else
    ``<name>.requests.jsonl`` beside it."""
    rp = Path(result_path)
    name = result.get("requests_file")
    if isinstance(name, str) and name:
        return rp.parent / Path(name).name
    stem = rp.name[: -len(".json")] if rp.name.endswith(".json") else rp.name
    return rp.with_name(stem + ".requests.jsonl")


def load_request_records(
    result_path: str | Path, result: Mapping[str, Any]
) -> list[RequestRecord] | None:
    """The per-request records of a result, or None when its requests file is missing."""
    path = requests_path(result_path, result)
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


def history_summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the history stores of a result: its summary, plus ``cost`` and ``energy`` subtrees
    when present (so ``cost.usd_per_1m_output_tokens`` is a metric like ``ttft_ms.p99``)."""
    summary = dict(_as_dict(result.get("summary")))
    for key in ("cost", "energy"):
        if isinstance(result.get(key), dict):
            summary[key] = result[key]
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
        rp = requests_path(result_path, result)
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
    cfg = _as_dict(result.get("config"))
    env = _as_dict(result.get("environment"))
    fields = config_fields(result)
    fp = config_fingerprint(result)
    labels = _as_dict(result.get("labels")) or _as_dict(cfg.get("labels"))
    concurrency = cfg.get("concurrency")
    history.record_run(db_path, history.RunEntry(
        run_id=str(result["run_id"]),
        started_at=str(result["started_at"]),
        config_fingerprint=fp,
        summary=history_summary(result),
        model=model_name(result),
        gpu=gpu_name(result),
        precision=precision_of(result),
        concurrency=concurrency if isinstance(concurrency, int) else None,
        workload=fields["workload"],
        labels={str(k): str(v) for k, v in labels.items()},
        git_rev=env.get("git_revision"),
        result_path=str(result_path) if result_path is not None else None,
        complete=bool(result.get("complete", True)),
        files=run_files_of(result, result_path),
        run_name=run_name_of(result),
    ))
    return fp


def history_result(
    db: str | Path | history_database.Location, run_id: str
) -> tuple[dict[str, Any], list[RequestRecord] | None] | None:
    """A run's result document and per-request records as the history keeps them (records None
    when they were not kept), or None when the history holds no result file for it (not
    recorded, or recorded before schema 2). Raises HistoryError, or ResultFileError when the
    stored text is damaged."""
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
        rp = requests_path(result_path, files.result())
    except (ValueError, AssertionError):
        rp = folder / f"{run_id}.requests.jsonl"
    write_file(rp, files.requests_jsonl)
    return result_path, rp
