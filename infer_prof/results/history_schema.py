"""The history database's tables and migrations (SQLAlchemy Core), shared by SQLite and PostgreSQL::

    schema_version(version PK, applied_at)   -- one row per applied migration
    runs(id, run_id UNIQUE, started_at, config_fingerprint, model, gpu, precision, concurrency,
         workload, labels_json, git_rev, result_path, summary_json, complete, run_name)
         index runs_fp_time(config_fingerprint, started_at): what ``history:N`` looks up
         run_id: the run's unique ID (a UUIDv7; the readable name for results of releases
         before schema 3); run_name: the readable ``<time>-<model>-<load>`` (schema 3), not
         unique: two runs started in the same second share it and are two rows
    metrics(run_id, name, value)          -- one row per numeric leaf of the summary
    run_labels(run_id, key, value)        -- labels, one row each, for exact filtering
    run_files(run_id, result_json, requests_gz)  -- the result file's text and its gzipped
                                                    per-request records (schema 2), so that a
                                                    run can be exported after its runner is gone
    launch_spread(config_fingerprint, metric, cv, n_runs, measured_at, source)
         PK (config_fingerprint, metric)  -- the measured launch-to-launch spread of one
                                             configuration: for each gate metric (named as in
                                             ``metrics``: ``tpot_ms.p50``, ``output_throughput``)
                                             the coefficient of variation between runs, a
                                             fraction (sample stdev / mean over the runs, 0.08 =
                                             8 %), and how many runs it was measured on; one row
                                             per pair, a new measurement replaces it

Version 4 adds ``launch_spread`` (what ``run --repeat-relaunch`` measures for the gate).
Version 3 adds ``run_name`` (filled with ``run_id`` for the rows already there, which were
keyed by that readable name). Version 1 is the SQLite layout of earlier infer-prof releases
(``PRAGMA user_version = 1``, no ``schema_version`` table); :data:`SCHEMA_VERSION` is the
version this release writes. Applying the migrations (under a lock) is
:mod:`infer_prof.results.history_database`'s job.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # SQLAlchemy is imported on first use: a command without history starts faster
    from sqlalchemy import Connection, MetaData, Table

SCHEMA_VERSION = 4


@functools.cache
def schema() -> SimpleNamespace:
    """The tables (SQLAlchemy Core: ``schema().runs`` etc.) and the migrations
    (``schema().migrations[v]`` brings a database from version v - 1 to v), built on first use."""
    from sqlalchemy import MetaData

    metadata = MetaData()
    tables = _tables(metadata)
    migrations = _migrations(tables)
    assert sorted(migrations) == list(range(1, SCHEMA_VERSION + 1))
    return SimpleNamespace(metadata=metadata, **tables, migrations=migrations)


def _tables(metadata: MetaData) -> dict[str, Table]:
    """The six tables of the module docstring, by name, in ``metadata``."""
    from sqlalchemy import Column, Float, ForeignKey, Index, Integer, LargeBinary, Table, Text

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
        Column("run_name", Text),
        Index("runs_fp_time", "config_fingerprint", "started_at"),
        Index("runs_model", "model"),
        Index("runs_name", "run_name"),
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
    launch_spread = Table(
        "launch_spread",
        metadata,
        Column("config_fingerprint", Text, primary_key=True),
        Column("metric", Text, primary_key=True),
        Column("cv", Float, nullable=False),
        Column("n_runs", Integer, nullable=False),
        Column("measured_at", Text, nullable=False),
        Column("source", Text),
    )
    return {
        "schema_version": schema_version,
        "runs": runs,
        "metrics": metrics,
        "run_labels": run_labels,
        "run_files": run_files,
        "launch_spread": launch_spread,
    }


def _migrations(tables: dict[str, Table]) -> dict[int, Callable[[Connection], None]]:
    """``migrations[v]`` brings a database from version v - 1 to version v."""
    runs, metrics = tables["runs"], tables["metrics"]
    run_labels, run_files = tables["run_labels"], tables["run_files"]
    launch_spread = tables["launch_spread"]

    def migration_1(conn: Connection) -> None:
        """The original layout: runs, metrics, run_labels and their indexes."""
        for table in (runs, metrics, run_labels):
            table.create(conn, checkfirst=True)

    def migration_2(conn: Connection) -> None:
        """Keep each run's result file and per-request records (export, gating on a fleet)."""
        run_files.create(conn, checkfirst=True)

    def migration_3(conn: Connection) -> None:
        """Runs keyed by a unique ID: the readable name gets its own column. Rows already
        there keep their run_id (their readable name) and get it as their run_name too."""
        from sqlalchemy import inspect, update

        if "run_name" not in {c["name"] for c in inspect(conn).get_columns("runs")}:
            conn.exec_driver_sql("ALTER TABLE runs ADD COLUMN run_name TEXT")
        conn.execute(update(runs).where(runs.c.run_name.is_(None)).values(run_name=runs.c.run_id))
        for index in runs.indexes:
            if index.name == "runs_name":
                index.create(conn, checkfirst=True)

    def migration_4(conn: Connection) -> None:
        """The measured launch-to-launch spread of a configuration, per metric (the gate's
        noise level where the history has it)."""
        launch_spread.create(conn, checkfirst=True)

    return {1: migration_1, 2: migration_2, 3: migration_3, 4: migration_4}
