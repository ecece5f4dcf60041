"""`infer-prof run --endpoint` against a misbehaving server: the summary names each failure
kind with its count, the exit code is README's (4 when not one measured request completed,
else 0), the run ends by itself, and the per-request file holds every request the server read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infer_prof.results.store import read_requests

from .conftest import cli
from .misbehaving_server import MisbehavingServer, Reply
from .test_misbehaving_servers import HTML, RATE_LIMITED
from .test_stream_client import full_stream

pytestmark = pytest.mark.integration

RUN = ("run", "--model", "llama-2-7b", "--no-progress", "-c", "2", "-n", "6", "--input-len", "8",
       "--output-len", "8", "--warmup-requests", "1", "--timeout", "10")
HTML_200 = (b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: %d\r\n\r\n" % len(HTML)
            + HTML)


def run(server: MisbehavingServer, tmp_path: Path, *extra: str):
    out = tmp_path / "r.json"
    p = cli(*RUN, "--endpoint", server.url, "--output", str(out), *extra, timeout=120)
    records = read_requests(out.with_name("r.requests.jsonl"))
    assert len(records) == server.requests  # every request the server read is recorded
    return p, out, records


@pytest.mark.parametrize(("reply", "kind"), [(RATE_LIMITED, "rate_limited"),
                                             (HTML_200, "not_sse")])
def test_every_request_failing_exits_4_naming_the_kind_and_count(tmp_path, reply, kind):
    with MisbehavingServer(Reply([reply])) as server:  # no warm-up: the load itself fails
        p, out, records = run(server, tmp_path, "--json", "--warmup-requests", "0")
    assert p.returncode == 4, p.stderr
    measured = [r for r in records if not r.warmup]
    assert len(measured) >= 6 and {r.error for r in records} == {kind}
    line = p.stderr.strip().splitlines()[-1]
    assert f"every measured request failed ({kind}: {len(measured)})" in line, p.stderr
    summary = json.loads(out.read_text())["summary"]
    assert summary["failure_kinds"] == {kind: len(measured)}
    assert summary["requests_completed"] == 0
    if kind == "rate_limited":
        assert {r.retry_after_s for r in records} == {7.0}
        assert "Retry-After: 7" in line and "lower --concurrency" in line


@pytest.mark.parametrize(("reply", "kind"), [(RATE_LIMITED, "rate_limited"),
                                             (HTML_200, "not_sse")])
def test_a_warm_up_that_fails_whole_stops_before_the_load_naming_the_kind(tmp_path, reply, kind):
    with MisbehavingServer(Reply([reply])) as server:
        p, out, records = run(server, tmp_path)
    assert p.returncode == 4, p.stderr
    assert records and all(r.warmup for r in records) and {r.error for r in records} == {kind}
    line = p.stderr.strip().splitlines()[-1]
    assert f"every warm-up request failed, so the load was not sent ({kind}: {len(records)})" in (
        line
    ), p.stderr
    assert json.loads(out.read_text())["incomplete_reason"] == "warmup_failed"


def test_some_requests_rate_limited_the_console_summary_counts_them(tmp_path):
    good = b"".join(full_stream(8, compact=True))

    def reply(number: int, _head: bytes) -> Reply:
        return Reply([RATE_LIMITED if number % 3 == 2 else good])

    with MisbehavingServer(reply) as server:
        p, out, records = run(server, tmp_path)
    assert p.returncode == 0, p.stderr
    measured = [r for r in records if not r.warmup]
    failed = [r for r in measured if r.error]
    assert failed and {r.error for r in failed} == {"rate_limited"}
    completed = len(measured) - len(failed)
    assert f"{completed} / {len(failed)} (rate_limited: {len(failed)})" in p.stdout, p.stdout
    summary = json.loads(out.read_text())["summary"]
    assert summary["failure_kinds"] == {"rate_limited": len(failed)}
    assert summary["requests_completed"] == completed
