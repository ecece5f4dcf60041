"""Spread the load over worker processes when one process would be the bottleneck.

Each worker is a forked process with its own event loop (uvloop when installed) that runs the
ordinary closed- or open-loop driver on its share of the load and sends its
:class:`~infer_prof.core.metrics.RequestRecord` list back. ``perf_counter_ns`` is one clock for
every process of a Linux machine (CLOCK_MONOTONIC), and the client's token times are kernel
receive timestamps converted onto it, so records from all workers merge as they are.

How the load is shared:

- closed loop: ``concurrency`` is split as evenly as possible (``c // n`` each, the first
  ``c % n`` one more). With a finite list of measured specs, every stream of every worker
  claims the next spec from one shared counter, so the run is exactly one closed loop of
  ``concurrency`` streams over the list; with an open-ended iterator, worker ``w`` takes items
  ``w, w + n, ...`` of its own (forked) copy.
- open loop: arrivals are dealt round-robin (``items[w::n]``; an iterator is sliced the same
  way in each worker's forked copy) and every worker uses the same ``t0``, so the union of the
  sends is the global schedule. A ``max_concurrency`` cap is split
  like concurrency: it is enforced per worker, which is the global cap only approximately.

Start: every worker runs its share of the warm-up, then waits at a shared gate; the last one to
arrive sets ``t0 = now + START_LEAD_S`` for all, so measured phases start together and the
merged window is not stretched by a slow starter.

Health, per worker (:class:`WorkerHealth`): CPU time used during the measured phase
(``resource.getrusage``, user + system) and its share of the wall time, event-loop lag (how
late a 10 ms sleep wakes), and read lag (how long received data waited before it was read; see
:class:`~infer_prof.loadgen.client_health.ReadStats`).

Processes are forked (the request builder and the specs are inherited, not pickled): call
:func:`run_in_workers` from a thread with no running event loop, before starting threads that
hold locks the children would need.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing as mp
import os
import resource
import signal
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from infer_prof.core.metrics import RequestRecord
from infer_prof.core.stats import summary_dict
from infer_prof.loadgen.client_health import gc_paused, loop_lag_probe
from infer_prof.loadgen.closed_loop import (
    ClosedLoopPlan,
    LiveCounters,
    RequestBuilder,
    RequestSpec,
    WarmupGate,
    run_closed_loop,
)
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.loadgen.open_loop import OpenLoopHealth, OpenLoopPlan, run_open_loop
from infer_prof.loadgen.stamped_reader import reader_in_use

START_LEAD_S = 0.05
#: Token events per second one worker process is given by :func:`choose_processes`, by reader
#: (client.reader_in_use): what keeps a process idle about half of the time, so that it reads each
#: stream's data well within one inter-token gap. Measured per read, whole client included
#: (`infer-prof calibrate`, 1024 streams, 2 cores): ~10 us with the C reader, ~20 us with the
#: pure-Python one. On 2 cores shared with the server, one C-reader process at 68k events/s met
#: every target where two did not.
EVENTS_PER_PROCESS_BY_READER = {"c": 80_000, "python": 40_000}
EVENTS_PER_PROCESS = EVENTS_PER_PROCESS_BY_READER[reader_in_use()]
#: How much more a read costs over TLS (decryption, OpenSSL state per connection): measured
#: 33-46 us per read against 16-20 us for plain HTTP at 128 streams (benchmarks/tls_cost.py,
#: `calibrate --tls`), so an https stream counts twice when processes are chosen.
TLS_READ_COST_FACTOR = 2.0
#: The inter-token gap :func:`expected_events_per_s` assumes for a stream whose pace is not
#: known: 10 ms, a fast GPU decode step, so the busiest plausible stream.
ASSUMED_ITL_S = 0.010
_PHASES = ("starting", "warm-up", "waiting", "measuring", "done")
# shared counters per worker: sent, completed, failed, output_tokens, phase, connect_failed,
# warmup_done
_SLOTS = 7


def choose_processes(
    concurrency: int,
    expected_events_per_s: float,
    cores: int | None = None,
    per_process: float = EVENTS_PER_PROCESS,
) -> int:
    """How many client processes: ``ceil(events/s / per_process)``, at least 1, at most the
    machine's cores and the number of streams.

    ``expected_events_per_s`` is token-carrying chunks per second, e.g. ``concurrency / ITL``
    (1024 streams at 15 ms: 68k/s -> 2 processes).
    """
    cores = cores or len(os.sched_getaffinity(0)) or 1  # the CPUs this client may use
    want = math.ceil(max(0.0, expected_events_per_s) / per_process)
    return max(1, min(want, cores, max(1, concurrency)))


def expected_events_per_s(
    mode: str,
    concurrency: int | None = None,
    rate: float | None = None,
    mean_output_tokens: float = 0.0,
    max_concurrency: int | None = None,
    itl_s: float = ASSUMED_ITL_S,
) -> float:
    """Token-carrying chunks per second the client may have to read (events/s), at most.

    - closed loop: ``concurrency / itl_s`` (every stream decoding at one token per ``itl_s``);
    - open loop, finite ``rate`` (requests/s): ``rate * mean_output_tokens``, but no more than
      ``max_concurrency / itl_s`` when a cap on requests in flight is given;
    - open loop, infinite or no rate: ``max_concurrency / itl_s``, or 0 without a cap (the
      load is then unknown: 0 makes :func:`choose_processes` pick 1 process).
    """
    if mode == "closed":
        return max(1, concurrency or 1) / itl_s
    capped = max_concurrency / itl_s if max_concurrency else math.inf
    if rate is not None and math.isfinite(rate) and rate > 0:
        return min(rate * max(0.0, mean_output_tokens), capped)
    return capped if max_concurrency else 0.0


def split_evenly(total: int, n: int) -> list[int]:
    """``total`` split into ``n`` shares differing by at most 1, larger first."""
    return [total // n + (1 if w < total % n else 0) for w in range(n)]


@dataclass
class WorkerJob:
    """What every worker runs. ``mode`` "closed" uses ``concurrency``, ``duration_s`` and
    ``measured``; "open" uses ``arrivals`` ((spec, offset_s) in offset order) and ``open_plan``."""

    mode: str
    endpoint: Endpoint
    build: RequestBuilder
    timeout_s: float
    warmup: Sequence[RequestSpec] | Iterator[RequestSpec] = ()
    concurrency: int = 1
    duration_s: float | None = None
    measured: Sequence[RequestSpec] | Iterator[RequestSpec] = ()
    arrivals: Sequence[tuple[RequestSpec, float]] | Iterator[tuple[RequestSpec, float]] = ()
    open_plan: OpenLoopPlan | None = None
    # closed loop: warm up under the load itself (a WarmupGate over every worker's streams)
    continuous_warmup: bool = False
    warmup_seconds: float | None = None


@dataclass
class WorkerHealth:
    """One worker's own health during the measured phase (see the module docstring)."""

    worker: int
    pid: int = 0
    streams: int = 0  # closed loop: its concurrency; open loop: its max_concurrency (0: none)
    requests: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    loop_lag_ms: list[float] = field(default_factory=list)
    reads: int = 0
    read_lag_ns: list[int] = field(default_factory=list)
    dispatch_lag_ns: list[int] = field(default_factory=list)
    slot_wait_ns: list[int] = field(default_factory=list)  # open loop with a cap
    not_sent: int = 0  # open loop: arrivals due after the deadline or after stop
    error: str | None = None

    @property
    def cpu_share(self) -> float | None:
        """CPU seconds per wall second of the measured phase (1.0 = one core busy)."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "pid": self.pid,
            "streams": self.streams,
            "requests": self.requests,
            "cpu_s": self.cpu_s,
            "wall_s": self.wall_s,
            "cpu_share": self.cpu_share,
            "event_loop_lag_ms": summary_dict(self.loop_lag_ms),
            "reads": self.reads,
            "read_lag_ms": summary_dict(self.read_lag_ns, 1e-6),
            "dispatch_lag_ms": summary_dict(self.dispatch_lag_ns, 1e-6),
            "slot_wait_ms": summary_dict(self.slot_wait_ns, 1e-6),
            "not_sent": self.not_sent,
            "error": self.error,
        }


class _Shared:
    """Cross-process state, created before forking."""

    def __init__(self, ctx: Any, n: int) -> None:
        self.n = n
        self.counters = ctx.Array("q", n * _SLOTS, lock=False)
        self.claim = ctx.Value("q", 0)  # next measured spec index (closed loop over a list)
        self.ready = ctx.Value("i", 0)
        self.start_ns = ctx.Value("q", 0, lock=False)
        self.started = ctx.Event()
        self.stop = ctx.Event()
        self.cancel = ctx.Event()
        self.results = ctx.Queue()
        # a continuous warm-up's gate (SharedWarmupGate): streams warmed, first warm-up send,
        # when it opened (0: not yet) and why (index into SharedWarmupGate.REASONS)
        self.warmed = ctx.Value("q", 0)
        self.warm_first_ns = ctx.Value("q", 0)
        self.warm_open_ns = ctx.Value("q", 0)
        self.warm_reason = ctx.Value("i", -1, lock=False)


class SharedWarmupGate(WarmupGate):
    """A :class:`~infer_prof.loadgen.closed_loop.WarmupGate` over every worker's streams: the
    count of warmed streams, the first send and the opening live in shared memory, so all
    workers switch to measured requests together (each at its streams' next request)."""

    REASONS = ("steady", "duration", "pool_exhausted")

    def __init__(self, shared: _Shared, streams: int, seconds: float | None) -> None:
        super().__init__(streams, seconds)
        self.shared = shared

    def sending(self) -> None:
        if self.first_send_ns is None:
            self.first_send_ns = now = time.perf_counter_ns()
            with self.shared.warm_first_ns.get_lock():
                v = self.shared.warm_first_ns.value
                if v == 0 or now < v:
                    self.shared.warm_first_ns.value = now

    def warmed(self, stream: int) -> None:
        if stream in self._warmed:
            return
        self._warmed.add(stream)
        with self.shared.warmed.get_lock():
            self.shared.warmed.value += 1
            full = self.shared.warmed.value >= self.streams
        if self.seconds is None and full:
            self.open("steady")

    def open(self, reason: str) -> None:
        with self.shared.warm_open_ns.get_lock():
            if self.shared.warm_open_ns.value == 0:
                self.shared.warm_open_ns.value = time.perf_counter_ns()
                self.shared.warm_reason.value = self.REASONS.index(reason)
        self._sync()

    def _sync(self) -> None:
        if self.opened_ns is None and self.shared.warm_open_ns.value:
            self.opened_ns = int(self.shared.warm_open_ns.value)
            self.reason = self.REASONS[self.shared.warm_reason.value]

    def is_open(self) -> bool:
        self._sync()
        first = self.shared.warm_first_ns.value
        if (self.opened_ns is None and self.seconds is not None and first
                and time.perf_counter_ns() - first >= self.seconds * 1e9):
            self.open("duration")
        return super().is_open()

    def to_dict(self) -> dict[str, Any]:
        self._sync()
        self.first_send_ns = int(self.shared.warm_first_ns.value) or None
        return super().to_dict()


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


class WorkerPool:
    """Worker processes running one job; poll :meth:`counters`, then :meth:`join`."""

    def __init__(self, n_procs: int, job: WorkerJob) -> None:
        if n_procs < 1:
            raise ValueError(f"n_procs must be >= 1, got {n_procs}")
        if job.mode not in ("closed", "open"):
            raise ValueError(f"mode must be 'closed' or 'open', got {job.mode!r}")
        if job.mode == "closed" and job.concurrency < n_procs:
            n_procs = job.concurrency
        self.n = n_procs
        self.job = job
        self.ctx = mp.get_context("fork")
        self.shared = _Shared(self.ctx, n_procs)
        self.procs: list[Any] = []

    def start(self) -> None:
        for w in range(self.n):
            p = self.ctx.Process(
                target=_worker_main,
                args=(w, self.n, self.job, self.shared),
                name=f"infer-prof-worker-{w}",
                daemon=True,
            )
            p.start()
            self.procs.append(p)

    def warmup(self) -> dict[str, Any]:
        """How a continuous warm-up ended (:meth:`WarmupGate.to_dict`), read from shared memory."""
        gate = SharedWarmupGate(self.shared, self.job.concurrency, self.job.warmup_seconds)
        return gate.to_dict()

    def counters(self) -> LiveCounters:
        """The workers' running totals, summed (updated by each worker every 0.1 s); of the
        failure kinds, only ``connect_failed`` is shared (a server watchdog's cue)."""
        c = LiveCounters()
        arr = self.shared.counters
        phases = []
        refused = 0
        for w in range(self.n):
            base = w * _SLOTS
            c.sent += arr[base]
            c.completed += arr[base + 1]
            c.failed += arr[base + 2]
            c.output_tokens += arr[base + 3]
            phases.append(arr[base + 4])
            refused += arr[base + 5]
            c.warmup_done += arr[base + 6]
        c.phase = _PHASES[min(phases)] if phases else "starting"
        if refused:
            c.failures["connect_failed"] = refused
        return c

    def request_stop(self, cancel: bool = False) -> None:
        """Stop sending; with ``cancel``, also abandon requests in flight (marked cancelled)."""
        self.shared.stop.set()
        if cancel:
            self.shared.cancel.set()

    def abort(self) -> None:
        """Cancel every worker and reap them; one still alive after 5 s is killed."""
        self.request_stop(cancel=True)
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()

    def join(
        self,
        on_progress: Callable[[LiveCounters], None] | None = None,
        poll_s: float = 0.1,
    ) -> tuple[list[RequestRecord], list[WorkerHealth]]:
        """Wait for every worker; return all records and each worker's health.

        A worker that dies without reporting gets a health entry with ``error`` set, and the
        others are told to stop (its requests are lost, so the run is incomplete).
        """
        records: list[RequestRecord] = []
        health: dict[int, WorkerHealth] = {}
        while len(health) < self.n:
            try:
                w, recs, h = self.shared.results.get(timeout=poll_s)
            except Exception:  # queue.Empty
                if on_progress is not None:
                    on_progress(self.counters())
                for w2, p in enumerate(self.procs):
                    if w2 not in health and not p.is_alive() and p.exitcode not in (None, 0):
                        health[w2] = WorkerHealth(
                            w2, p.pid or 0, error=f"worker exited with code {p.exitcode}"
                        )
                        self.request_stop()
                continue
            records.extend(recs)
            health[w] = h
            if h.error:
                self.request_stop()
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
        if on_progress is not None:
            on_progress(self.counters())
        return records, [health[w] for w in sorted(health)]


def run_in_workers(
    n_procs: int,
    job: WorkerJob,
    on_progress: Callable[[LiveCounters], None] | None = None,
) -> tuple[list[RequestRecord], list[WorkerHealth]]:
    """Run ``job`` over ``n_procs`` worker processes; return (records, per-worker health)."""
    pool = WorkerPool(n_procs, job)
    pool.start()
    try:
        return pool.join(on_progress)
    except BaseException:
        pool.abort()
        raise


def merge_health(health: Sequence[WorkerHealth]) -> dict[str, Any]:
    """The client section of a result for a multi-process run: totals and pooled lags."""
    lag = [x for h in health for x in h.loop_lag_ms]
    read = [x * 1e-6 for h in health for x in h.read_lag_ns]
    disp = [x * 1e-6 for h in health for x in h.dispatch_lag_ns]
    slot = [x * 1e-6 for h in health for x in h.slot_wait_ns]
    return {
        "processes": len(health),
        "cpu_s": sum(h.cpu_s for h in health),
        "event_loop_lag_ms": summary_dict(lag),
        "reads": sum(h.reads for h in health),
        "read_lag_ms": summary_dict(read),
        "dispatch_lag_ms": summary_dict(disp),
        "slot_wait_ms": summary_dict(slot),
        "not_sent": sum(h.not_sent for h in health),
        "workers": [h.to_dict() for h in health],
    }


# ------------------------------------------------------------------------------ in the child


def _worker_main(w: int, n: int, job: WorkerJob, shared: _Shared) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it tells us via events
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler the parent had when forking
    with contextlib.suppress(Exception):
        asyncio.events._set_running_loop(None)  # a forked child inherits no running loop
    records: list[RequestRecord] = []
    health = WorkerHealth(w, os.getpid())
    try:
        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # pragma: no cover
            loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            with gc_paused():
                loop.run_until_complete(_worker_async(w, n, job, shared, records, health))
        finally:
            loop.close()
    except BaseException as exc:  # report, never hang the parent
        health.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
    shared.results.put((w, records, health))
    shared.results.close()
    shared.results.join_thread()


async def _worker_async(
    w: int,
    n: int,
    job: WorkerJob,
    shared: _Shared,
    records: list[RequestRecord],
    health: WorkerHealth,
) -> None:
    counters = LiveCounters()
    stop = asyncio.Event()
    base = w * _SLOTS
    arr = shared.counters
    warm = list(job.warmup)[w::n] if not job.continuous_warmup else []
    waiting = {"flag": False}

    def publish() -> None:
        arr[base] = counters.sent
        arr[base + 1] = counters.completed
        arr[base + 2] = counters.failed
        arr[base + 3] = counters.output_tokens
        phase = "waiting" if waiting["flag"] else counters.phase
        arr[base + 4] = _PHASES.index(phase) if phase in _PHASES else 0
        arr[base + 5] = counters.failures.get("connect_failed", 0)
        arr[base + 6] = counters.warmup_done

    async def gate() -> int:
        waiting["flag"] = True
        with shared.ready.get_lock():
            shared.ready.value += 1
            if shared.ready.value == n:
                shared.start_ns.value = time.perf_counter_ns() + int(START_LEAD_S * 1e9)
                shared.started.set()
        while not shared.started.is_set():
            if shared.stop.is_set():
                stop.set()
                break
            await asyncio.sleep(0.002)
        waiting["flag"] = False
        return int(shared.start_ns.value) or time.perf_counter_ns()

    async def sleep_until(t_ns: int) -> None:
        delay = (t_ns - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)

    lag: list[float] = []
    measuring = {"cpu": 0.0, "t": 0.0}

    def mark_start() -> None:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        measuring["cpu"] = ru.ru_utime + ru.ru_stime
        measuring["t"] = time.perf_counter()

    async def watch(driver: asyncio.Task[None]) -> None:
        while not driver.done():
            publish()
            if shared.cancel.is_set():
                stop.set()
                driver.cancel()
                return
            if shared.stop.is_set():
                stop.set()
            await asyncio.sleep(0.1)

    def my_measured() -> Iterator[RequestSpec]:
        """This worker's measured specs: claimed from the shared list by one shared counter, or
        every n-th item of its own copy of an open-ended iterator."""
        if isinstance(job.measured, Sequence):
            return _ClaimIterator(job.measured, shared.claim)
        return islice(job.measured, w, None, n)

    async def closed() -> None:
        mine = split_evenly(job.concurrency, n)[w]
        health.streams = mine
        if job.continuous_warmup:
            # one closed loop: warm-up under the load itself, then measured (no gate, no pause)
            warm_gate = SharedWarmupGate(shared, job.concurrency, job.warmup_seconds)
            warm_gate.on_open(mark_start)
            await run_closed_loop(
                job.endpoint,
                job.build,
                islice(job.warmup, w, None, n),
                my_measured(),
                ClosedLoopPlan(mine, job.timeout_s, job.duration_s),
                counters,
                stop,
                records,
                warm_gate,
            )
            return
        if warm:
            await run_closed_loop(
                job.endpoint,
                job.build,
                warm,
                iter(()),
                ClosedLoopPlan(mine, job.timeout_s),
                counters,
                stop,
                records,
            )
        t0 = await gate()
        if stop.is_set():
            return
        await sleep_until(t0)
        mark_start()
        await run_closed_loop(
            job.endpoint,
            job.build,
            [],
            my_measured(),
            ClosedLoopPlan(mine, job.timeout_s, job.duration_s),
            counters,
            stop,
            records,
        )

    async def opened() -> None:
        plan = job.open_plan or OpenLoopPlan(job.timeout_s)
        cap = split_evenly(plan.max_concurrency, n)[w] if plan.max_concurrency else None
        pre = split_evenly(plan.preconnect, n)[w] if plan.preconnect else plan.preconnect
        mine = OpenLoopPlan(
            plan.timeout_s,
            max(1, cap) if cap is not None else None,
            plan.duration_s,
            pre,
            plan.warmup_concurrency,
        )
        health.streams = cap or 0
        oh = OpenLoopHealth()

        async def start_gate() -> int:
            t0 = await gate()
            mark_start()
            return t0

        try:
            await run_open_loop(
                job.endpoint,
                job.build,
                warm,
                _deal(job.arrivals, w, n),
                mine,
                counters,
                stop,
                records,
                oh,
                start_gate,
                worker_id=w,
            )
        finally:
            health.dispatch_lag_ns = oh.dispatch_lag_ns
            health.slot_wait_ns = oh.slot_wait_ns
            health.not_sent = oh.not_sent

    driver = asyncio.create_task(closed() if job.mode == "closed" else opened())
    watcher = asyncio.create_task(watch(driver))
    prober = asyncio.create_task(loop_lag_probe(lag, record=lambda: counters.phase == "measuring"))
    try:
        await driver
    except asyncio.CancelledError:
        pass
    finally:
        if measuring["t"]:
            ru = resource.getrusage(resource.RUSAGE_SELF)
            health.cpu_s = ru.ru_utime + ru.ru_stime - measuring["cpu"]
            health.wall_s = time.perf_counter() - measuring["t"]
        counters.phase = "done"
        publish()
        for t in (watcher, prober):
            t.cancel()
        await asyncio.gather(watcher, prober, return_exceptions=True)
    offset = sum(split_evenly(job.concurrency, n)[:w]) if job.mode == "closed" else 0
    for r in records:
        if job.mode == "closed":
            r.worker += offset
    health.requests = sum(1 for r in records if not r.warmup)
    health.loop_lag_ms = lag
    health.reads = counters.reads.reads
    health.read_lag_ns = counters.reads.read_lag_ns


def _deal(
    items: Sequence[tuple[RequestSpec, float]] | Iterator[tuple[RequestSpec, float]],
    w: int,
    n: int,
) -> Iterator[tuple[RequestSpec, float]]:
    """Worker ``w``'s share of the arrivals: items ``w, w + n, ...`` (lazily for an iterator)."""
    if isinstance(items, Sequence):
        return iter(items[w::n])
    return islice(items, w, None, n)
