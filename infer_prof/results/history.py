"""Run history: every recorded run, in an embedded SQLite file (by default
``results/history.sqlite``) or in a PostgreSQL database that a fleet of runners shares.

Where the history lives is a *location*: a path or ``sqlite:///PATH`` (SQLite), or
``postgresql://USER@HOST:PORT/DB`` (PostgreSQL through psycopg 3; the password comes from the URL,
``PGPASSWORD`` or ``~/.pgpass`` and is never printed: :func:`describe` hides it). Both backends
share one schema and one set of queries, written with SQLAlchemy Core::

    schema_version(version PK, applied_at)   -- one row per applied migration
    runs(id, run_id UNIQUE, started_at, config_fingerprint, model, gpu, precision, concurrency,
         workload, labels_json, git_rev, result_path, summary_json, complete)
         index runs_fp_time(config_fingerprint, started_at): what ``history:N`` looks up
    metrics(run_id, name, value)          -- one row per numeric leaf of the summary
    run_labels(run_id, key, value)        -- labels, one row each, for exact filtering
    run_files(run_id, result_json, requests_gz)  -- the result file's text and its gzipped
                                                    per-request records (schema 2), so that a
                                                    run can be exported after its runner is gone

``started_at`` is stored as UTC ISO 8601 with a fixed width (``2024-05-01T02:00:00.000000Z``) so
that text order is time order. Metric names are the summary's keys joined with dots
(``ttft_ms.p99``, ``output_throughput``, ``cost.usd_per_1m_output_tokens``); nulls, booleans,
strings and non-finite numbers are not stored.

Schema versions and migrations: the first use of a database by a writer brings it to
:data:`SCHEMA_VERSION` (creating it when empty), under a lock (SQLite's write lock, PostgreSQL's
advisory lock) so that many runners starting at once migrate it once. Version 1 is the SQLite
layout of earlier infer-prof releases (``PRAGMA user_version = 1``, no ``schema_version`` table);
such files are migrated in place. A database of a newer version is refused with a
:class:`HistoryError`.

Concurrency: SQLite is in WAL mode with a busy timeout and every write is one ``BEGIN IMMEDIATE``
transaction; PostgreSQL writes are one transaction each. A write that meets a busy database, a
deadlock, a serialization failure or a concurrent insert of the same run id is retried with
jittered backoff, so concurrent writers lose nothing. Recording a run_id again replaces that run
(a retried upload or a second import is idempotent).

Errors: anything that makes the history unusable (a bad URL, an unreachable server, a refused
login, a newer schema, an unreadable file) raises :class:`HistoryError`, whose text is one line
naming the database (password hidden), the problem and the fix.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

if TYPE_CHECKING:  # SQLAlchemy is imported on first use: a command without history starts faster
    from sqlalchemy import Connection, Engine
    from sqlalchemy.exc import DBAPIError

SCHEMA_VERSION = 2
DEFAULT_LOCATION = "results/history.sqlite"
ENV_VAR = "INFER_PROF_HISTORY"
BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10
MAX_ATTEMPTS = 20
# pg_advisory_xact_lock key held while migrating (any constant; "ipHS" in ASCII)
_PG_MIGRATION_LOCK = 0x69704853

_T = TypeVar("_T")


class HistoryError(RuntimeError):
    """The history database cannot be used; the message is one line naming problem and fix."""


# --- schema -------------------------------------------------------------------------------------


@functools.cache
def schema() -> SimpleNamespace:
    """The tables (SQLAlchemy Core: ``schema().runs`` etc.) and the migrations
    (``schema().migrations[v]`` brings a database from version v - 1 to v), built on first use."""
    from sqlalchemy import (
        Column,
        Float,
        ForeignKey,
        Index,
        Integer,
        LargeBinary,
        MetaData,
        Table,
        Text,
    )

    metadata = MetaData()
    schema_version = Table(
        "schema_version",
        metadata,
        Column("version", Integer, primary_key=True, autoincrement=False),
        Column("applied_at", Text, nullable=False),
    )
    runs = Table(
        "runs",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("run_id", Text, nullable=False, unique=True),
        Column("started_at", Text, nullable=False),
        Column("config_fingerprint", Text, nullable=False),
        Column("model", Text),
        Column("gpu", Text),
        Column("precision", Text),
        Column("concurrency", Integer),
        Column("workload", Text),
        Column("labels_json", Text, nullable=False, server_default="{}"),
        Column("git_rev", Text),
        Column("result_path", Text),
        Column("summary_json", Text, nullable=False),
        Column("complete", Integer, nullable=False),
        Index("runs_fp_time", "config_fingerprint", "started_at"),
        Index("runs_model", "model"),
        sqlite_autoincrement=True,
    )
    fk = ForeignKey("runs.run_id", ondelete="CASCADE")
    metrics = Table(
        "metrics",
        metadata,
        Column("run_id", Text, fk, primary_key=True),
        Column("name", Text, primary_key=True),
        Column("value", Float, nullable=False),
        Index("metrics_name", "name", "run_id"),
    )
    run_labels = Table(
        "run_labels",
        metadata,
        Column("run_id", Text, ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
        Column("key", Text, primary_key=True),
        Column("value", Text, nullable=False),
        Index("run_labels_kv", "key", "value"),
    )
    run_files = Table(
        "run_files",
        metadata,
        Column("run_id", Text, ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
        Column("result_json", Text, nullable=False),
        Column("requests_gz", LargeBinary),
    )

    def migration_1(conn: Connection) -> None:
        """The original layout: runs, metrics, run_labels and their indexes."""
        for table in (runs, metrics, run_labels):
            table.create(conn, checkfirst=True)

    def migration_2(conn: Connection) -> None:
        """Keep each run's result file and per-request records (export, gating on a fleet)."""
        run_files.create(conn, checkfirst=True)

    # migrations[v] brings a database from version v - 1 to version v.
    migrations: dict[int, Callable[[Connection], None]] = {1: migration_1, 2: migration_2}
    assert sorted(migrations) == list(range(1, SCHEMA_VERSION + 1))
    return SimpleNamespace(
        metadata=metadata,
        schema_version=schema_version,
        runs=runs,
        metrics=metrics,
        run_labels=run_labels,
        run_files=run_files,
        migrations=migrations,
    )


