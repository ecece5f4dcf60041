"""A run's client holds bounded memory however many requests it makes: the driver keeps the
records of the requests in flight only (the ended ones are spooled to disk) and a bounded
number of pending read-lag samples, while the result's figures are those of every request in
the per-request file (nothing lost, the numbers exact).

Watched from inside a real ``infer-prof run`` against the synthetic server: a probe counts the
request records alive (made and not yet freed) and the read-lag samples waiting in a list,
each time the driver makes a request's record, and notes the most of each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infer_prof.core.measurement.metrics import stream_span_s, summarize_run
from infer_prof.results.schema import load_result
from infer_prof.results.store import read_requests

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import atexit, json, runpy, sys, weakref
from infer_prof.core.measurement import metrics
from infer_prof.loadgen import client_health, closed_loop

most = {"records_alive": 0, "records_made": 0, "pending_read_lags": 0}
alive = [0]
stats = []  # every ReadStats made
init_record, init_stats = metrics.RequestRecord.__init__, client_health.ReadStats.__init__
new_record = closed_loop.new_record

def gone():
    alive[0] -= 1

def counting_record_init(self, *a, **k):
    init_record(self, *a, **k)
    alive[0] += 1
    weakref.finalize(self, gone)

def watching_new_record(*a, **k):  # the driver makes a request's record: the load runs
    rec = new_record(*a, **k)
    most["records_made"] += 1
    most["records_alive"] = max(most["records_alive"], alive[0])
    for s in stats:
        most["pending_read_lags"] = max(most["pending_read_lags"], len(s.read_lag_ns))
    return rec

def keeping_stats_init(self, *a, **k):
    init_stats(self, *a, **k)
    stats.append(self)

metrics.RequestRecord.__init__ = counting_record_init
client_health.ReadStats.__init__ = keeping_stats_init
closed_loop.new_record = watching_new_record
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(most)))
sys.argv = ["infer_prof", *sys.argv[2:]]
runpy.run_module("infer_prof", run_name="__main__")
"""

STREAMS, REQUESTS, TOKENS = 32, 3000, 16


def test_the_client_holds_the_requests_in_flight_not_the_run(synthetic, tmp_path):
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=TOKENS)
    out, most_file = tmp_path / "r.json", tmp_path / "most.json"
    p = subprocess.run(
        [sys.executable, "-c", PROBE, str(most_file), "run", "--model", "llama-2-7b",
         "--endpoint", server.url, "-c", str(STREAMS), "-n", str(REQUESTS), "--input-len", "8",
         "--output-len", str(TOKENS), "--warmup-requests", "0", "--no-progress",
         "--no-history", "--output", str(out)],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    most = json.loads(most_file.read_text())
    assert most["records_made"] >= REQUESTS
    # records alive while the load ran: those in flight (one a stream, and the one each stream
    # has just finished), not the 3,000 of the run
    assert most["records_alive"] <= 2 * STREAMS + 2, most
    # pending read lags: at most a batch, and the reads of the requests in flight beside it
    assert most["pending_read_lags"] <= 1024 + STREAMS * (TOKENS + 2), most
    assert [f.name for f in tmp_path.iterdir() if f.name.startswith(".")] == []  # no spool left

    result = load_result(out)
    recs = read_requests(out.with_name("r.requests.jsonl"))
    measured = [r for r in recs if not r.warmup]
    assert [r.index for r in measured] == list(range(REQUESTS))  # each once, in send order
    assert all(r.ok and r.output_tokens == TOKENS and len(r.chunk_ns) >= 2 for r in measured)
    # the result's figures are those of the per-request file, exactly
    again = json.loads(json.dumps(summarize_run(recs, rate_window_s=stream_span_s(recs))
                                  .to_dict()))
    assert {k: result["summary"][k] for k in again} == again
    client = result["client"]
    assert client["read_lag_ms"]["count"] == client["reads"] >= REQUESTS * 2
    assert client["read_lag_exact"] is True and client.get("spool_error") is None
