"""History database: recording, flattening, filtering. Concurrent writers (forked processes)
are tests/integration/test_history_backends.py's."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from infer_prof.results import history as h
from infer_prof.results import history_database as hdb
from infer_prof.results import history_schema as hs


def summary(ttft_p99: float | None = 40.0, tput: float = 1000.0) -> dict[str, Any]:
    return {
        "requests_completed": 100,
        "request_throughput": 5.0,
        "output_throughput": tput,
        "ttft_ms": {"mean": 20.0, "p50": 18.0, "p90": 30.0, "p99": ttft_p99, "max": 55.0},
        "tpot_ms": {"mean": 7.5, "p50": None, "p90": None, "p99": None, "max": None},
        "itl_ms": None,
        "cost": {"usd_per_1m_output_tokens": 0.55, "gpu": "H100-SXM"},
    }


def record(db: Path, run_id: str, started_at: str, **kw: Any) -> None:
    args: dict[str, Any] = {
        "config_fingerprint": "fp-a",
        "summary": summary(),
        "model": "llama-2-7b",
        "gpu": "H100-SXM",
        "precision": "fp16",
        "concurrency": 64,
        "workload": "chat",
        "labels": {},
        "git_rev": "abc123",
        "result_path": f"results/{run_id}.json",
        "complete": True,
    }
    args.update(kw)
    h.record_run(db, h.RunEntry(run_id=run_id, started_at=started_at, **args))


def test_flatten_summary_skips_nulls_and_non_numbers() -> None:
    flat = h.flatten_summary(summary(ttft_p99=None))
    assert flat == {
        "requests_completed": 100.0,
        "request_throughput": 5.0,
        "output_throughput": 1000.0,
        "ttft_ms.mean": 20.0,
        "ttft_ms.p50": 18.0,
        "ttft_ms.p90": 30.0,
        "ttft_ms.max": 55.0,
        "tpot_ms.mean": 7.5,
        "cost.usd_per_1m_output_tokens": 0.55,
    }
    assert h.flatten_summary({"a": float("nan"), "b": True, "c": [1, 2], "d": 1}) == {"d": 1.0}


def test_normalize_started_at() -> None:
    assert h.normalize_started_at("2024-05-01T02:00:00Z") == "2024-05-01T02:00:00.000000Z"
    assert h.normalize_started_at("2024-05-01T04:00:00+02:00") == "2024-05-01T02:00:00.000000Z"
    assert h.normalize_started_at("2024-05-01T02:00:00.5") == "2024-05-01T02:00:00.500000Z"


def test_record_and_read_back(tmp_path: Path) -> None:
    db = tmp_path / "results" / "history.sqlite"
    record(db, "r1", "2024-05-01T02:00:00Z", labels={"host": "box1", "cloud": "lambda"})
    [run] = h.list_runs(db)
    assert run.run_id == "r1"
    assert run.started_at == "2024-05-01T02:00:00.000000Z"
    assert run.labels == {"cloud": "lambda", "host": "box1"}
    assert run.summary == summary()
    assert run.complete is True and run.concurrency == 64 and run.git_rev == "abc123"
    assert run.metrics()["ttft_ms.p99"] == 40.0
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        n = conn.execute("SELECT COUNT(*) FROM metrics WHERE run_id = 'r1'").fetchone()[0]
    assert n == 10  # the numeric leaves of summary(); 5 nulls and one string skipped


def test_rerecording_a_run_replaces_it(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    record(db, "r1", "2024-05-01T02:00:00Z", summary=summary(ttft_p99=40.0))
    record(db, "r1", "2024-05-01T02:00:00Z", summary=summary(ttft_p99=None), labels={"k": "v"})
    assert len(h.list_runs(db)) == 1
    assert h.metric_series(db, "fp-a", "ttft_ms.p99") == []
    assert h.list_runs(db, label="k=v")[0].run_id == "r1"


def test_queries_filter(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    record(db, "a1", "2024-05-01T02:00:00Z", labels={"host": "box1"})
    record(db, "a2", "2024-05-02T02:00:00Z", labels={"host": "box2"}, summary=summary(45.0))
    record(db, "a3", "2024-05-03T02:00:00Z", complete=False, summary=summary(90.0))
    record(db, "a4", "2024-05-04T02:00:00Z", summary=summary(41.0))
    record(
        db,
        "b1",
        "2024-05-02T12:00:00Z",
        config_fingerprint="fp-b",
        model="mistral-7b",
        labels={"host": "box1", "nightly": "1"},
    )

    assert [r.run_id for r in h.list_runs(db)] == ["a4", "a3", "b1", "a2", "a1"]
    assert [r.run_id for r in h.list_runs(db, limit=2)] == ["a4", "a3"]
    assert [r.run_id for r in h.list_runs(db, model="mistral-7b")] == ["b1"]
    assert [r.run_id for r in h.list_runs(db, fingerprint="fp-a")] == ["a4", "a3", "a2", "a1"]
    assert [r.run_id for r in h.list_runs(db, label="host=box1")] == ["b1", "a1"]
    assert [r.run_id for r in h.list_runs(db, label="nightly")] == ["b1"]
    assert [r.run_id for r in h.list_runs(db, label="host=box1", model="llama-2-7b")] == ["a1"]
    assert h.list_runs(db, label="host=box9") == []

    # trend: oldest first, incomplete run a3 left out unless asked for
    assert h.metric_series(db, "fp-a", "ttft_ms.p99") == [
        ("2024-05-01T02:00:00.000000Z", "a1", 40.0),
        ("2024-05-02T02:00:00.000000Z", "a2", 45.0),
        ("2024-05-04T02:00:00.000000Z", "a4", 41.0),
    ]
    assert [v for _, _, v in h.metric_series(db, "fp-a", "ttft_ms.p99", complete_only=False)] == [
        40.0,
        45.0,
        90.0,
        41.0,
    ]
    assert h.metric_series(db, "fp-a", "no_such_metric") == []

    assert [r.run_id for r in h.last_runs(db, "fp-a", 2)] == ["a4", "a2"]
    assert [r.run_id for r in h.last_runs(db, "fp-a", 2, exclude_run_id="a4")] == ["a2", "a1"]
    assert [r.run_id for r in h.last_runs(db, "fp-a", 2, complete_only=False)] == ["a4", "a3"]
    assert "ttft_ms.p99" in h.metric_names(db, "fp-b")


def test_missing_database_reads_as_empty(tmp_path: Path) -> None:
    db = tmp_path / "none.sqlite"
    assert h.list_runs(db) == []
    assert h.metric_series(db, "fp", "x") == []
    assert h.last_runs(db, "fp", 3) == []
    assert not db.exists()


def test_bad_input_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        record(tmp_path / "h.sqlite", "", "2024-05-01T02:00:00Z")
    with pytest.raises(ValueError):
        record(tmp_path / "h.sqlite", "r", "2024-05-01T02:00:00Z", summary={"x": float("inf")})


# --- locations, schema versions and migrations ---------------------------------------------------

# The SQLite layout of infer-prof before schema versions had a table (PRAGMA user_version = 1),
# as that release created it: such files must keep working.
V1_SCHEMA = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE, started_at TEXT NOT NULL,
    config_fingerprint TEXT NOT NULL, model TEXT, gpu TEXT, precision TEXT, concurrency INTEGER,
    workload TEXT, labels_json TEXT NOT NULL DEFAULT '{}', git_rev TEXT, result_path TEXT,
    summary_json TEXT NOT NULL, complete INTEGER NOT NULL);
CREATE INDEX runs_fp_time ON runs(config_fingerprint, started_at);
CREATE INDEX runs_model ON runs(model);
CREATE TABLE metrics (run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    name TEXT NOT NULL, value REAL NOT NULL, PRIMARY KEY (run_id, name));
CREATE INDEX metrics_name ON metrics(name, run_id);
CREATE TABLE run_labels (run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (run_id, key));
CREATE INDEX run_labels_kv ON run_labels(key, value);
PRAGMA user_version = 1;
INSERT INTO runs (run_id, started_at, config_fingerprint, model, labels_json, summary_json,
    complete) VALUES ('old', '2024-04-01T02:00:00.000000Z', 'fp-a', 'llama-2-7b',
    '{"host": "box0"}', '{"output_throughput": 900.0}', 1);
INSERT INTO metrics VALUES ('old', 'output_throughput', 900.0);
INSERT INTO run_labels VALUES ('old', 'host', 'box0');
"""


