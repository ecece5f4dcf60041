"""Run history: a SQLite database (by default results/history.sqlite) of every recorded run.

Two tables::

    runs(id, run_id UNIQUE, started_at, config_fingerprint, model, gpu, precision, concurrency,
         workload, labels_json, git_rev, result_path, summary_json, complete)
    metrics(run_id, name, value)          -- one row per numeric leaf of the summary
    run_labels(run_id, key, value)        -- labels, one row each, for exact filtering

``started_at`` is stored as UTC ISO 8601 with a fixed width (``2024-05-01T02:00:00.000000Z``) so
that text order is time order. Metric names are the summary's keys joined with dots
(``ttft_ms.p99``, ``output_throughput``, ``cost.usd_per_1m_output_tokens``); nulls, booleans,
strings and non-finite numbers are not stored.

Concurrency: the database is in WAL mode with a busy timeout; every write is one ``BEGIN
IMMEDIATE`` transaction (the write lock is taken up front, so the busy handler applies and no
read-to-write upgrade can deadlock), retried with backoff if SQLite still reports the database as
busy or locked. Two processes recording at once lose nothing. Recording a run_id again replaces
that run (a retried upload is idempotent).
"""

from __future__ import annotations

import json
import math
import random
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 30_000
MAX_ATTEMPTS = 20

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    started_at TEXT NOT NULL,
    config_fingerprint TEXT NOT NULL,
    model TEXT,
    gpu TEXT,
    precision TEXT,
    concurrency INTEGER,
    workload TEXT,
    labels_json TEXT NOT NULL DEFAULT '{}',
    git_rev TEXT,
    result_path TEXT,
    summary_json TEXT NOT NULL,
    complete INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_fp_time ON runs(config_fingerprint, started_at);
