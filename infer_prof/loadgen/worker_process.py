"""What one forked worker process runs: its own event loop, its share of the load (closed
loop: a share of the streams and specs claimed from the shared list; open loop: every n-th
arrival), the shared start gate, and its counters published to the parent every 0.1 s.
The parent side is :mod:`infer_prof.loadgen.workers`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import time
import traceback
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen.client_health import loop_lag_probe, loop_lag_samples
from infer_prof.loadgen.client_loop import ClientLoop, client_loop
from infer_prof.loadgen.closed_loop import (
    ClosedLoopPlan,
    DriverIO,
    LiveCounters,
    RequestSpec,
    run_closed_loop,
)
from infer_prof.loadgen.open_loop import OpenLoopHealth, OpenLoopPlan, run_open_loop
from infer_prof.loadgen.worker_shared import (
    PHASES,
    SLOTS,
    Shared,
    SharedWarmupGate,
    WorkerHealth,
    WorkerJob,
)
from infer_prof.loadgen.worker_tally import WorkerTally

START_LEAD_S = 0.05
"""Seconds between the last worker reaching the start gate and the shared ``t0``."""


def split_evenly(total: int, n: int) -> list[int]:
    """``total`` split into ``n`` shares differing by at most 1, larger first."""
    return [total // n + (1 if w < total % n else 0) for w in range(n)]


class _ClaimIterator:
    """Next spec from a list shared by every worker, by one shared counter."""

    def __init__(self, specs: Sequence[RequestSpec], claim: Any) -> None:
        self.specs = specs
        self.claim = claim

    def __iter__(self) -> _ClaimIterator:
        return self

    def __next__(self) -> RequestSpec:
        with self.claim.get_lock():
            i = self.claim.value
            if i >= len(self.specs):
                raise StopIteration
            self.claim.value = i + 1
        return self.specs[i]



def worker_main(w: int, n: int, job: WorkerJob, shared: Shared) -> None:
    """A forked worker's entry point: run its share of ``job`` on a fresh event loop (uvloop
    when installed) with the garbage collector paused, then put ``(w, records, health)`` on
    the shared results queue, also when it failed (``health.error``)."""
    # the parent decides (it tells us via events); a closed terminal's SIGHUP reaches us too
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler the parent had when forking
    with contextlib.suppress(Exception):
        asyncio.events._set_running_loop(None)  # a forked child inherits no running loop
    records: list[RequestRecord] = []
    health = WorkerHealth(w, os.getpid())
    try:
        measuring: ClientLoop | None = None
        try:
            with client_loop(set_current=True) as measuring:
                measuring.measure(_worker_async(w, n, job, shared, records, health))
        finally:
            if measuring is not None:
                health.reader_wakeups = measuring.reader_wakeups
    except BaseException as exc:  # report, never hang the parent
        health.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
    if shared.tally is not None:  # the tallies reach the parent before the records
        shared.tally.close()
        shared.tally.join_thread()
    shared.results.put((w, records, health))
    shared.results.close()
    shared.results.join_thread()


async def _worker_async(
    w: int,
    n: int,
    job: WorkerJob,
    shared: Shared,
    records: list[RequestRecord],
    health: WorkerHealth,
) -> None:
    """Worker ``w`` of ``n``: drive its share of ``job`` (appending to ``records``) while its
    counters are published to the parent every 0.1 s and the loop's lag is probed; then fill
    ``health`` (CPU and wall seconds of the measured window, reads, lags)."""
    worker = _Worker(w, n, job, shared, records, health)
    counters = worker.counters
    lag = loop_lag_samples()
    driver = asyncio.create_task(worker.closed() if job.mode == "closed" else worker.opened())
    watcher = asyncio.create_task(worker.watch(driver))
    prober = asyncio.create_task(loop_lag_probe(lag, record=lambda: counters.phase == "measuring"))
    try:
        await driver
    except asyncio.CancelledError:
        pass
    finally:
        worker.end_window()
        counters.phase = "done"
        worker.publish()
        if worker.tally is not None:
            worker.tally.publish(final=True)
        for t in (watcher, prober):
            t.cancel()
        await asyncio.gather(watcher, prober, return_exceptions=True)
    offset = sum(split_evenly(job.concurrency, n)[:w]) if job.mode == "closed" else 0
    for r in records:
        if job.mode == "closed":
            r.worker += offset
    health.requests = sum(1 for r in records if not r.warmup)
    health.loop_lag_ms = lag
    counters.reads.settle(0)
    health.reads = counters.reads.reads
    health.read_lag = counters.reads.lag


class _Worker:
    """One worker process's share of the load: its counters (published into its slots of the
    shared array), its driver (closed or open loop), the shared start gate, and the CPU it used
    over the measured window."""

    def __init__(self, w: int, n: int, job: WorkerJob, shared: Shared,
                 records: list[RequestRecord], health: WorkerHealth) -> None:
        self.w, self.n, self.job, self.shared, self.health = w, n, job, shared, health
        self.counters = counters = LiveCounters()
        self.tally = tally = (WorkerTally(w, shared.tally)
                              if job.precision and shared.tally is not None else None)
        if tally is not None:
            counters.on_end = tally.ended
        self.stop_when = (lambda: shared.precise.value != 0) if tally is not None else None
        self.stop = asyncio.Event()
        self.io = DriverIO(job.endpoint, job.build, counters, self.stop,
                           records if tally is None else tally.sink(records))
        self.warm = list(job.warmup)[w::n] if not job.continuous_warmup else []
        self.waiting = False  # at the start gate
        self.cpu0_s = 0.0  # process CPU seconds when measuring began
        self.t0_s = 0.0  # perf_counter seconds when measuring began (0: not begun)

    def publish(self) -> None:
        """Write the counters into this worker's slots of the shared array."""
        arr, base, counters = self.shared.counters, self.w * SLOTS, self.counters
        arr[base] = counters.sent
        arr[base + 1] = counters.completed
        arr[base + 2] = counters.failed
        arr[base + 3] = counters.output_tokens
        phase = "waiting" if self.waiting else counters.phase
        arr[base + 4] = PHASES.index(phase) if phase in PHASES else 0
        arr[base + 5] = counters.failures.get("connect_failed", 0)
        arr[base + 6] = counters.warmup_done

    async def gate(self) -> int:
        """Wait until every worker has reached the start gate; the shared ``t0``
        (``perf_counter_ns``, ``START_LEAD_S`` after the last one arrived)."""
        shared = self.shared
        self.waiting = True
        with shared.ready.get_lock():
            shared.ready.value += 1
            if shared.ready.value == self.n:
                shared.start_ns.value = time.perf_counter_ns() + int(START_LEAD_S * 1e9)
                shared.started.set()
        while not shared.started.is_set():
            if shared.stop.is_set():
                self.stop.set()
                break
            await asyncio.sleep(0.002)
        self.waiting = False
        return int(shared.start_ns.value) or time.perf_counter_ns()

    def mark_start(self) -> None:
        """The measured window begins: note the process's CPU time and the clock."""
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu0_s = ru.ru_utime + ru.ru_stime
        self.t0_s = time.perf_counter()

    def end_window(self) -> None:
        """The measured window ends: its CPU and wall seconds into ``health``."""
        if self.t0_s:
            ru = resource.getrusage(resource.RUSAGE_SELF)
            self.health.cpu_s = ru.ru_utime + ru.ru_stime - self.cpu0_s
            self.health.wall_s = time.perf_counter() - self.t0_s

    async def watch(self, driver: asyncio.Task[None]) -> None:
        """Every 0.1 s until the driver ends: publish, and pass on the parent's stop (stop
        sending) and cancel (cancel the driver)."""
        shared = self.shared
        while not driver.done():
            self.publish()
            if self.tally is not None:
                self.tally.publish()
            if shared.cancel.is_set():
                self.stop.set()
                driver.cancel()
                return
            if shared.stop.is_set():
                self.stop.set()
            await asyncio.sleep(0.1)

    def my_measured(self) -> Iterator[RequestSpec]:
        """This worker's measured specs: claimed from the shared list by one shared counter, or
        every n-th item of its own copy of an open-ended iterator."""
        job = self.job
        if isinstance(job.measured, Sequence):
            return _ClaimIterator(job.measured, self.shared.claim)
        return islice(job.measured, self.w, None, self.n)

    async def closed(self) -> None:
        """The closed loop: this worker's share of the streams; a warm-up under the load
        itself, or a warm-up, the shared start gate, then the measured phase."""
        job, w, n = self.job, self.w, self.n
        mine = split_evenly(job.concurrency, n)[w]
        self.health.streams = mine
        measured_plan = ClosedLoopPlan(mine, job.timeout_s, job.duration_s, self.stop_when)
        if job.continuous_warmup:
            # one closed loop: warm-up under the load itself, then measured (no gate, no pause)
            warm_gate = SharedWarmupGate(self.shared, job.concurrency, job.warmup_seconds)
            warm_gate.on_open(self.mark_start)
            await run_closed_loop(self.io, islice(job.warmup, w, None, n), self.my_measured(),
                                  measured_plan, warm_gate)
            return
        if self.warm:
            await run_closed_loop(self.io, self.warm, iter(()),
                                  ClosedLoopPlan(mine, job.timeout_s))
        t0 = await self.gate()
        if self.stop.is_set():
            return
        delay = (t0 - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        self.mark_start()
        await run_closed_loop(self.io, [], self.my_measured(), measured_plan)

    async def opened(self) -> None:
        """The open loop: every n-th arrival, this worker's share of the cap and of the
        connections to open, started at the shared gate."""
        job, w, n = self.job, self.w, self.n
        plan = job.open_plan or OpenLoopPlan(job.timeout_s)
        cap = split_evenly(plan.max_concurrency, n)[w] if plan.max_concurrency else None
        pre = split_evenly(plan.preconnect, n)[w] if plan.preconnect else plan.preconnect
        mine = OpenLoopPlan(
            plan.timeout_s,
            max(1, cap) if cap is not None else None,
            plan.duration_s,
            pre,
            plan.warmup_concurrency,
            self.stop_when,
        )
        self.health.streams = cap or 0
        oh = OpenLoopHealth()

        async def start_gate() -> int:
            t0 = await self.gate()
            self.mark_start()
            return t0

        try:
            await run_open_loop(self.io, self.warm, _deal(job.arrivals, w, n), mine, oh,
                                start_gate, worker_id=w)
        finally:
            self.health.dispatch_lag_ns = oh.dispatch_lag_ns
            self.health.slot_wait_ns = oh.slot_wait_ns
            self.health.not_sent = oh.not_sent


def _deal(
    items: Sequence[tuple[RequestSpec, float]] | Iterator[tuple[RequestSpec, float]],
    w: int,
    n: int,
) -> Iterator[tuple[RequestSpec, float]]:
    """Worker ``w``'s share of the arrivals: items ``w, w + n, ...`` (lazily for an iterator)."""
    if isinstance(items, Sequence):
        return iter(items[w::n])
    return islice(items, w, None, n)
