"""Run history records: recording a run (its summary, flattened metrics, labels and files) and
the queries over recorded runs (listing, baselines for the gate, metric series, kept files).

Where the database is and how it is reached is :mod:`infer_prof.results.history_database`; its
tables are :mod:`infer_prof.results.history_schema`.

``started_at`` is stored as UTC ISO 8601 with a fixed width (``2024-05-01T02:00:00.000000Z``) so
that text order is time order. Metric names are the summary's keys joined with dots
(``ttft_ms.p99``, ``output_throughput``, ``cost.usd_per_1m_output_tokens``); nulls, booleans,
strings and non-finite numbers are not stored. Runs are keyed by ``run_id``, unique per run (a
UUIDv7; results of earlier releases have their readable name there): recording a run_id again
replaces that run (a retried upload or a second import is idempotent), while two runs with the
same readable ``run_name`` are two rows.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infer_prof.results import history_database
from infer_prof.results.history_database import Location
from infer_prof.results.history_schema import schema

if TYPE_CHECKING:
    from sqlalchemy import Connection

# --- records ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRecord:
    """One row of ``runs``, with labels and summary decoded."""

    run_id: str
    started_at: str
    config_fingerprint: str
    model: str | None
    gpu: str | None
    precision: str | None
    concurrency: int | None
    workload: str | None
    labels: dict[str, str]
    git_rev: str | None
    result_path: str | None
    summary: dict[str, Any]
    complete: bool
    run_name: str = ""  # readable, not unique (run_id for runs of earlier releases)

    def metrics(self) -> dict[str, float]:
        """The summary flattened into metric names (see :func:`flatten_summary`)."""
        return flatten_summary(self.summary)


@dataclass(frozen=True)
class RunFiles:
    """What a run wrote to disk: the result file's text and its per-request records (the
    ``.requests.jsonl`` bytes, None when they were not kept)."""

    result_text: str
    requests_jsonl: bytes | None = None

    def result(self) -> dict[str, Any]:
        """The result document."""
        out = json.loads(self.result_text)
        assert isinstance(out, dict)
        return out


def flatten_summary(summary: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a nested summary as ``{"ttft_ms.p99": 41.2, "output_throughput": ...}``.

    Keys are joined with ".". None, booleans, strings, lists and NaN/inf are skipped: a metric that
    was not measured has no row, never a 0.
    """
    out: dict[str, float] = {}
    for key, value in summary.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_summary(value, prefix=name + "."))
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, (int, float)) and math.isfinite(value):
            out[name] = float(value)
    return out


def normalize_started_at(started_at: str | datetime) -> str:
    """``started_at`` as fixed-width UTC ISO 8601, e.g. ``2024-05-01T02:00:00.000000Z``.

    Accepts a datetime or an ISO string (``Z`` or an offset allowed). A naive time is taken as UTC.
    """
    dt = datetime.fromisoformat(started_at) if isinstance(started_at, str) else started_at
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class RunEntry:
    """One run as :func:`record_run` records it: its unique ``run_id``, start time (datetime or
    ISO string, see :func:`normalize_started_at`), configuration fingerprint and summary (JSON-
    serialisable, flattened into metrics by :func:`flatten_summary`), with what it ran on,
    labels, the git revision, where its result file is, whether it completed, the files it
    wrote (kept in the history when given) and its readable name (default: ``run_id``)."""

    run_id: str
    started_at: str | datetime
    config_fingerprint: str
    summary: Mapping[str, Any]
    _: KW_ONLY
    model: str | None = None
    gpu: str | None = None
    precision: str | None = None
    concurrency: int | None = None
    workload: str | None = None
    labels: Mapping[str, str] | None = None
    git_rev: str | None = None
    result_path: str | None = None
    complete: bool = True
    files: RunFiles | None = None
    run_name: str | None = None


