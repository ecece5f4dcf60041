"""Runs that share a folder or a history lose nothing: each run has a unique ID (UUIDv7), its
files are created exclusively, the history keys runs by that ID, and histories of the previous
schema migrate in place keeping every row (issue 24, part 1)."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from infer_prof.results import history as h
from infer_prof.results import history_database as hdb

from .conftest import REPO, cli

pytestmark = pytest.mark.integration
UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def _three_runs_together(server_url: str, results: Path, *extra: str) -> list[tuple[int, str]]:
    """The issue's reproduction: three `run --endpoint ... -c 2 -n 8` started together in one
    folder, without --output; (exit code, stderr) of each."""
    args = [
        sys.executable, "-m", "infer_prof", "run", "--model", "llama-2-7b", "--no-progress",
        "--endpoint", server_url, "-c", "2", "-n", "8", "--input-len", "8", "--output-len",
        "8", "--warmup-requests", "0", "--min-requests", "1", "--min-duration", "0",
        "--results-dir", str(results), *extra,
    ]
    procs = [
        subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    out = []
    for p in procs:
        _, err = p.communicate(timeout=240)
        out.append((p.returncode, err))
    return out


def _check_three(results: Path, outs: list[tuple[int, str]]) -> list[dict]:
    for code, err in outs:
        assert code == 0, err
    files = sorted(results.glob("*.json"))
    assert len(files) == 3, files
    printed = [line.split("result: ", 1)[1].strip() for _, err in outs
               for line in err.splitlines() if line.startswith("result: ")]
    assert sorted(printed) == [str(f) for f in files]  # each run names its own file
    docs = [json.loads(f.read_text()) for f in files]
    assert len({d["run_id"] for d in docs}) == 3
    assert all(UUID7.match(d["run_id"]) for d in docs)
    for f, d in zip(files, docs, strict=True):
        assert d["complete"] and d["summary"]["requests_completed"] == 8
        reqs = (results / d["requests_file"]).read_text().splitlines()
        assert len([r for r in reqs if not json.loads(r)["warmup"]]) == 8
        assert f.name.startswith(d["run_name"])  # the readable name, -2/-3 when taken
    names = {d["run_name"] for d in docs}
    print(f"run names: {sorted(names)} ({3 - len(names)} shared)")
    return docs


def test_three_runs_started_together_keep_three_results_and_rows(synthetic, tmp_path):
    server = synthetic(ttft_ms=5.0, itl_ms=2.0, tokens=8)
    results = tmp_path / "results"
    outs = _three_runs_together(server.url, results)
    docs = _check_three(results, outs)
    runs = h.list_runs(results / "history.sqlite", limit=0)
    assert sorted(r.run_id for r in runs) == sorted(d["run_id"] for d in docs)
    assert {r.run_name for r in runs} == {d["run_name"] for d in docs}


def test_three_runs_together_into_one_postgresql_history(synthetic, tmp_path, pg_url):
    server = synthetic(ttft_ms=5.0, itl_ms=2.0, tokens=8)
    results = tmp_path / "results"
    outs = _three_runs_together(server.url, results, "--history", pg_url)
    docs = _check_three(results, outs)
    runs = h.list_runs(pg_url, limit=0)
    assert sorted(r.run_id for r in runs) == sorted(d["run_id"] for d in docs)


def test_same_name_is_two_rows_and_a_second_import_is_one(tmp_path):
    db = tmp_path / "h.sqlite"
    doc = _result("0192f0c4-1a2b-7c3d-8e4f-000000000001", "20261124-043655-tiny-llama-c2")
    twin = _result("0192f0c4-1a2b-7c3d-8e4f-000000000002", "20261124-043655-tiny-llama-c2")
    for i, d in enumerate((doc, twin, doc)):  # the first one imported twice
        path = tmp_path / f"r{i}.json"
        path.write_text(json.dumps(d))
        p = cli("history", "import", str(path), "--history", str(db))
        assert p.returncode == 0, p.stderr
    runs = h.list_runs(db, limit=0)
    assert sorted(r.run_id for r in runs) == [doc["run_id"], twin["run_id"]]
    assert {r.run_name for r in runs} == {doc["run_name"]}
    listing = cli("history", "--history", str(db))
    assert listing.returncode == 0 and listing.stdout.count("20261124-043655-tiny-llama-c2") == 2
    # an old result (its readable name is its run_id) still imports, once
    old = _result("20261101-000000-tiny-llama-c4", None)
    (tmp_path / "old.json").write_text(json.dumps(old))
    for _ in range(2):
        p = cli("history", "import", str(tmp_path / "old.json"), "--history", str(db))
        assert p.returncode == 0, p.stderr
    got = h.get_runs(db, [old["run_id"]])[old["run_id"]]
    assert got.run_name == old["run_id"] and h.count_runs(db) == 3


# The schema-2 layout as the previous release created it (SQLite and PostgreSQL), verbatim.
OLD_SQLITE_DDL = """
CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at TEXT NOT NULL,
    PRIMARY KEY (version));
CREATE TABLE runs (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, started_at TEXT NOT NULL,
    config_fingerprint TEXT NOT NULL, model TEXT, gpu TEXT, precision TEXT, concurrency INTEGER,
    workload TEXT, labels_json TEXT DEFAULT '{}' NOT NULL, git_rev TEXT, result_path TEXT,
    summary_json TEXT NOT NULL, complete INTEGER NOT NULL, UNIQUE (run_id));