# --- locations ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Location:
    """Where a history lives: a URL SQLAlchemy understands (``sqlite:///PATH`` or
    ``postgresql+psycopg://...``), and the file for SQLite."""

    url: str
    sqlite_path: Path | None

    @property
    def display(self) -> str:
        """The URL (a plain path for SQLite) with any password replaced by ``***``."""
        if self.sqlite_path is not None:
            return str(self.sqlite_path)
        return _redact("postgresql://" + self.url.split("://", 1)[1])


_PG_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
_URL_HELP = "write sqlite:///PATH, a file path, or postgresql://USER@HOST:PORT/DB"


def _redact(value: str) -> str:
    """``value`` with the password of its user part replaced by ``***``."""
    scheme, sep, rest = value.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return value
    netloc, slash, path = rest.partition("/")
    userinfo, _, hostport = netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{hostport}{slash}{path}"


def _bad_url(value: str, why: str) -> HistoryError:
    return HistoryError(f"history URL {_redact(value)!r} {why}; {_URL_HELP}")


def _sqlite(path: Path) -> Location:
    return Location(f"sqlite:///{path}", path)


def parse_location(value: str | Path | Location) -> Location:
    """A :class:`Location` from a path (SQLite) or a ``sqlite:///PATH`` (three slashes before a
    relative path, four before an absolute one) or ``postgresql://`` URL.

    Raises :class:`HistoryError` for an empty value, an unknown scheme, a SQLite URL without a
    file, or an unparseable URL.
    """
    if isinstance(value, Location):
        return value
    if isinstance(value, Path):
        return _sqlite(value)
    value = value.strip()
    if not value:
        raise HistoryError(f"the history location is empty; {_URL_HELP}")
    if "://" not in value:
        return _sqlite(Path(value).expanduser())
    scheme, _, rest = value.partition("://")
    scheme = scheme.lower()
    if scheme not in ("sqlite", *_PG_SCHEMES):
        raise _bad_url(value, f"has the unsupported scheme {scheme!r}")
    if scheme == "sqlite":
        path = rest[1:].split("?", 1)[0] if rest.startswith("/") else ""
        if not path or path == ":memory:":
            raise _bad_url(value, "names no database file")
        return _sqlite(Path(path).expanduser())
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises ValueError for a port that is not a number
    except ValueError as exc:
        raise _bad_url(value, f"cannot be parsed ({_redact(str(exc))})") from None
    return Location("postgresql+psycopg://" + rest, None)


def resolve(value: str | Path | None, default: str | Path = DEFAULT_LOCATION) -> str | Path:
    """The history location to use: ``value`` (a ``--history`` option) if given, else the
    ``INFER_PROF_HISTORY`` environment variable if set and not empty, else ``default``."""
    if value is not None and str(value) != "":
        return value
    env = os.environ.get(ENV_VAR, "").strip()
    return env if env else default


