"""`infer-prof run --client-processes N`: one load point driven from N worker processes."""

import json
import signal

import pytest

from infer_prof.results.schema import load_result
from infer_prof.results.store import read_requests

from .conftest import cli, load_single_result, long_run, wait_until_served

pytestmark = pytest.mark.integration

BASE = ("run", "--model", "llama-2-7b", "--no-progress", "--no-history")


def _process_of_stream(workers: list[dict]) -> dict[int, int]:
    """Closed loop: global stream id -> worker process (worker w runs the next ``streams``)."""
    owner, first = {}, 0
    for w in workers:
        for s in range(first, first + w["streams"]):
            owner[s] = w["worker"]
        first += w["streams"]
    return owner


def test_closed_loop_over_two_processes(synthetic, tmp_path):
    server = synthetic(ttft_ms=20.0, itl_ms=5.0, tokens=16)
    out = tmp_path / "r.json"
    p = cli(
        *BASE,
        "--endpoint",
        server.url,
        "-c",
        "4",
        "-n",
        "40",
        "--input-len",
        "16",
        "--output-len",
        "16",
        "--warmup-requests",
        "4",
        "--client-processes",
        "2",
        "--output",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    assert "2 processes" in p.stdout  # the console summary's client row
    result = load_result(out)
    assert result["complete"] is True
    assert result["config"]["client_processes"] == "2"
    s = result["summary"]
    assert s["requests_completed"] == 40 and s["requests_failed"] == 0
    client = result["client"]
    assert client["processes"] == 2
    # the single-process keys are all there, pooled over the workers
    for key in (
        "timestamp_source",
        "event_loop_lag_ms",
        "queue_ms",
        "dispatch_lag_ms",
        "slot_wait_ms",
        "not_sent",
        "reads",
        "read_lag_ms",
    ):
        assert key in client, key
    assert client["timestamp_source"] == "kernel"
    assert client["read_lag_ms"]["count"] == client["reads"] > 0
    workers = client["workers"]
    assert [w["worker"] for w in workers] == [0, 1]
    assert len({w["pid"] for w in workers}) == 2
    assert all(w["error"] is None and w["streams"] == 2 and w["requests"] > 0 for w in workers)
    assert sum(w["requests"] for w in workers) == 40
    assert all(w["cpu_share"] is not None and w["reads"] > 0 for w in workers)

    recs = read_requests(out.with_name("r.requests.jsonl"))
    measured = [r for r in recs if not r.warmup]
    assert sorted(r.index for r in measured) == list(range(40))  # each spec sent once
    assert len([r for r in recs if r.warmup]) == 4
    owner = _process_of_stream(workers)
    assert {owner[r.worker] for r in measured} == {0, 1}  # both processes sent requests
    assert all(r.ok and r.output_tokens == 16 for r in measured)


def test_open_loop_over_two_processes(synthetic, tmp_path):
    server = synthetic(ttft_ms=10.0, itl_ms=2.0, tokens=8)
    out = tmp_path / "r.json"
    p = cli(
        *BASE,
        "--endpoint",
        server.url,
        "--rate",
        "100",
        "--max-concurrency",
        "8",
        "-n",
        "40",
        "--input-len",
        "8",
        "--output-len",
        "8",
        "--warmup-requests",
        "0",
        "--client-processes",
        "2",
        "--json",
        "--output",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["requests_completed"] == 40
    client = load_result(out)["client"]
    assert client["processes"] == 2 and len(client["workers"]) == 2
    assert client["dispatch_lag_ms"]["count"] == 40 and client["not_sent"] == 0
    assert all(w["streams"] == 4 for w in client["workers"])  # the cap of 8, split
    recs = read_requests(out.with_name("r.requests.jsonl"))
    # open loop: a record's worker is its process; arrivals are dealt round-robin
    assert {r.worker for r in recs} == {0, 1}
    assert all(r.index % 2 == r.worker for r in recs)


def test_ctrl_c_keeps_what_was_measured(synthetic, tmp_path):
    server = synthetic(ttft_ms=10.0, itl_ms=10.0, tokens=50)
    proc = long_run(server.url, tmp_path, "--no-history", "--client-processes", "2")
    wait_until_served(server.url, 8)  # measuring for a while
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err  # as the single-process run: incomplete
    result = load_single_result(tmp_path)
    assert result["complete"] is False
    assert result["incomplete_reason"] == "interrupted"
    assert result["client"]["processes"] == 2
    assert result["client"]["reader"] == "c"  # the compiled hot path, as every run here
    s = result["summary"]
    assert s["requests_completed"] > 0
    assert s["failure_kinds"].get("cancelled", 0) >= 1  # streams in flight at Ctrl-C
    recs = read_requests(next(tmp_path.glob("*.requests.jsonl")))
    assert len(recs) == s["requests_completed"] + s["requests_failed"] < 400
    owner = _process_of_stream(result["client"]["workers"])
    assert {owner[r.worker] for r in recs if r.ok} == {0, 1}
