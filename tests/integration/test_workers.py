"""Load spread over worker processes, against the real synthetic streaming server."""

import random

import pytest

from infer_prof.core.measurement.accuracy import compare_to_truth
from infer_prof.core.workload.arrivals import ArrivalProcess
from infer_prof.loadgen.closed_loop import RequestSpec
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.loadgen.open_loop import OpenLoopPlan
from infer_prof.loadgen.openai_requests import build_completion_request
from infer_prof.loadgen.worker_process import split_evenly
from infer_prof.loadgen.worker_shared import WorkerJob
from infer_prof.loadgen.workers import merge_health, run_in_workers
from infer_prof.servers.http_get import get_json

pytestmark = pytest.mark.integration


def _builder(ep, prefix):
    def build(spec):
        return build_completion_request(
            ep, "synthetic", spec.prompt, spec.max_tokens, request_id=f"{prefix}{spec.index}"
        )

    return build


def test_split_evenly():
    # (choose_processes: tests/unit/test_client_processes.py)
    assert split_evenly(10, 3) == [4, 3, 3] and sum(split_evenly(1024, 2)) == 1024


def test_closed_loop_over_two_processes_is_one_closed_loop(synthetic):
    server = synthetic(ttft_ms=20.0, itl_ms=5.0, tokens=16)
    ep = Endpoint.from_url(server.url)
    specs = [RequestSpec(i, [5] * 8, 8, 16) for i in range(60)]
    warm = [RequestSpec(-1 - i, [5] * 8, 8, 2, warmup=True) for i in range(4)]
    job = WorkerJob("closed", ep, _builder(ep, "wc-"), 30.0, warm, 6, None, specs)
    records, health = run_in_workers(2, job)
    measured = [r for r in records if not r.warmup]
    # every spec sent exactly once across both processes (shared claim counter)
    assert sorted(r.index for r in measured) == list(range(60))
    assert all(r.ok for r in records)
    assert sorted({r.worker for r in measured}) == [0, 1, 2, 3, 4, 5]  # 3 + 3 streams
    assert [h.worker for h in health] == [0, 1] and all(h.error is None for h in health)
    assert len({h.pid for h in health}) == 2
    assert all(h.cpu_s > 0 and h.reads > 0 and h.streams == 3 for h in health)
    assert sum(h.requests for h in health) == 60
    merged = merge_health(health)
    assert merged["processes"] == 2 and merged["read_lag_ms"]["count"] == merged["reads"]
    # records from both processes are on one clock: compare with the server's truth
    truth = get_json(f"{server.url}/truth")["requests"]
    rep = compare_to_truth(records, truth, "wc-")
    assert rep.matched_requests == 60
    assert abs(rep.ttft.p50_error_ms) <= 1.0
    assert abs(rep.itl.p50_error_ms) <= 0.5


def test_open_loop_over_two_processes_keeps_the_global_schedule(synthetic):
    server = synthetic(ttft_ms=10.0, itl_ms=2.0, tokens=4)
    ep = Endpoint.from_url(server.url)
    offsets = ArrivalProcess(50.0, "poisson").offsets(random.Random(3), 40)
    arrivals = [(RequestSpec(i, [5] * 4, 4, 4), o) for i, o in enumerate(offsets)]
    job = WorkerJob(
        "open",
        ep,
        _builder(ep, "wo-"),
        30.0,
        arrivals=arrivals,
        open_plan=OpenLoopPlan(30.0, max_concurrency=8),
    )
    records, health = run_in_workers(2, job)
    assert sorted(r.index for r in records) == list(range(40)) and all(r.ok for r in records)
    # dealt round-robin: worker w sent indices w, w + 2, ...
    assert all(r.index % 2 == r.worker for r in records)
    # one t0 for both processes: scheduled - offset is the same for every request
    t0s = {r.scheduled_ns - int(offsets[r.index] * 1e9) for r in records}
    assert len(t0s) == 1
    assert all(h.streams == 4 for h in health)  # the cap of 8, split
    assert sum(len(h.dispatch_lag_ns) for h in health) == 40