def describe(value: str | Path | Location) -> str:
    """A location for messages and result files: the path, or the URL without its password."""
    try:
        return parse_location(value).display
    except HistoryError:
        return "<bad history URL>"


# --- engines, errors, retries -------------------------------------------------------------------

_ENGINES: dict[str, Engine] = {}
_READY: set[str] = set()


def _sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    # SQLAlchemy's recipe for real SQLite transactions: the driver stays out of the way, and the
    # "begin" listener below issues BEGIN (IMMEDIATE for writes).
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    try:
        cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
    finally:
        cur.close()


def _sqlite_on_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get("infer_prof_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _engine(loc: Location) -> Engine:
    eng = _ENGINES.get(loc.url)
    if eng is not None:
        return eng
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError
    from sqlalchemy.pool import NullPool

    try:
        url = (
            URL.create("sqlite", database=str(loc.sqlite_path))
            if loc.sqlite_path is not None
            else make_url(loc.url)
        )
    except (ArgumentError, ValueError) as exc:
        raise _bad_url(loc.url, f"cannot be parsed ({_redact(str(exc))})") from None
    # NullPool: no connection outlives one operation (safe across fork, nothing held open).
    if loc.sqlite_path is not None:
        eng = create_engine(
            url,
            poolclass=NullPool,
            hide_parameters=True,
            connect_args={"timeout": BUSY_TIMEOUT_MS / 1000},
        )
        event.listen(eng, "connect", _sqlite_on_connect)
        event.listen(eng, "begin", _sqlite_on_begin)
    else:
        try:
            eng = create_engine(
                url,
                poolclass=NullPool,
                hide_parameters=True,
                connect_args={
                    "connect_timeout": CONNECT_TIMEOUT_S,
                    "application_name": "infer-prof",
                },
            )
        except ImportError as exc:
            raise HistoryError(
                f"history {loc.display}: the PostgreSQL driver is missing ({exc}); install it "
                "with: pip install 'psycopg[binary]'"
            ) from None
    _ENGINES[loc.url] = eng
    return eng


def _one_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    msg = " ".join(str(orig).split())  # one line, runs of spaces collapsed
    return msg or type(orig).__name__


def _connect_error(loc: Location, exc: BaseException) -> HistoryError:
    msg = _one_line(exc)
    low = msg.lower()
    if loc.sqlite_path is not None:
        return HistoryError(
            f"history {loc.display}: cannot open the SQLite database: {msg}; check the path and "
            "that this user may write its folder"
        )
    if "password" in low or "authentication" in low:
        fix = "check the user and password (in the URL, PGPASSWORD or ~/.pgpass)"
    elif "does not exist" in low:
        fix = "create the database (createdb) or fix the URL"
    else:
        fix = "check that the server runs and the URL's host and port"
    return HistoryError(f"history {loc.display}: cannot connect to PostgreSQL: {msg}; {fix}")


def _transient(loc: Location, exc: DBAPIError) -> bool:
    """Worth retrying: SQLite busy/locked; PostgreSQL serialization failure, deadlock, or a
    concurrent insert of the same run id (unique violation)."""
    orig = exc.orig
    if loc.sqlite_path is not None:
        msg = str(orig).lower()
        return isinstance(orig, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)
    return getattr(orig, "sqlstate", None) in ("40001", "40P01", "23505")


def _retry(loc: Location, fn: Callable[[], _T]) -> _T:
    """Run ``fn``, retrying transient conflicts with jittered backoff; other database errors
    become a :class:`HistoryError`."""
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    delay = 0.01
    for attempt in range(MAX_ATTEMPTS):
        try:
            return fn()
        except DBAPIError as exc:
            if _transient(loc, exc) and attempt < MAX_ATTEMPTS - 1:
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 1.0)
                continue
            if exc.connection_invalidated or _is_connect_error(exc):
                raise _connect_error(loc, exc) from None
            raise HistoryError(f"history {loc.display}: database error: {_one_line(exc)}") from None
        except SQLAlchemyError as exc:
            raise HistoryError(f"history {loc.display}: {_one_line(exc)}") from None
    raise AssertionError("unreachable")


def _is_connect_error(exc: DBAPIError) -> bool:
    msg = str(exc.orig).lower()
    return any(
        s in msg
        for s in ("connection", "could not connect", "unable to open", "authentication", "password")
    )


