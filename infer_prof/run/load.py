"""Driving one load point: the requests sent (closed loop, open loop, multi-turn sessions or
a trace's schedule), in this process's event loop or over worker processes, with GPU and
server-metrics telemetry sampled over the measured window, a server watchdog and the stop
signals (Ctrl-C, SIGTERM, SIGHUP: :mod:`infer_prof.run.stopping`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_prof.config.run_groups import ResultsConfig
from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.measurement.precision import PrecisionRule
from infer_prof.core.workload.workload_sampling import send_offsets
from infer_prof.core.workload.workloads import Workload, warmup_seconds
from infer_prof.loadgen.client_health import loop_lag_probe, loop_lag_samples
from infer_prof.loadgen.client_loop import client_loop
from infer_prof.loadgen.closed_loop import (
    ClosedLoopPlan,
    DriverIO,
    LiveCounters,
    RequestSpec,
    run_closed_loop,
)
from infer_prof.loadgen.open_loop import OpenLoopHealth, OpenLoopPlan, run_open_loop
from infer_prof.loadgen.openai_requests import (
    build_chat_request,
    build_completion_request,
    chat_messages,
)
from infer_prof.loadgen.prepared import ahead_of_duration, preparation_counts
from infer_prof.loadgen.sessions import SessionRun
from infer_prof.loadgen.stamped_reader import reader_in_use
from infer_prof.loadgen.traces import Trace
from infer_prof.loadgen.workers import WorkerJob
from infer_prof.report.progress import ProgressLine
from infer_prof.results.store import result_paths
from infer_prof.run.load_points import client_processes
from infer_prof.run.load_pool import PooledPoint, drive_pool
from infer_prof.run.point_precision import PrecisionStop
from infer_prof.run.point_state import DrivenPoint, PointState
from infer_prof.run.record import dist_ms, record_health, relabel_server_died
from infer_prof.run.record_spool import RecordSpool
from infer_prof.run.startup import RunContext, healthy
from infer_prof.run.stopping import during_load
from infer_prof.run.warmup import continuous_warmup, warmup_gate
from infer_prof.telemetry.nvml import NvmlSampler
from infer_prof.telemetry.prometheus import MetricsScraper


def request_builder(ctx: RunContext, run_id: str) -> Callable[[RequestSpec], bytes]:
    """The request body of a spec for the session's API (chat or completions), with the
    request ID ``<run_id>-<index>``; its ``model`` is the spec's LoRA adapter, else the served
    model."""
    def build(spec: RequestSpec) -> bytes:
        model = spec.adapter or ctx.served
        if ctx.api == "chat":
            return build_chat_request(
                ctx.endpoint,
                model,
                chat_messages(spec.prompt),
                spec.max_tokens,
                request_id=f"{run_id}-{spec.index}",
            )
        return build_completion_request(
            ctx.endpoint,
            model,
            spec.prompt,
            spec.max_tokens,
            request_id=f"{run_id}-{spec.index}",
        )

    return build


def drive_point(
    ctx: RunContext,
    wl: Workload,
    build: Callable[[RequestSpec], bytes],
    warm: list[RequestSpec] | Iterator[RequestSpec],
    measured: Iterator[RequestSpec],
    progress: ProgressLine,
    precision: PrecisionRule | None = None,
) -> DrivenPoint:
    """Drive one point's load with telemetry. Returns its records, its state (the
    ``incomplete_reason``, the sessions' run, the warm-up, ``precision``), the ``client``
    section and the ``telemetry`` section (``gpu``, ``server_metrics``).

    ``precision``: measure until the rule is met (closed or open loop, not sessions), with
    ``wl`` bound by the rule's ceiling seconds: :class:`PrecisionStop` in one client process,
    :class:`~infer_prof.run.pool_precision.PoolPrecision` over several.

    In one client process the records go through a :class:`RecordSpool` (each in memory while
    its request is in flight, on disk in the results folder once ended), so the client's memory
    stays flat however long the point runs; they are read back, all of them, when it ends."""
    cfg = ctx.cfg
    pooled: list[RequestRecord] = []
    spool = RecordSpool(spool_folder(cfg.results))
    state = PointState()
    client: dict[str, Any] = {}
    telemetry: dict[str, Any] = {}
    counters = LiveCounters(on_end=spool.ended)
    sampler = NvmlSampler(interval_s=cfg.results.telemetry_interval_s)
    scraper = MetricsScraper(
        ctx.endpoint.url,
        interval_s=cfg.results.metrics_interval_s,
        api_key=ctx.endpoint.api_key,
        context=ctx.endpoint.ssl_context(),
    )
    session_run = ctx.sessions.start(wl, ctx.pool, ctx.text, ctx.point_salt) \
        if ctx.sessions else None
    if session_run is not None and ctx.lora is not None:  # one adapter per conversation
        session_run.ask_adapters(ctx.lora.adapter_of)
    state.session_run = session_run
    # every turn's bytes before the load (a counted point's sessions whole)
    convs = session_run.prepare(build, None if wl.num_requests is not None
                                else ahead_of_duration(wl)) if session_run else None
    processes = 1 if session_run else client_processes(
        cfg.load.client_processes, wl, tls=ctx.endpoint.tls is not None
    )
    stopper = PrecisionStop(precision, spool) if precision and processes == 1 else None
    try:
        if processes > 1:
            # forks the workers before this process starts the telemetry threads
            drive_pool(
                PooledPoint(ctx, wl, processes, progress, state, sampler, scraper, precision),
                _pool_job(ctx, wl, build, warm, measured, precision is not None),
                pooled,
                client,
            )
        else:
            sampler.start()
            scraper.start()
            _drive(_LocalPoint(ctx, wl, build, warm, measured, session_run, stopper,
                               counters, spool, progress, state, client, sampler, scraper))
    finally:
        if stopper is not None:
            state.precision = stopper.section()
        telemetry["gpu"] = sampler.stop()
        telemetry["server_metrics"] = scraper.stop()
        progress.finish()
        records = pooled or spool.read_back()
        spool.discard()
    prepared, at_send = ((convs.prepared, convs.built_at_send) if convs is not None
                         else preparation_counts(warm, measured))
    client.update(prepared_requests=prepared,
                  requests_built_at_send=at_send if processes == 1 else None)
    if processes == 1:
        if state.incomplete_reason == "server_died":
            relabel_server_died(records)
        client.update(record_health(records))
        if spool.error:
            client["spool_error"] = spool.error
    return DrivenPoint(records, state, client, telemetry)


def spool_folder(results: ResultsConfig) -> Path | None:
    """Where a point's records are spooled while it runs: the folder its result goes to
    (:func:`~infer_prof.results.store.result_paths`), when it exists."""
    folder = result_paths(results.output, Path(results.results_dir), "run")[0].parent
    return folder if folder.is_dir() else None


@dataclass(frozen=True)
class _LocalPoint:
    """One point driven in this process. What to send: the run's context, the workload, the
    request builder, the warm-up and measured specs, the sessions' run (multi-turn) and the
    precision stop. What watches and receives it: the live counters, the record spool, the
    progress line, the point's state and ``client`` sections (filled here), and the GPU and
    server-metrics samplers (their measured window marked here)."""

    ctx: RunContext
    wl: Workload
    build: Callable[[RequestSpec], bytes]
    warm: list[RequestSpec] | Iterator[RequestSpec]
    measured: Iterator[RequestSpec]
    session_run: SessionRun | None
    stopper: PrecisionStop | None
    counters: LiveCounters
    records: RecordSpool
    progress: ProgressLine
    state: PointState
    client: dict[str, Any]
    sampler: NvmlSampler
    scraper: MetricsScraper


class _LocalRun:
    """The event-loop side of a :class:`_LocalPoint`: the driver (sessions, closed or open
    loop), the server watchdog and progress, the lag probe, and the stop signals (the first
    Ctrl-C, SIGTERM or SIGHUP stops sending and cancels the streams in flight)."""

    def __init__(self, p: _LocalPoint) -> None:
        self.p = p
        self.stop = asyncio.Event()
        self.lag = loop_lag_samples()
        self.health = OpenLoopHealth()
        self.cpu = _ThreadCpu()  # the event loop's thread, not the telemetry threads
        self.gate = warmup_gate(p.wl, sessions=p.session_run is not None)

    def _unless_warmup_failed(self, specs: Iterator[RequestSpec]) -> Iterator[RequestSpec]:
        """The measured specs, none of them when every warm-up request failed: the load would
        only repeat the failure (the run stops, ``warmup_failed``)."""
        for i, spec in enumerate(specs):
            if i == 0 and self.p.records.warmup_all_failed():
                self.p.state.incomplete_reason = "warmup_failed"
                self.stop.set()
                return
            yield spec

    def _driver(self) -> Coroutine[Any, Any, None]:
        """The load itself: the sessions' driver, the closed loop or the open loop."""
        p = self.p
        cfg, wl, a = p.ctx.cfg, p.wl, p.wl.arrival
        io = DriverIO(p.ctx.endpoint, p.build, p.counters, self.stop, p.records)
        measured = self._unless_warmup_failed(p.measured)
        if p.session_run is not None:
            return p.session_run.drive(
                io, p.warm, ClosedLoopPlan(a.concurrency or 1, cfg.load.timeout_s, wl.duration_s)
            )
        if a.mode == "closed":
            return run_closed_loop(
                io,
                p.warm,
                measured,
                ClosedLoopPlan(a.concurrency or 1, cfg.load.timeout_s, wl.duration_s, p.stopper),
                self.gate,
            )
        return run_open_loop(
            io,
            list(p.warm),
            _open_arrivals(wl, measured, p.ctx.trace),
            OpenLoopPlan(cfg.load.timeout_s, a.max_concurrency, wl.duration_s, stop_when=p.stopper),
            self.health,
        )

    async def main(self) -> None:
        """Run the driver with the watchdog and the lag probe, under the stop signals."""
        p = self.p
        loop = asyncio.get_running_loop()
        driver = asyncio.create_task(self._driver())

        def interrupt() -> None:
            p.state.incomplete_reason = p.state.incomplete_reason or "interrupted"
            self.stop.set()
            driver.cancel()

        probe = asyncio.create_task(loop_lag_probe(self.lag))
        watcher = asyncio.create_task(self._watch(driver))
        try:
            # Ctrl-C, SIGTERM, SIGHUP: stop sending, cancel the streams (the loop's own thread)
            with during_load(lambda: _call_soon(loop, interrupt)):
                await driver
        except asyncio.CancelledError:
            pass
        finally:
            p.sampler.mark_window_end()
            p.scraper.mark_window_end()
            self.cpu.stop()
            probe.cancel()
            watcher.cancel()
            await asyncio.gather(probe, watcher, return_exceptions=True)
            p.progress.update(p.counters)

    async def _watch(self, driver: asyncio.Task[None]) -> None:
        """Every 0.1 s until the driver ends: mark the measured window's start, update the
        progress line, and stop the load when the server died (our process exited, or an
        endpoint we do not own refuses connections and fails its health check)."""
        p = self.p
        server, endpoint, counters = p.ctx.server, p.ctx.endpoint, p.counters
        loop = asyncio.get_running_loop()
        marked = False
        while not driver.done():
            if not marked and counters.phase == "measuring":
                p.sampler.mark_window_start()
                p.scraper.mark_window_start()
                self.cpu.start()
                marked = True
            died = server is not None and server.poll() is not None
            if server is None and counters.failures.get("connect_failed"):
                # an endpoint we do not own refuses connections: is it gone?
                died = not await loop.run_in_executor(None, healthy, endpoint)
            if died:
                p.state.incomplete_reason = "server_died"
                self.stop.set()
                # give in-flight streams a moment to see the connection drop
                await asyncio.sleep(2.0)
                driver.cancel()
                return
            p.progress.update(counters)
            await asyncio.sleep(0.1)


