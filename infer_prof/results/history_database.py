"""Where the run history lives and how to reach it: locations (a SQLite file by default
``results/history.sqlite``, or a PostgreSQL database that a fleet of runners shares), SQLAlchemy
engines, connections, retries of transient conflicts, and bringing a database's schema up to date.

A location is a path or ``sqlite:///PATH`` (SQLite), or ``postgresql://USER@HOST:PORT/DB``
(PostgreSQL through psycopg 3; the password comes from the URL, ``PGPASSWORD`` or ``~/.pgpass`` and
is never printed: :func:`describe` hides it).

Schema versions and migrations: the first use of a database by a writer brings it to
:data:`~infer_prof.results.history_schema.SCHEMA_VERSION` (creating it when empty), under a lock
(SQLite's write lock, PostgreSQL's advisory lock) so that many runners starting at once migrate it
once. Version 1 files of earlier releases are migrated in place. A database of a newer version is
refused with a :class:`HistoryError`.

Concurrency: SQLite is in WAL mode with a busy timeout and every write is one ``BEGIN IMMEDIATE``
transaction; PostgreSQL writes are one transaction each. A write that meets a busy database, a
deadlock, a serialization failure or a concurrent insert of the same run id is retried with
jittered backoff, so concurrent writers lose nothing.

Errors: anything that makes the history unusable (a bad URL, an unreachable server, a refused
login, a newer schema, an unreadable file) raises :class:`HistoryError`, whose text is one line
naming the database (password hidden), the problem and the fix.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from infer_prof.results.history_schema import SCHEMA_VERSION, schema
from infer_prof.results.store import default_results_dir

if TYPE_CHECKING:  # SQLAlchemy is imported on first use: a command without history starts faster
    from sqlalchemy import Connection, Engine
    from sqlalchemy.exc import DBAPIError

DEFAULT_LOCATION = "results/history.sqlite"  # with INFER_PROF_RESULTS_DIR unset
#: How help texts name the default history (see :func:`default_location`).
DEFAULT_HELP = "$INFER_PROF_RESULTS_DIR/history.sqlite (results/history.sqlite when unset)"
HISTORY_FILE = "history.sqlite"
ENV_VAR = "INFER_PROF_HISTORY"
BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10
MAX_ATTEMPTS = 20
# pg_advisory_xact_lock key held while migrating (any constant; "ipHS" in ASCII)
_PG_MIGRATION_LOCK = 0x69704853

_T = TypeVar("_T")


class HistoryError(RuntimeError):
    """The history database cannot be used; the message is one line naming problem and fix."""


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


def default_location() -> Path:
    """The history when neither ``--history`` nor ``INFER_PROF_HISTORY`` names one:
    ``history.sqlite`` in the default results folder (``$INFER_PROF_RESULTS_DIR``, else
    ``results``)."""
    return Path(default_results_dir()) / HISTORY_FILE


def resolve(value: str | Path | None, default: str | Path | None = None) -> str | Path:
    """The history location to use: ``value`` (a ``--history`` option) if given, else the
    ``INFER_PROF_HISTORY`` environment variable if set and not empty, else ``default``
    (:func:`default_location` when None)."""
    if value is not None and str(value) != "":
        return value
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return env
    return default if default is not None else default_location()


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


def retry(loc: Location, fn: Callable[[], _T]) -> _T:
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


def connection(loc: Location, eng: Engine, write: bool = False) -> Connection:
    """A connection of ``eng`` (a SQLite file's folder is created first); ``write`` makes its
    transactions ``BEGIN IMMEDIATE`` on SQLite. A failure to connect raises :class:`HistoryError`
    unless it is transient (then the caller's :func:`retry` retries it)."""
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
    with connection(loc, eng, write=True) as conn, conn.begin():
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


def ready(value: str | Path | Location, write: bool) -> tuple[Location, Engine | None]:
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
        with connection(loc, eng) as conn:
            return _stored_version(conn, loc)

    found = retry(loc, check)
    if found > SCHEMA_VERSION:
        raise _newer(loc, found)
    if found == 0 and not write:
        return loc, None
    if found < SCHEMA_VERSION:
        retry(loc, lambda: _migrate(loc, eng))
    _READY.add(key)
    return loc, eng


def check(value: str | Path | Location) -> str:
    """Connect, and bring the schema up to date (creating the database if needed): the check a
    runner makes before a long run. Returns :func:`describe`; raises :class:`HistoryError`."""
    loc, _ = ready(value, write=True)
    return loc.display


def schema_version_of(value: str | Path | Location) -> int:
    """The schema version stored in a database (0: none yet); does not migrate."""
    loc = parse_location(value)
    if loc.sqlite_path is not None and not loc.sqlite_path.exists():
        return 0
    eng = _engine(loc)

    def read() -> int:
        with connection(loc, eng) as conn:
            return _stored_version(conn, loc)

    return retry(loc, read)


def write(value: str | Path | Location, fn: Callable[[Connection], _T]) -> _T:
    """``fn(conn)`` in one write transaction on a current schema (migrating on first use),
    retried on transient conflicts; its result."""
    loc, eng = ready(value, write=True)
    assert eng is not None

    def attempt() -> _T:
        with connection(loc, eng, write=True) as conn, conn.begin():
            return fn(conn)

    return retry(loc, attempt)


def read(value: str | Path | Location, stmt: Any) -> list[Any]:
    """The rows of ``stmt``, retried on transient conflicts; [] for a database that does not
    exist yet (it is not created)."""
    loc, eng = ready(value, write=False)
    if eng is None:
        return []

    def attempt() -> list[Any]:
        with connection(loc, eng) as conn:
            return list(conn.execute(stmt))

    return retry(loc, attempt)