def test_a_version_1_sqlite_file_is_read_and_migrated_in_place(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    with sqlite3.connect(db) as conn:
        conn.executescript(V1_SCHEMA)
    assert hdb.schema_version_of(db) == 1
    [old] = h.list_runs(db)  # the first use migrates it
    assert old.run_id == "old" and old.labels == {"host": "box0"}
    assert hdb.schema_version_of(db) == hs.SCHEMA_VERSION
    record(db, "new", "2024-05-01T02:00:00Z", files=h.RunFiles('{"a": 1}\n', b"x\n"))
    assert hdb.schema_version_of(db) == hs.SCHEMA_VERSION
    assert [r.run_id for r in h.last_runs(db, "fp-a", 7)] == ["new", "old"]
    assert [v for _, _, v in h.metric_series(db, "fp-a", "output_throughput")] == [900.0, 1000.0]
    assert h.load_files(db, "new") == h.RunFiles('{"a": 1}\n', b"x\n")
    assert h.load_files(db, "old") is None  # recorded before files were kept
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == hs.SCHEMA_VERSION
        versions = [v for (v,) in conn.execute("SELECT version FROM schema_version ORDER BY 1")]
        assert versions == list(range(1, hs.SCHEMA_VERSION + 1))
        plan = " ".join(
            str(r[-1])
            for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT * FROM runs WHERE config_fingerprint = 'fp-a' "
                "AND complete = 1 ORDER BY started_at DESC, id DESC LIMIT 7"
            )
        )
    assert "runs_fp_time" in plan  # history:N is an index lookup
    assert "runs_fp_time" in h.explain_baseline_query(db, "fp-a")