CREATE INDEX runs_fp_time ON runs (config_fingerprint, started_at);
CREATE INDEX runs_model ON runs (model);
CREATE TABLE metrics (run_id TEXT NOT NULL, name TEXT NOT NULL, value FLOAT NOT NULL,
    PRIMARY KEY (run_id, name),
    FOREIGN KEY(run_id) REFERENCES runs (run_id) ON DELETE CASCADE);
CREATE INDEX metrics_name ON metrics (name, run_id);
CREATE TABLE run_labels (run_id TEXT NOT NULL, "key" TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (run_id, "key"),
    FOREIGN KEY(run_id) REFERENCES runs (run_id) ON DELETE CASCADE);
CREATE INDEX run_labels_kv ON run_labels ("key", value);
CREATE TABLE run_files (run_id TEXT NOT NULL, result_json TEXT NOT NULL, requests_gz BLOB,
    PRIMARY KEY (run_id), FOREIGN KEY(run_id) REFERENCES runs (run_id) ON DELETE CASCADE);
INSERT INTO schema_version VALUES (1, '2026-11-01T00:00:00.000000Z'),
    (2, '2026-11-01T00:00:00.000000Z');
"""
OLD_PG_DDL = OLD_SQLITE_DDL.replace(
    "id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT", "id SERIAL NOT NULL PRIMARY KEY"
).replace("requests_gz BLOB", "requests_gz BYTEA")
OLD_ROWS = [  # (run_id, started_at, fingerprint, throughput)
    ("20261101-010000-tiny-llama-c4", "2026-11-01T01:00:00.000000Z", "fpA", 100.0),
    ("20261102-010000-tiny-llama-c4", "2026-11-02T01:00:00.000000Z", "fpA", 101.0),
    ("20261102-010000-tiny-llama-c8", "2026-11-02T01:00:00.000000Z", "fpB", 150.0),
]


def _old_rows_sql(sqlite: bool) -> list[str]:
    out = []
    for rid, started, fp, tput in OLD_ROWS:
        summary = json.dumps({"output_throughput": tput})
        out.append(
            "INSERT INTO runs (run_id, started_at, config_fingerprint, model, labels_json, "
            f"summary_json, complete) VALUES ('{rid}', '{started}', '{fp}', 'tiny-llama', "
            f"'{{\"night\": \"{rid[:8]}\"}}', '{summary}', 1)"
        )
        out.append(f"INSERT INTO metrics VALUES ('{rid}', 'output_throughput', {tput})")
        out.append(f"INSERT INTO run_labels VALUES ('{rid}', 'night', '{rid[:8]}')")
        out.append(f"INSERT INTO run_files VALUES ('{rid}', '{{}}', NULL)")
    if sqlite:
        out.append("PRAGMA user_version = 2")
    return out


def _check_migrated(location: str | Path) -> None:
    assert hdb.schema_version_of(location) == 2  # reading the version migrates nothing
    assert hdb.check(location)  # first use migrates
    assert hdb.schema_version_of(location) == hdb.SCHEMA_VERSION  # 4: launch_spread too
    runs = h.list_runs(location, limit=0)
    assert sorted(r.run_id for r in runs) == sorted(r[0] for r in OLD_ROWS)
    assert all(r.run_name == r.run_id for r in runs)  # the old key was the readable name
    assert [r.run_id for r in h.last_runs(location, "fpA", 7)] == [OLD_ROWS[1][0], OLD_ROWS[0][0]]
    assert len(h.list_runs(location, label="night=20261102", limit=0)) == 2
    assert h.load_files(location, OLD_ROWS[0][0]) is not None
    # a new run under an old row's readable name is a row of its own
    h.record_run(location, h.RunEntry(run_id="0192f0c4-1a2b-7c3d-8e4f-00000000000a",
                                      run_name=OLD_ROWS[0][0], started_at="2026-11-03T01:00:00Z",
                                      config_fingerprint="fpA",
                                      summary={"output_throughput": 99.0}))
    assert h.count_runs(location) == len(OLD_ROWS) + 1
    assert [v for _, _, v in h.metric_series(location, "fpA", "output_throughput")] == [
        100.0, 101.0, 99.0
    ]


def test_an_old_sqlite_history_migrates_in_place_keeping_every_row(tmp_path):
    db = tmp_path / "history.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(OLD_SQLITE_DDL + ";\n".join(_old_rows_sql(True)) + ";")
    conn.commit()
    conn.close()
    _check_migrated(db)


def test_an_old_postgresql_history_migrates_in_place_keeping_every_row(pg_url):
    eng = create_engine(hdb.parse_location(pg_url).url)
    with eng.begin() as conn:
        for stmt in OLD_PG_DDL.split(";"):
            if stmt.strip():
                conn.execute(text(stmt))
        for stmt in _old_rows_sql(False):
            conn.execute(text(stmt))
    eng.dispose()
    _check_migrated(pg_url)


def _result(run_id: str, run_name: str | None) -> dict:
    doc = _minimal_result()
    doc["run_id"] = run_id
    if run_name is None:
        doc.pop("run_name", None)
    else:
        doc["run_name"] = run_name
    doc["requests_file"] = None
    return doc


def _minimal_result() -> dict:
    return {
        "schema_version": 1,
        "kind": "infer-prof.run",
        "started_at": "2026-11-24T04:36:55+00:00",
        "complete": True,
        "config": {"model": "tiny-llama", "concurrency": 2, "num_requests": 8},
        "model": {"name": "tiny-llama"},
        "summary": {"requests_completed": 8, "output_throughput": 100.0},
    }