CREATE INDEX IF NOT EXISTS runs_model ON runs(model);
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX IF NOT EXISTS metrics_name ON metrics(name, run_id);
CREATE TABLE IF NOT EXISTS run_labels (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX IF NOT EXISTS run_labels_kv ON run_labels(key, value);
"""


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

    def metrics(self) -> dict[str, float]:
        """The summary flattened into metric names (see :func:`flatten_summary`)."""
        return flatten_summary(self.summary)


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


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    msg = str(exc).lower()
    return "locked" in msg or "busy" in msg


def _retry(fn: Callable[[], _T]) -> _T:
    """Run ``fn``, retrying on SQLITE_BUSY / "database is locked" with jittered backoff."""
    delay = 0.01
    for attempt in range(MAX_ATTEMPTS):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or attempt == MAX_ATTEMPTS - 1:
                raise
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")


def _connect(db_path: str | Path) -> sqlite3.Connection:
    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
        _retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
        conn.execute("PRAGMA synchronous = NORMAL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version < SCHEMA_VERSION:
            _retry(lambda: _create_schema(conn))
        elif version > SCHEMA_VERSION:
            raise RuntimeError(
                f"{path}: history schema version {version} is newer than this infer-prof "
                f"understands ({SCHEMA_VERSION}); upgrade infer-prof"
            )
    except BaseException:
        conn.close()
        raise
    return conn


def _create_schema(conn: sqlite3.Connection) -> None:
    with _transaction(conn):
        for stmt in _SCHEMA.split(";"):
            if stmt.strip():
                conn.execute(stmt)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


@contextmanager
def _open(db_path: str | Path) -> Iterator[sqlite3.Connection]:
    conn = _retry(lambda: _connect(db_path))
    try:
        yield conn
    finally:
        conn.close()


def record_run(
    db_path: str | Path,
    *,
    run_id: str,
    started_at: str | datetime,
    config_fingerprint: str,
    summary: Mapping[str, Any],
    model: str | None = None,
    gpu: str | None = None,
    precision: str | None = None,
    concurrency: int | None = None,
    workload: str | None = None,
    labels: Mapping[str, str] | None = None,
    git_rev: str | None = None,
    result_path: str | None = None,
    complete: bool = True,
) -> None:
    """Record one run and its flattened metrics in one transaction (replacing a same run_id).

    Creates the database and its parent folder if needed. ``summary`` must be JSON-serialisable.
    """
    if not run_id:
        raise ValueError("run_id must be a non-empty string")
    if not config_fingerprint:
        raise ValueError("config_fingerprint must be a non-empty string")
    started = normalize_started_at(started_at)
    labels_d = {str(k): str(v) for k, v in (labels or {}).items()}
    summary_json = json.dumps(summary, sort_keys=True, allow_nan=False)
    labels_json = json.dumps(labels_d, sort_keys=True)
    metric_rows = [(run_id, k, v) for k, v in flatten_summary(summary).items()]
    label_rows = [(run_id, k, v) for k, v in labels_d.items()]
    row = (
        run_id,
        started,
        config_fingerprint,
        model,
        gpu,
        precision,
        concurrency,
        workload,
        labels_json,
        git_rev,
        result_path,
        summary_json,
        int(bool(complete)),
    )

    def write(conn: sqlite3.Connection) -> None:
        with _transaction(conn):
            conn.execute("DELETE FROM metrics WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM run_labels WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            conn.execute(
                "INSERT INTO runs (run_id, started_at, config_fingerprint, model, gpu, precision,"
                " concurrency, workload, labels_json, git_rev, result_path, summary_json, complete)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            conn.executemany(
                "INSERT INTO metrics (run_id, name, value) VALUES (?, ?, ?)", metric_rows
            )
            conn.executemany(
                "INSERT INTO run_labels (run_id, key, value) VALUES (?, ?, ?)", label_rows
            )

    with _open(db_path) as conn:
        _retry(lambda: write(conn))


def _record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        run_id=row["run_id"],
        started_at=row["started_at"],
        config_fingerprint=row["config_fingerprint"],
        model=row["model"],
        gpu=row["gpu"],
        precision=row["precision"],
        concurrency=row["concurrency"],
        workload=row["workload"],
        labels=json.loads(row["labels_json"]),
        git_rev=row["git_rev"],
        result_path=row["result_path"],
        summary=json.loads(row["summary_json"]),
        complete=bool(row["complete"]),
    )


def _read(db_path: str | Path, sql: str, params: list[Any]) -> list[sqlite3.Row]:
    if not Path(db_path).exists():
        return []
    with _open(db_path) as conn:
        return _retry(lambda: conn.execute(sql, params).fetchall())


def list_runs(
    db_path: str | Path,
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
    where: list[str] = []
    params: list[Any] = []
    if model is not None:
        where.append("model = ?")
        params.append(model)
    if fingerprint is not None:
        where.append("config_fingerprint = ?")
        params.append(fingerprint)
    if label is not None:
        key, sep, value = label.partition("=")
        if sep:
            where.append("run_id IN (SELECT run_id FROM run_labels WHERE key = ? AND value = ?)")
            params += [key, value]
        else:
            where.append("run_id IN (SELECT run_id FROM run_labels WHERE key = ?)")
            params.append(key)
    sql = "SELECT * FROM runs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY started_at DESC, id DESC"
    if limit > 0:
        sql += " LIMIT ?"
        params.append(limit)
    return [_record(r) for r in _read(db_path, sql, params)]


def last_runs(
    db_path: str | Path,
    fingerprint: str,
    n: int,
    *,
    complete_only: bool = True,
    exclude_run_id: str | None = None,
) -> list[RunRecord]:
    """The ``n`` newest runs of one configuration, newest first (a baseline for the gate).

    Incomplete runs are left out unless ``complete_only`` is False; ``exclude_run_id`` leaves out
    the run being judged, so that it is not part of its own baseline.
    """
    sql = "SELECT * FROM runs WHERE config_fingerprint = ?"
    params: list[Any] = [fingerprint]
    if complete_only:
        sql += " AND complete = 1"
    if exclude_run_id is not None:
        sql += " AND run_id != ?"
        params.append(exclude_run_id)
    sql += " ORDER BY started_at DESC, id DESC LIMIT ?"
    params.append(max(n, 0))
    return [_record(r) for r in _read(db_path, sql, params)]


def metric_series(
    db_path: str | Path, fingerprint: str, metric: str, *, complete_only: bool = True
) -> list[tuple[str, str, float]]:
    """``(started_at, run_id, value)`` of one metric for one configuration, oldest first.

    Runs that lack the metric (null in their summary) are absent; incomplete runs are left out
    unless ``complete_only`` is False.
    """
    sql = (
        "SELECT r.started_at, r.run_id, m.value FROM metrics m JOIN runs r ON r.run_id = m.run_id"
        " WHERE r.config_fingerprint = ? AND m.name = ?"
    )
    if complete_only:
        sql += " AND r.complete = 1"
    sql += " ORDER BY r.started_at ASC, r.id ASC"
    rows = _read(db_path, sql, [fingerprint, metric])
    return [(r[0], r[1], float(r[2])) for r in rows]


def metric_names(db_path: str | Path, fingerprint: str | None = None) -> list[str]:
    """The metric names recorded (for one configuration if given), sorted."""
    if fingerprint is None:
        rows = _read(db_path, "SELECT DISTINCT name FROM metrics ORDER BY name", [])
    else:
        rows = _read(
            db_path,
            "SELECT DISTINCT m.name FROM metrics m JOIN runs r ON r.run_id = m.run_id"
            " WHERE r.config_fingerprint = ? ORDER BY m.name",
            [fingerprint],
        )
    return [r[0] for r in rows]