def _drive(p: _LocalPoint) -> None:
    """Run one point's load in this process's event loop (:class:`_LocalRun`), then fill the
    point's warm-up state and its ``client`` section."""
    state, client, counters, a = p.state, p.client, p.counters, p.wl.arrival
    run = _LocalRun(p)
    lag, health, cpu, gate = run.lag, run.health, run.cpu, run.gate
    with client_loop() as measuring:
        measuring.measure(run.main())
    wakeups = measuring.reader_wakeups
    if gate is not None:
        state.warmup = gate.to_dict()
        if state.incomplete_reason == "warmup_failed":
            state.warmup["ended_by"] = "every_request_failed"
    client.update(
        {
            "event_loop_lag_ms": lag.summary_dict(),
            "dispatch_lag_ms": dist_ms(health.dispatch_lag_ns) if a.mode == "open" else None,
            "slot_wait_ms": dist_ms(health.slot_wait_ns) if a.mode == "open" else None,
            "not_sent": health.not_sent if a.mode == "open" else None,
            "processes": 1,
            "reader": reader_in_use(),
            "reads": counters.reads.reads,
            "reader_wakeups": wakeups,
            "read_lag_ms": counters.reads.summary_ms(),
            "read_lag_exact": counters.reads.exact,
            **cpu.to_dict(),
        }
    )