def test_a_newer_sqlite_schema_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "future.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT)")
        conn.execute("INSERT INTO schema_version VALUES (?, 'later')", (hs.SCHEMA_VERSION + 1,))
    for call in (lambda: h.list_runs(db), lambda: record(db, "r", "2024-05-01T02:00:00Z")):
        with pytest.raises(hdb.HistoryError) as exc:
            call()
        msg = str(exc.value)
        assert "\n" not in msg and f"schema version {hs.SCHEMA_VERSION + 1} is newer" in msg
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 1  # untouched


def test_locations_urls_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert hdb.parse_location(f"sqlite:///{tmp_path}/a.sqlite").sqlite_path == tmp_path / "a.sqlite"
    assert hdb.parse_location("sqlite:///rel/h.sqlite").sqlite_path == Path("rel/h.sqlite")
    assert hdb.parse_location("results/h.sqlite").sqlite_path == Path("results/h.sqlite")
    pg = hdb.parse_location("postgresql://ci:s3cret@db.example:5433/perf")
    assert pg.sqlite_path is None
    assert pg.url == "postgresql+psycopg://ci:s3cret@db.example:5433/perf"  # psycopg 3, always
    assert hdb.describe(pg) == "postgresql://ci:***@db.example:5433/perf"
    assert hdb.describe("postgres://ci@db/perf") == "postgresql://ci@db/perf"
    for bad in ("mysql://u:s3cret@h/db", "sqlite://", "postgresql://u:s3cret@h:port/db", " "):
        with pytest.raises(hdb.HistoryError) as exc:
            hdb.parse_location(bad)
        assert "s3cret" not in str(exc.value) and "postgresql://USER@HOST" in str(exc.value)

    monkeypatch.delenv(hdb.ENV_VAR, raising=False)
    monkeypatch.delenv("INFER_PROF_RESULTS_DIR", raising=False)
    assert hdb.resolve(None) == Path(hdb.DEFAULT_LOCATION)
    monkeypatch.setenv("INFER_PROF_RESULTS_DIR", "/data/runs")
    assert hdb.resolve(None) == Path("/data/runs/history.sqlite")
    monkeypatch.setenv(hdb.ENV_VAR, "postgresql://ci@db/perf")
    assert hdb.resolve(None) == "postgresql://ci@db/perf"
    assert hdb.resolve("x.sqlite") == "x.sqlite"  # the option wins


def test_an_unusable_sqlite_location_is_a_history_error(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("")
    with pytest.raises(hdb.HistoryError, match="cannot open the SQLite database"):
        record(tmp_path / "a_file" / "h.sqlite", "r", "2024-05-01T02:00:00Z")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(hdb.HistoryError, match="not a database"):
        h.list_runs(junk)


def test_launch_spread_is_recorded_per_configuration_and_metric(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    assert h.launch_spread(db, "fp1") == {}  # a missing database has none
    h.record_launch_spread(db, "fp1", "tpot_ms.p50", 0.08, 5, source="calibrate")
    h.record_launch_spread(db, "fp1", "tpot_ms.p50", 0.09, 6)  # a new measurement replaces it
    h.record_launch_spread(db, "fp1", "output_throughput", 0.03, 6)
    h.record_launch_spread(db, "fp2", "tpot_ms.p50", 0.5, 3)
    assert h.launch_spread(db, "fp1") == {"tpot_ms.p50": (0.09, 6), "output_throughput": (0.03, 6)}
    assert h.launch_spreads(db, "fp2")["tpot_ms.p50"].cv == 0.5
    for bad in ((-0.1, 3), (float("nan"), 3), (0.1, 1)):
        with pytest.raises(ValueError):
            h.record_launch_spread(db, "fp1", "tpot_ms.p50", *bad)