def _connection(loc: Location, eng: Engine, write: bool = False) -> Connection:
    from sqlalchemy.exc import DBAPIError

    if loc.sqlite_path is not None:
        try:
            loc.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _connect_error(loc, exc) from None
    try:
        conn = eng.connect()
    except DBAPIError as exc:
        if _transient(loc, exc):
            raise
        raise _connect_error(loc, exc) from None
    if write:
        conn.execution_options(infer_prof_write=True)
    return conn


def _stored_version(conn: Connection, loc: Location) -> int:
    """The schema version of a database: 0 when empty, 1 for an early SQLite file."""
    from sqlalchemy import func, inspect, select

    insp = inspect(conn)
    if insp.has_table("schema_version"):
        v = conn.execute(select(func.max(schema().schema_version.c.version))).scalar()
        return int(v or 0)
    if loc.sqlite_path is not None:
        v = conn.exec_driver_sql("PRAGMA user_version").scalar()
        if v:
            return int(v)
    return 1 if insp.has_table("runs") else 0


def _newer(loc: Location, version: int) -> HistoryError:
    return HistoryError(
        f"history {loc.display}: its schema version {version} is newer than this infer-prof "
        f"understands ({SCHEMA_VERSION}); upgrade infer-prof on this machine"
    )


def _migrate(loc: Location, eng: Engine) -> None:
    from sqlalchemy import func, insert, select

    t = schema()
    schema_version = t.schema_version
    with _connection(loc, eng, write=True) as conn, conn.begin():
        if loc.sqlite_path is None:
            conn.execute(select(func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK)))
        found = _stored_version(conn, loc)  # again, under the lock
        if found > SCHEMA_VERSION:
            raise _newer(loc, found)
        schema_version.create(conn, checkfirst=True)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if found and conn.execute(select(func.count()).select_from(schema_version)).scalar() == 0:
            conn.execute(insert(schema_version).values(version=found, applied_at=now))
        for version in range(found + 1, SCHEMA_VERSION + 1):
            t.migrations[version](conn)
            conn.execute(insert(schema_version).values(version=version, applied_at=now))
        if loc.sqlite_path is not None:  # earlier releases read this; they refuse a newer file
            conn.exec_driver_sql(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _ready(value: str | Path | Location, write: bool) -> tuple[Location, Engine | None]:
    """The location and its engine with the schema current, migrating on first use.

    For a reader, a database that does not exist yet (a missing SQLite file, an empty
    PostgreSQL database) gives ``None``: it holds no runs, and it is not created.
    """
    loc = parse_location(value)
    key = loc.url
    if key in _READY:
        return loc, _engine(loc)
    if not write and loc.sqlite_path is not None and not loc.sqlite_path.exists():
        return loc, None
    eng = _engine(loc)

    def check() -> int:
        with _connection(loc, eng) as conn:
            return _stored_version(conn, loc)

    found = _retry(loc, check)
    if found > SCHEMA_VERSION:
        raise _newer(loc, found)
    if found == 0 and not write:
        return loc, None
    if found < SCHEMA_VERSION:
        _retry(loc, lambda: _migrate(loc, eng))
    _READY.add(key)
    return loc, eng


def check(value: str | Path | Location) -> str:
    """Connect, and bring the schema up to date (creating the database if needed): the check a
    runner makes before a long run. Returns :func:`describe`; raises :class:`HistoryError`."""
    loc, _ = _ready(value, write=True)
    return loc.display


def schema_version_of(value: str | Path | Location) -> int:
    """The schema version stored in a database (0: none yet); does not migrate."""
    loc = parse_location(value)
    if loc.sqlite_path is not None and not loc.sqlite_path.exists():
        return 0
    eng = _engine(loc)

    def read() -> int:
        with _connection(loc, eng) as conn:
            return _stored_version(conn, loc)

    return _retry(loc, read)


def _write(value: str | Path | Location, fn: Callable[[Connection], _T]) -> _T:
    loc, eng = _ready(value, write=True)
    assert eng is not None

    def attempt() -> _T:
        with _connection(loc, eng, write=True) as conn, conn.begin():
            return fn(conn)

    return _retry(loc, attempt)


def _read(value: str | Path | Location, stmt: Any) -> list[Any]:
    loc, eng = _ready(value, write=False)
    if eng is None:
        return []

    def attempt() -> list[Any]:
        with _connection(loc, eng) as conn:
            return list(conn.execute(stmt))

    return _retry(loc, attempt)


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


def record_run(
    db_path: str | Path | Location,
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
    files: RunFiles | None = None,
) -> None:
    """Record one run, its flattened metrics, labels and (if given) files in one transaction,
    replacing a run of the same run_id.

    ``db_path`` is a location (see :func:`parse_location`); a SQLite file and its folder are
    created if needed. ``summary`` must be JSON-serialisable. Raises :class:`HistoryError`.
    """
    if not run_id:
        raise ValueError("run_id must be a non-empty string")
    if not config_fingerprint:
        raise ValueError("config_fingerprint must be a non-empty string")
    labels_d = {str(k): str(v) for k, v in (labels or {}).items()}
    row = {
        "run_id": run_id,
        "started_at": normalize_started_at(started_at),
        "config_fingerprint": config_fingerprint,
        "model": model,
        "gpu": gpu,
        "precision": precision,
        "concurrency": concurrency,
        "workload": workload,
        "labels_json": json.dumps(labels_d, sort_keys=True),
        "git_rev": git_rev,
        "result_path": result_path,
        "summary_json": json.dumps(summary, sort_keys=True, allow_nan=False),
        "complete": int(bool(complete)),
    }
    metric_rows = [
        {"run_id": run_id, "name": k, "value": v} for k, v in flatten_summary(summary).items()
    ]
    label_rows = [{"run_id": run_id, "key": k, "value": v} for k, v in labels_d.items()]
    file_row = None
    if files is not None:
        file_row = {
            "run_id": run_id,
            "result_json": files.result_text,
            "requests_gz": None
            if files.requests_jsonl is None
            else gzip.compress(files.requests_jsonl, compresslevel=6, mtime=0),
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

    _write(db_path, write)


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
    return [_record(r) for r in _read(db_path, stmt)]


def get_runs(db_path: str | Path | Location, run_ids: Iterable[str]) -> dict[str, RunRecord]:
    """The runs of these ids that are recorded, by id."""
    from sqlalchemy import select

    runs = schema().runs
    ids = sorted(set(run_ids))
    out: dict[str, RunRecord] = {}
    for i in range(0, len(ids), 500):
        stmt = select(runs).where(runs.c.run_id.in_(ids[i : i + 500]))
        out.update((r.run_id, r) for r in map(_record, _read(db_path, stmt)))
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
    return [_record(r) for r in _read(db_path, stmt)]


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
    return [(r[0], r[1], float(r[2])) for r in _read(db_path, stmt)]


def metric_names(db_path: str | Path | Location, fingerprint: str | None = None) -> list[str]:
    """The metric names recorded (for one configuration if given), sorted."""
    from sqlalchemy import select

    runs, metrics = schema().runs, schema().metrics
    stmt = select(metrics.c.name).distinct()
    if fingerprint is not None:
        stmt = stmt.select_from(metrics.join(runs, runs.c.run_id == metrics.c.run_id)).where(
            runs.c.config_fingerprint == fingerprint
        )
    return [r[0] for r in _read(db_path, stmt.order_by(metrics.c.name))]


def load_files(db_path: str | Path | Location, run_id: str) -> RunFiles | None:
    """The result file text and per-request records kept for a run, or None (not recorded, or
    recorded before schema 2 kept files)."""
    from sqlalchemy import select

    run_files = schema().run_files
    stmt = select(run_files.c.result_json, run_files.c.requests_gz).where(
        run_files.c.run_id == run_id
    )
    rows = _read(db_path, stmt)
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
    rows = _read(db_path, select(func.count()).select_from(runs))
    return int(rows[0][0]) if rows else 0


def explain_baseline_query(db_path: str | Path | Location, fingerprint: str) -> str:
    """The database's query plan for :func:`last_runs` (to see that ``runs_fp_time`` serves
    ``history:N``)."""
    from sqlalchemy import select, text

    runs = schema().runs
    loc, eng = _ready(db_path, write=True)
    assert eng is not None
    stmt = _newest_first(
        select(runs).where(runs.c.config_fingerprint == fingerprint, runs.c.complete == 1)
    ).limit(7)
    sql = str(stmt.compile(eng, compile_kwargs={"literal_binds": True}))
    prefix = "EXPLAIN QUERY PLAN " if loc.sqlite_path is not None else "EXPLAIN "

    def attempt() -> str:
        with _connection(loc, eng) as conn:
            return "\n".join(" ".join(str(c) for c in r) for r in conn.execute(text(prefix + sql)))

    return _retry(loc, attempt)