def record_run(db_path: str | Path | Location, entry: RunEntry) -> None:
    """Record one run, its flattened metrics, labels and (if given) files in one transaction,
    replacing a run of the same run_id.

    ``db_path`` is a location (see :func:`parse_location`); a SQLite file and its folder are
    created if needed. Raises :class:`HistoryError`.
    """
    e = entry
    run_id = e.run_id
    if not run_id:
        raise ValueError("run_id must be a non-empty string")
    if not e.config_fingerprint:
        raise ValueError("config_fingerprint must be a non-empty string")
    labels_d = {str(k): str(v) for k, v in (e.labels or {}).items()}
    row = {
        "run_id": run_id,
        "started_at": normalize_started_at(e.started_at),
        "config_fingerprint": e.config_fingerprint,
        "model": e.model,
        "gpu": e.gpu,
        "precision": e.precision,
        "concurrency": e.concurrency,
        "workload": e.workload,
        "labels_json": json.dumps(labels_d, sort_keys=True),
        "git_rev": e.git_rev,
        "result_path": e.result_path,
        "summary_json": json.dumps(e.summary, sort_keys=True, allow_nan=False),
        "complete": int(bool(e.complete)),
        "run_name": e.run_name or run_id,
    }
    metric_rows = [
        {"run_id": run_id, "name": k, "value": v} for k, v in flatten_summary(e.summary).items()
    ]
    label_rows = [{"run_id": run_id, "key": k, "value": v} for k, v in labels_d.items()]
    file_row = None
    if e.files is not None:
        file_row = {
            "run_id": run_id,
            "result_json": e.files.result_text,
            "requests_gz": None
            if e.files.requests_jsonl is None
            else gzip.compress(e.files.requests_jsonl, compresslevel=6, mtime=0),
        }

    from sqlalchemy import delete, insert

    t = schema()

    def write(conn: Connection) -> None:
        for table in (t.run_files, t.metrics, t.run_labels, t.runs):
            conn.execute(delete(table).where(table.c.run_id == run_id))
        conn.execute(insert(t.runs).values(**row))
        if metric_rows:
            conn.execute(insert(t.metrics), metric_rows)
        if label_rows:
            conn.execute(insert(t.run_labels), label_rows)
        if file_row is not None:
            conn.execute(insert(t.run_files).values(**file_row))

    history_database.write(db_path, write)


def _record(row: Any) -> RunRecord:
    m = row._mapping
    return RunRecord(
        run_id=m["run_id"],
        started_at=m["started_at"],
        config_fingerprint=m["config_fingerprint"],
        model=m["model"],
        gpu=m["gpu"],
        precision=m["precision"],
        concurrency=m["concurrency"],
        workload=m["workload"],
        labels=json.loads(m["labels_json"]),
        git_rev=m["git_rev"],
        result_path=m["result_path"],
        summary=json.loads(m["summary_json"]),
        complete=bool(m["complete"]),
        run_name=m["run_name"] or m["run_id"],
    )


def _newest_first(stmt: Any) -> Any:
    runs = schema().runs
    return stmt.order_by(runs.c.started_at.desc(), runs.c.id.desc())


def list_runs(
    db_path: str | Path | Location,
    *,
    model: str | None = None,
    fingerprint: str | None = None,
    label: str | None = None,
    limit: int = 50,
) -> list[RunRecord]:
    """Recorded runs, newest first, optionally filtered (all filters must hold).

    ``label`` is ``"KEY=VALUE"`` (that label with that value) or ``"KEY"`` (that label present).
    A missing database has no runs. ``limit`` <= 0 means no limit.
    """
    from sqlalchemy import select

    runs, run_labels = schema().runs, schema().run_labels
    stmt = select(runs)
    if model is not None:
        stmt = stmt.where(runs.c.model == model)
    if fingerprint is not None:
        stmt = stmt.where(runs.c.config_fingerprint == fingerprint)
    if label is not None:
        key, sep, value = label.partition("=")
        sub = select(run_labels.c.run_id).where(run_labels.c.key == key)
        if sep:
            sub = sub.where(run_labels.c.value == value)
        stmt = stmt.where(runs.c.run_id.in_(sub))
    stmt = _newest_first(stmt)
    if limit > 0:
        stmt = stmt.limit(limit)
    return [_record(r) for r in history_database.read(db_path, stmt)]


