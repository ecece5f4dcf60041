"""The open-loop driver against the real synthetic streaming server."""

import asyncio
import random

import pytest

from infer_prof.core.measurement.metrics import queue_ns, summarize_run
from infer_prof.core.workload.arrivals import ArrivalProcess
from infer_prof.loadgen.closed_loop import DriverIO, LiveCounters, RequestSpec
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.loadgen.open_loop import OpenLoopHealth, OpenLoopPlan, run_open_loop
from infer_prof.loadgen.openai_requests import build_completion_request

pytestmark = pytest.mark.integration


def _run(url, specs, plan, warmup=()):
    ep = Endpoint.from_url(url)

    def build(spec):
        return build_completion_request(
            ep, "synthetic", spec.prompt, spec.max_tokens, request_id=f"ol-{spec.index}"
        )

    records, health, counters = [], OpenLoopHealth(), LiveCounters()
    asyncio.run(
        run_open_loop(
            DriverIO(ep, build, counters, asyncio.Event(), records), list(warmup), specs, plan,
            health
        )
    )
    return records, health, counters


def test_fixed_rate_is_achieved_within_one_percent(synthetic):
    server = synthetic(ttft_ms=20.0, itl_ms=5.0, tokens=8)
    rate, n = 40.0, 120
    offsets = ArrivalProcess(rate, "constant").offsets(random.Random(0), n)
    specs = [(RequestSpec(i, [7] * 8, 8, 8), o) for i, o in enumerate(offsets)]
    warm = [RequestSpec(-1 - i, [7] * 8, 8, 2, warmup=True) for i in range(4)]
    records, health, counters = _run(server.url, specs, OpenLoopPlan(30.0), warm)
    measured = [r for r in records if not r.warmup]
    assert len(measured) == n and all(r.ok for r in measured)
    assert counters.completed == n and counters.warmup_done == 4 and counters.phase == "done"
    achieved = health.achieved_rate(records)
    assert achieved is not None and abs(achieved / rate - 1) <= 0.01
    # every request is scheduled at t0 + offset and sent no earlier
    assert [r.scheduled_ns - health.t0_ns for r in measured] == [int(o * 1e9) for o in offsets]
    assert all(r.send_ns >= r.scheduled_ns for r in measured)
    assert len(health.dispatch_lag_ns) == n and health.cap_bound == 0
    # open loop overlaps requests: 40/s with ~55 ms E2E keeps 2-3 in flight
    summary = summarize_run(records)
    assert summary.requests_completed == n


def test_waiting_for_a_slot_is_reported_as_queue_time(synthetic):
    # 30 requests at once (rate inf), at most 5 in flight, each ~20 + 7 * 5 = 55 ms long:
    # the last ones wait about 5 rounds of 55 ms for a slot
    server = synthetic(ttft_ms=20.0, itl_ms=5.0, tokens=8)
    specs = [(RequestSpec(i, [7] * 8, 8, 8), 0.0) for i in range(30)]
    records, health, _ = _run(server.url, specs, OpenLoopPlan(30.0, max_concurrency=5))
    assert all(r.ok for r in records) and len(records) == 30
    assert health.cap_bound == 25
    queues = sorted(queue_ns(r) for r in records)
    assert queues[-1] >= 4 * 50e6  # the last waited >= 4 full rounds, and it is reported
    ttfts = summarize_run(records).ttft_ms
    assert ttfts is not None and ttfts.max < 100  # ... and not hidden inside TTFT
    assert max(health.slot_wait_ns) >= 4 * 50e6


def test_duration_bound_stops_sending(synthetic):
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=4)
    specs = [(RequestSpec(i, [7] * 4, 4, 4), i * 0.05) for i in range(100)]  # 20/s over 5 s
    records, health, _ = _run(server.url, specs, OpenLoopPlan(10.0, duration_s=0.5))
    assert len(records) == 10  # offsets 0.00 .. 0.45 are before the 0.5 s deadline
    assert health.not_sent == 1