def _open_arrivals(
    wl: Workload, measured: Iterator[RequestSpec], trace: Trace | None = None
) -> Iterator[tuple[RequestSpec, float]]:
    """The open loop's (spec, send offset s) pairs: ``num_requests`` of them, or, bound by
    duration, enough for 1.5 x the duration at the rate (1000/s when infinite) plus 100; a
    trace's own offsets when replaying one."""
    if trace is not None:
        return zip(measured, trace.offsets, strict=False)
    a = wl.arrival
    n = wl.num_requests
    if n is None:
        rate = a.rate if a.rate and a.rate != math.inf else 1000.0
        n = int(rate * (wl.duration_s or 60) * 1.5) + 100
    offsets = send_offsets(wl, n) or []
    return zip(measured, offsets, strict=False)


@dataclass
class _ThreadCpu:
    """CPU time of the calling thread over the measured window (``time.thread_time``)."""

    cpu0: float | None = None
    wall0: float = 0.0
    cpu_s: float | None = None
    wall_s: float | None = None

    def start(self) -> None:
        self.cpu0, self.wall0 = time.thread_time(), time.perf_counter()

    def stop(self) -> None:
        if self.cpu0 is not None and self.cpu_s is None:
            self.cpu_s = time.thread_time() - self.cpu0
            self.wall_s = time.perf_counter() - self.wall0

    def to_dict(self) -> dict[str, Any]:
        """``cpu_s``, ``wall_s`` and ``cpu_share`` (CPU s per wall s; None when unmeasured)."""
        share = self.cpu_s / self.wall_s if self.cpu_s is not None and self.wall_s else None
        return {"cpu_s": self.cpu_s, "wall_s": self.wall_s, "cpu_share": share}