def get_runs(db_path: str | Path | Location, run_ids: Iterable[str]) -> dict[str, RunRecord]:
    """The runs of these ids that are recorded, by id."""
    from sqlalchemy import select

    runs = schema().runs
    ids = sorted(set(run_ids))
    out: dict[str, RunRecord] = {}
    for i in range(0, len(ids), 500):
        stmt = select(runs).where(runs.c.run_id.in_(ids[i : i + 500]))
        out.update((r.run_id, r) for r in map(_record, history_database.read(db_path, stmt)))
    return out


def last_runs(
    db_path: str | Path | Location,
    fingerprint: str,
    n: int,
    *,
    complete_only: bool = True,
    exclude_run_id: str | None = None,
) -> list[RunRecord]:
    """The ``n`` newest runs of one configuration, newest first (a baseline for the gate; the
    index ``runs_fp_time`` serves it).

    Incomplete runs are left out unless ``complete_only`` is False; ``exclude_run_id`` leaves out
    the run being judged, so that it is not part of its own baseline.
    """
    from sqlalchemy import select

    runs = schema().runs
    stmt = select(runs).where(runs.c.config_fingerprint == fingerprint)
    if complete_only:
        stmt = stmt.where(runs.c.complete == 1)
    if exclude_run_id is not None:
        stmt = stmt.where(runs.c.run_id != exclude_run_id)
    stmt = _newest_first(stmt).limit(max(n, 0))
    return [_record(r) for r in history_database.read(db_path, stmt)]


def metric_series(
    db_path: str | Path | Location, fingerprint: str, metric: str, *, complete_only: bool = True
) -> list[tuple[str, str, float]]:
    """``(started_at, run_id, value)`` of one metric for one configuration, oldest first.

    Runs that lack the metric (null in their summary) are absent; incomplete runs are left out
    unless ``complete_only`` is False.
    """
    from sqlalchemy import select

    runs, metrics = schema().runs, schema().metrics
    stmt = (
        select(runs.c.started_at, runs.c.run_id, metrics.c.value)
        .select_from(metrics.join(runs, runs.c.run_id == metrics.c.run_id))
        .where(runs.c.config_fingerprint == fingerprint, metrics.c.name == metric)
    )
    if complete_only:
        stmt = stmt.where(runs.c.complete == 1)
    stmt = stmt.order_by(runs.c.started_at.asc(), runs.c.id.asc())
    return [(r[0], r[1], float(r[2])) for r in history_database.read(db_path, stmt)]


def metric_names(db_path: str | Path | Location, fingerprint: str | None = None) -> list[str]:
    """The metric names recorded (for one configuration if given), sorted."""
    from sqlalchemy import select

    runs, metrics = schema().runs, schema().metrics
    stmt = select(metrics.c.name).distinct()
    if fingerprint is not None:
        stmt = stmt.select_from(metrics.join(runs, runs.c.run_id == metrics.c.run_id)).where(
            runs.c.config_fingerprint == fingerprint
        )
    return [r[0] for r in history_database.read(db_path, stmt.order_by(metrics.c.name))]


def load_files(db_path: str | Path | Location, run_id: str) -> RunFiles | None:
    """The result file text and per-request records kept for a run, or None (not recorded, or
    recorded before schema 2 kept files)."""
    from sqlalchemy import select

    run_files = schema().run_files
    stmt = select(run_files.c.result_json, run_files.c.requests_gz).where(
        run_files.c.run_id == run_id
    )
    rows = history_database.read(db_path, stmt)
    if not rows:
        return None
    result_json, requests_gz = rows[0]
    return RunFiles(
        result_json, None if requests_gz is None else gzip.decompress(bytes(requests_gz))
    )


def count_runs(db_path: str | Path | Location) -> int:
    """How many runs are recorded."""
    from sqlalchemy import func, select

    runs = schema().runs
    rows = history_database.read(db_path, select(func.count()).select_from(runs))
    return int(rows[0][0]) if rows else 0


