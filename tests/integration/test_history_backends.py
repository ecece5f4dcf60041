"""The history on both backends, as runners and users use it: SQLite files and a real PostgreSQL
server that the tests start (tests/postgres.py). Eight processes recording 50 runs each at once
lose nothing and ``history:7`` picks the right runs, and two forked writers of one SQLite file
lose nothing either; import/export round trips byte for byte; a database of a newer schema, a
bad URL, an unreachable server and a wrong password are one-line errors with exit 2 and never
show the password."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, insert, inspect

from infer_prof.results import history as h
from infer_prof.results import history_database as hdb
from infer_prof.results import history_schema as hs
from infer_prof.results.document import decode_result as typed
from infer_prof.results.identity import config_fingerprint
from tests import postgres
from tests.integration import history_writer as writer

REPO = Path(__file__).resolve().parents[2]
WRITERS, RUNS_EACH = 8, 50


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Any:
    """``python -m infer_prof ARGS`` with INFER_PROF_HISTORY and PG* unset unless given."""
    base = {k: v for k, v in os.environ.items() if k != hdb.ENV_VAR and not k.startswith("PG")}
    return subprocess.run(
        [sys.executable, "-m", "infer_prof", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**base, **(env or {})},
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty history: a SQLite URL under tmp_path, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/team/history.sqlite"
    return str(request.getfixturevalue("pg_url"))


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    return lines[0]


def test_eight_writers_at_once_lose_nothing_and_history_7_is_right(
    location: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    files = tmp_path / "files"
    files.mkdir()
    env = {k: v for k, v in os.environ.items() if k != hdb.ENV_VAR}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.history_writer",
                location,
                str(w),
                str(RUNS_EACH),
                str(go),
                str(files),
            ],
            cwd=REPO,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WRITERS)
    ]
    time.sleep(1.0)  # let every writer import and wait
    t0 = time.monotonic()
    go.touch()
    errors = [p.communicate(timeout=300)[1] for p in procs]
    elapsed = time.monotonic() - t0
    assert [p.returncode for p in procs] == [0] * WRITERS, errors
    print(f"\n{WRITERS} x {RUNS_EACH} runs recorded at once in {elapsed:.1f} s ({location[:10]})")

    assert h.count_runs(location) == WRITERS * RUNS_EACH
    everything = h.list_runs(location, limit=0)
    assert {r.run_id for r in everything} == {
        f"w{w}-r{i:03d}" for w in range(WRITERS) for i in range(RUNS_EACH)
    }
    # newest first by start time, whoever wrote them
    seqs = [1000 + writer.seq(w, i) for w in range(WRITERS) for i in range(RUNS_EACH)]
    assert [r.summary["output_throughput"] for r in everything] == sorted(seqs, reverse=True)
    for w in range(WRITERS):
        assert len(h.list_runs(location, label=f"writer={w}", limit=0)) == RUNS_EACH
    stored = h.load_files(location, "w3-r017")
    assert stored is not None
    assert stored.result_text == (files / "w3-r017.json").read_text()

    # what history:N looks up is indexed
    eng = create_engine(hdb.parse_location(location).url)
    indexes = {i["name"]: i["column_names"] for i in inspect(eng).get_indexes("runs")}
    eng.dispose()
    assert indexes["runs_fp_time"] == ["config_fingerprint", "started_at"]

    # history:7 of each configuration: the 7 newest of the ~100 runs that share it
    for k in range(writer.CONFIGS):
        fp = config_fingerprint(typed(writer.result(0, k)))
        mine = sorted(
            (
                (writer.seq(w, i), f"w{w}-r{i:03d}")
                for w in range(WRITERS)
                for i in range(RUNS_EACH)
                if i % writer.CONFIGS == k
            ),
            reverse=True,
        )
        assert len(mine) == WRITERS * len(range(k, RUNS_EACH, writer.CONFIGS))
        assert [r.run_id for r in h.last_runs(location, fp, 7)] == [rid for _, rid in mine[:7]]
        series = h.metric_series(location, fp, "output_throughput")
        assert [v for _, _, v in series] == [1000.0 + s for s, _ in sorted(mine)]

    # and the gate reads them: a current run of configuration 0, baseline from the history
    # named by INFER_PROF_HISTORY
    cur = writer.result(0, 0)
    cur["run_id"], cur["started_at"] = "current", "2026-03-02T00:00:00+00:00"
    cur_path = tmp_path / "current.json"
    cur_path.write_text(json.dumps(cur))
    p = cli(
        "regress",
        "--baseline",
        "history:7",
        "--current",
        str(cur_path),
        "--json",
        env={hdb.ENV_VAR: location},
    )
    assert p.returncode in (0, 1), p.stderr
    out = {m["name"]: m for m in json.loads(p.stdout)["metrics"]}
    fp0 = config_fingerprint(typed(cur))
    want = [r.summary["output_throughput"] for r in h.last_runs(location, fp0, 7)]
    assert out["output_throughput"]["n_baseline"] == 7
    # the gate judges over runs: a side's value is the geometric mean of its runs' values
    assert out["output_throughput"]["baseline"] == pytest.approx(statistics.geometric_mean(want))


def _bump_schema(location: str, version: int) -> None:
    loc = hdb.parse_location(location)
    eng = create_engine(loc.url)
    with eng.begin() as conn:
        conn.execute(
            insert(hs.schema().schema_version).values(version=version, applied_at="future")
        )
    eng.dispose()


def _writer(db: str, worker: int, count: int, barrier: Any) -> None:
    barrier.wait()
    for i in range(count):
        h.record_run(db, h.RunEntry(
            run_id=f"w{worker}-{i}",
            started_at=f"2024-05-01T02:{worker:02d}:{i:02d}Z",
            config_fingerprint=f"fp-{worker}",
            summary={"output_throughput": float(i), "ttft_ms": {"p99": float(worker)}},
            labels={"worker": str(worker)},
            complete=True,
        ))


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "h.sqlite")
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(db, w, 50, barrier)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    runs = h.list_runs(db, limit=0)
    assert len(runs) == 100
    assert {r.run_id for r in runs} == {f"w{w}-{i}" for w in range(2) for i in range(50)}
    for w in range(2):
        series = h.metric_series(db, f"fp-{w}", "output_throughput")
        assert [v for _, _, v in series] == [float(i) for i in range(50)]
        assert len(h.list_runs(db, label=f"worker={w}", limit=0)) == 50


def test_a_database_of_a_newer_schema_is_refused(location: str, tmp_path: Path) -> None:
    r = writer.result(1, 1)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(r))
    p = cli("history", "import", str(path), "--history", location)
    assert p.returncode == 0, p.stderr
    assert hdb.schema_version_of(location) == hs.SCHEMA_VERSION
    _bump_schema(location, hs.SCHEMA_VERSION + 1)
    for args in (
        ("history", "--history", location),
        ("history", "import", str(path), "--history", location),
        ("regress", "--baseline", "history:3", "--history", location, "--current", str(path)),
        ("report", "history:1", "--history", location, "-o", str(tmp_path / "r.html")),
    ):
        p = cli(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        line = _one_error_line(p.stderr)
        assert f"schema version {hs.SCHEMA_VERSION + 1} is newer" in line
        assert "upgrade infer-prof" in line
        assert postgres.PASSWORD not in p.stderr + p.stdout
    assert hdb.schema_version_of(location) == hs.SCHEMA_VERSION + 1  # nothing was changed


def test_import_is_idempotent_and_export_writes_the_files_back(
    location: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        r = writer.result(2, i)
        r["requests_file"] = f"{r['run_id']}.requests.jsonl"
        (src / f"{r['run_id']}.json").write_text(json.dumps(r, indent=1) + "\n")
        lines = "".join(json.dumps({"index": j, "ttft_ms": 10.0 + j}) + "\n" for j in range(i))
        (src / r["requests_file"]).write_text(lines)
    (src / "notes.json").write_text("{}")  # not a result: skipped in a folder
    p = cli("history", "import", str(src), "--history", location)
    assert p.returncode == 0, p.stderr
    assert "imported 5 run(s)" in p.stdout
    p = cli("history", "import", str(src), str(src / "w2-r003.json"), "--history", location)
    assert p.returncode == 0, p.stderr
    assert "5 already recorded" in p.stdout
    assert h.count_runs(location) == 5

    out = tmp_path / "out"
    p = cli("history", "--history", location, "export", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "exported 5 run(s)" in p.stdout and "(5 with per-request records)" in p.stdout
    assert sorted(q.name for q in out.iterdir()) == sorted(
        q.name for q in src.iterdir() if q.name != "notes.json"
    )
    for q in out.iterdir():
        assert q.read_bytes() == (src / q.name).read_bytes(), q.name

    p = cli(
        "history",
        "export",
        "--history",
        location,
        "-o",
        str(tmp_path / "one"),
        "--run-id",
        "w2-r001",
    )
    assert p.returncode == 0, p.stderr
    assert sorted(q.name for q in (tmp_path / "one").iterdir()) == [
        "w2-r001.json",
        "w2-r001.requests.jsonl",
    ]
    p = cli("history", "export", "--history", location, "-o", str(out), "--run-id", "nope")
    assert p.returncode == 2 and "nope" in _one_error_line(p.stderr)


def test_connection_problems_are_one_line_and_exit_2(
    pg_server: postgres.PgServer, tmp_path: Path
) -> None:
    db = pg_server.new_database()
    r = tmp_path / "r.json"
    r.write_text(json.dumps(writer.result(0, 0)))
    cases = {
        "unreachable": (
            f"postgresql://{postgres.USER}:{postgres.PASSWORD}@127.0.0.1:{postgres.free_port()}"
            f"/{db}",
            "check that the server runs",
        ),
        "wrong password": (pg_server.url(db, password=postgres.PASSWORD + "x"), "password"),
        "no such database": (pg_server.url("no_such_db"), "does not exist"),
        "bad scheme": (f"mysql://{postgres.USER}:{postgres.PASSWORD}@127.0.0.1/x", "scheme"),
        "bad port": (f"postgresql://u:{postgres.PASSWORD}@127.0.0.1:port/x", "cannot be parsed"),
    }

    def check(name: str, *args: str) -> None:
        url, expect = cases[name]
        p = cli(*args)
        assert p.returncode == 2, (name, args, p.stdout, p.stderr)
        line = _one_error_line(p.stderr)
        assert expect in line, (name, line)
        assert postgres.PASSWORD not in p.stdout + p.stderr, (name, line)

    # every problem through one command, and every command with two problems (one of the
    # server, one of the URL); a CLI process takes seconds to start on a busy machine
    for name, (url, _) in cases.items():
        check(name, "history", "--history", url)
    for name in ("wrong password", "bad scheme"):
        url = cases[name][0]
        check(name, "history", "import", str(r), "--history", url)
        check(name, "history", "export", "-o", str(tmp_path / "x"), "--history", url)
        check(name, "regress", "--baseline", "history:7", "--history", url, "--current", str(r))
        check(name, "report", "history:1", "--history", url, "-o", str(tmp_path / "r.html"))
    # the same URL in the environment instead of --history
    p = cli("history", env={hdb.ENV_VAR: cases["wrong password"][0]})
    assert p.returncode == 2 and "password authentication failed" in _one_error_line(p.stderr)


def test_password_from_pgpassword_or_pgpass(pg_server: postgres.PgServer, tmp_path: Path) -> None:
    db = pg_server.new_database()
    url = pg_server.url(db, password=None)  # no password in the URL
    r = tmp_path / "r.json"
    r.write_text(json.dumps(writer.result(0, 0)))
    p = cli("history", "import", str(r), "--history", url)
    assert p.returncode == 2 and "PGPASSWORD or ~/.pgpass" in _one_error_line(p.stderr)
    p = cli("history", "import", str(r), "--history", url, env={"PGPASSWORD": postgres.PASSWORD})
    assert p.returncode == 0, p.stderr
    home = tmp_path / "home"
    home.mkdir()
    pgpass = home / ".pgpass"
    pgpass.write_text(f"127.0.0.1:{pg_server.port}:{db}:{postgres.USER}:{postgres.PASSWORD}\n")
    pgpass.chmod(0o600)
    p = cli("history", "--history", url, "--json", env={"HOME": str(home)})
    assert p.returncode == 0, p.stderr
    assert [x["run_id"] for x in json.loads(p.stdout)] == ["w0-r000"]
    assert postgres.PASSWORD not in p.stdout + p.stderr


def _run(server_url: str, folder: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
    return cli(
        "run", "--endpoint", server_url, "--model", "llama-2-7b", "-c", "4", "-n", "40",
        "--input-len", "32", "--output-len", "16", "--results-dir", str(folder),
        "--no-progress", *extra, env=env,
    )  # fmt: skip


def test_a_fleet_records_into_postgres_and_the_gate_reads_it_after_the_runners_are_gone(
    pg_url: str, tmp_path: Path
) -> None:
    from infer_prof.run.calibrate import start_synthetic

    server = start_synthetic(20.0, 20.0, 16)
    try:  # two "runners": one names the database with --history, one in the environment
        first = _run(server.url, tmp_path / "runner1", "--history", pg_url)
        second = _run(server.url, tmp_path / "runner2", env={hdb.ENV_VAR: pg_url})
    finally:
        server.stop()
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    written = {
        q.name: q.read_bytes() for d in ("runner1", "runner2") for q in (tmp_path / d).iterdir()
    }
    assert sum(n.endswith(".requests.jsonl") for n in written) == 2
    for name, data in written.items():  # the password is in no result, requests or log file
        assert postgres.PASSWORD.encode() not in data, name
    for p in (first, second):
        assert postgres.PASSWORD not in p.stdout + p.stderr
    [r1] = [json.loads(v) for n, v in written.items() if n.endswith(".json")][:1]
    assert r1["config"]["history_db"] == hdb.describe(pg_url) and "***" in hdb.describe(pg_url)

    listed = cli("history", "--history", pg_url, "--json")
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert len(runs) == 2 and len({r["fingerprint"] for r in runs}) == 1
    newest, older = runs[0]["run_name"], runs[1]["run_name"]  # exported as <run name>.json

    # the runners are thrown away; their files come back out of the database, byte for byte
    for d in ("runner1", "runner2"):
        for q in (tmp_path / d).iterdir():
            q.unlink()
    out = tmp_path / "exported"
    p = cli("history", "export", "--history", pg_url, "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert {q.name: q.read_bytes() for q in out.iterdir()} == written

    # the gate: the newest run against history:1 (the older one, its files only in the database):
    # the request-level gate (--within-run) judges latency on the per-request samples the
    # database kept, not on summaries
    gate = cli("regress", "--baseline", "history:1", "--history", pg_url, "--within-run",
               "--current", str(out / f"{newest}.json"), "--json")  # fmt: skip
    assert gate.returncode in (0, 1), gate.stderr
    verdict = json.loads(gate.stdout)
    assert "last 1 run(s) in postgresql://infer:***@" in verdict["baseline"], verdict["baseline"]
    assert older not in verdict["current"]
    assert not any("requests files not at hand" in n for n in verdict["notes"]), verdict["notes"]
    ttft = {m["name"]: m for m in verdict["metrics"]}["ttft_ms.p50"]
    assert ttft["n_baseline"] == 40  # one sample per request of the baseline run

    report = cli("report", "history:2", "--history", pg_url, "-o", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stderr
    assert "(2 runs" in report.stdout and "not kept" not in report.stderr


def test_a_run_whose_history_is_unreachable_still_writes_its_result(tmp_path: Path) -> None:
    from infer_prof.run.calibrate import start_synthetic

    down = f"postgresql://{postgres.USER}:{postgres.PASSWORD}@127.0.0.1:{postgres.free_port()}/perf"
    server = start_synthetic(20.0, 20.0, 16)
    try:
        p = _run(server.url, tmp_path / "res", "--history", down)
        bad = _run(server.url, tmp_path / "bad", "--history", "mysql://u@h/db")
    finally:
        server.stop()
    assert p.returncode == 5, p.stdout + p.stderr  # 5: the history write failed
    results = sorted((tmp_path / "res").glob("*.json"))
    assert len(results) == 1 and json.loads(results[0].read_text())["complete"] is True
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("warning: history postgresql://infer:***@127.0.0.1")  # said first
    assert lines[-1].startswith("error: history postgresql://infer:***@127.0.0.1")
    assert f"infer-prof history import {results[0]}" in lines[-1]
    assert postgres.PASSWORD not in p.stdout + p.stderr + results[0].read_text()
    # a malformed URL is bad input: refused before anything runs
    assert bad.returncode == 2 and "unsupported scheme 'mysql'" in _one_error_line(bad.stderr)
    assert not (tmp_path / "bad").exists()