def _pool_job(
    ctx: RunContext,
    wl: Workload,
    build: Callable[[RequestSpec], bytes],
    warm: list[RequestSpec] | Iterator[RequestSpec],
    measured: Iterator[RequestSpec],
    precise: bool = False,
) -> WorkerJob:
    """The point as a :class:`WorkerJob`. Closed loop: a counted point's specs as a list, which
    every worker's streams claim from one shared counter (one closed loop over the list); a
    duration-bound point's lazy iterator, dealt round-robin. Open loop: the scheduled arrivals,
    dealt round-robin (a list when counted, lazily when bound by duration). ``precise``: the
    workers tally for the precision stop (:mod:`infer_prof.loadgen.worker_tally`)."""
    cfg, a = ctx.cfg, wl.arrival
    counted = wl.num_requests is not None
    if a.mode == "closed":
        specs = list(measured) if counted else measured
        return WorkerJob(
            "closed",
            ctx.endpoint,
            build,
            cfg.load.timeout_s,
            warm,
            a.concurrency or 1,
            wl.duration_s,
            specs,
            continuous_warmup=continuous_warmup(wl),
            warmup_seconds=warmup_seconds(wl.warmup),
            precision=precise,
        )
    arrivals = _open_arrivals(wl, measured, ctx.trace)
    return WorkerJob(
        "open",
        ctx.endpoint,
        build,
        cfg.load.timeout_s,
        warm,
        arrivals=list(arrivals) if counted else arrivals,
        open_plan=OpenLoopPlan(cfg.load.timeout_s, a.max_concurrency, wl.duration_s),
        precision=precise,
    )


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
    """``fn`` on ``loop`` as soon as it can (safe from a signal handler: wakes the loop)."""
    loop.call_soon_threadsafe(fn)