def explain_baseline_query(db_path: str | Path | Location, fingerprint: str) -> str:
    """The database's query plan for :func:`last_runs` (to see that ``runs_fp_time`` serves
    ``history:N``)."""
    from sqlalchemy import select, text

    runs = schema().runs
    loc, eng = history_database.ready(db_path, write=True)
    assert eng is not None
    stmt = _newest_first(
        select(runs).where(runs.c.config_fingerprint == fingerprint, runs.c.complete == 1)
    ).limit(7)
    sql = str(stmt.compile(eng, compile_kwargs={"literal_binds": True}))
    prefix = "EXPLAIN QUERY PLAN " if loc.sqlite_path is not None else "EXPLAIN "

    def attempt() -> str:
        with history_database.connection(loc, eng) as conn:
            return "\n".join(" ".join(str(c) for c in r) for r in conn.execute(text(prefix + sql)))

    return history_database.retry(loc, attempt)


# --- launch-to-launch spread ----------------------------------------------------------------


@dataclass(frozen=True)
class LaunchSpread:
    """The measured spread between runs of one configuration for one metric: ``cv`` is the
    coefficient of variation between runs as a fraction (sample stdev / mean over the runs'
    values, 0.08 = 8 %), measured on ``n_runs`` runs, at ``measured_at`` (UTC ISO 8601),
    by ``source`` (free text: the command or the runs it came from)."""

    cv: float
    n_runs: int
    measured_at: str = ""
    source: str | None = None


def record_launch_spread(
    db_path: str | Path | Location,
    fingerprint: str,
    metric: str,
    cv: float,
    n_runs: int,
    *,
    measured_at: str | datetime | None = None,
    source: str | None = None,
) -> None:
    """Record the launch-to-launch spread of ``metric`` (a history metric name such as
    ``tpot_ms.p50`` or ``output_throughput``) for configuration ``fingerprint``
    (:func:`infer_prof.results.identity.config_fingerprint`): ``cv`` = sample stdev / mean of the
    metric over ``n_runs`` runs (a fraction, >= 0; ``n_runs`` >= 2), replacing an earlier
    measurement of the same pair. ``measured_at`` defaults to now. Raises ValueError on a bad
    value, :class:`HistoryError` on a database problem.
    """
    if not fingerprint or not metric:
        raise ValueError("fingerprint and metric must be non-empty strings")
    if not (math.isfinite(cv) and cv >= 0.0):
        raise ValueError(f"cv must be a finite fraction >= 0, got {cv!r}")
    if n_runs < 2:
        raise ValueError(f"a spread between runs needs >= 2 runs, got {n_runs}")
    row = {
        "config_fingerprint": fingerprint,
        "metric": metric,
        "cv": float(cv),
        "n_runs": int(n_runs),
        "measured_at": normalize_started_at(measured_at or datetime.now(UTC)),
        "source": source,
    }
    from sqlalchemy import delete, insert

    table = schema().launch_spread

    def write(conn: Connection) -> None:
        conn.execute(
            delete(table).where(table.c.config_fingerprint == fingerprint, table.c.metric == metric)
        )
        conn.execute(insert(table).values(**row))

    history_database.write(db_path, write)


def launch_spreads(db_path: str | Path | Location, fingerprint: str) -> dict[str, LaunchSpread]:
    """The recorded launch-to-launch spreads of one configuration, by metric name (empty when
    none was measured or the database is missing)."""
    from sqlalchemy import select

    t = schema().launch_spread
    stmt = select(t.c.metric, t.c.cv, t.c.n_runs, t.c.measured_at, t.c.source).where(
        t.c.config_fingerprint == fingerprint
    )
    return {
        r[0]: LaunchSpread(float(r[1]), int(r[2]), r[3], r[4])
        for r in history_database.read(db_path, stmt)
    }


def launch_spread(db_path: str | Path | Location, fingerprint: str) -> dict[str, tuple[float, int]]:
    """``{metric: (cv, n_runs)}``: :func:`launch_spreads` without when and how (cv a fraction)."""
    return {m: (s.cv, s.n_runs) for m, s in launch_spreads(db_path, fingerprint).items()}
