"""A load point driven over worker processes (:class:`WorkerPool`): what the in-process
driver has (server watchdog, progress, telemetry window marks, Ctrl-C/SIGTERM/SIGHUP), watched from
the parent while the workers send, and the ``client`` section pooled over the workers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.measurement.precision import PrecisionRule
from infer_prof.core.workload.workloads import Workload
from infer_prof.loadgen.closed_loop import LiveCounters
from infer_prof.loadgen.stamped_reader import reader_in_use
from infer_prof.loadgen.workers import WorkerHealth, WorkerJob, WorkerPool, merge_health
from infer_prof.report.progress import ProgressLine
from infer_prof.run.point_state import PointState
from infer_prof.run.pool_precision import PoolPrecision
from infer_prof.run.record import record_health, relabel_server_died
from infer_prof.run.startup import RunContext, healthy
from infer_prof.run.stopping import during_load
from infer_prof.telemetry.nvml import NvmlSampler
from infer_prof.telemetry.prometheus import MetricsScraper


@dataclass
class PooledPoint:
    """What a point driven over worker processes reports to, besides its records and client."""

    ctx: RunContext
    wl: Workload
    processes: int
    progress: ProgressLine
    state: PointState
    sampler: NvmlSampler
    scraper: MetricsScraper
    # measured until precise (the job's ``precision`` set): run.pool_precision
    precision: PrecisionRule | None = None


def drive_pool(
    point: PooledPoint,
    job: WorkerJob,
    records: list[RequestRecord],
    client: dict[str, Any],
) -> None:
    """Run one point's load over ``point.processes`` worker processes (:class:`WorkerPool`)
    with what the in-process driver (:mod:`infer_prof.run.load`) has: the server watchdog,
    progress, the telemetry window marks, and Ctrl-C/SIGTERM/SIGHUP (the first cancels every
    worker's streams; every record measured so far is kept). Forks before starting the
    telemetry threads; fills ``records`` and ``client`` (the merged health, plus each
    worker's under ``workers``). With ``point.precision``: measured until precise
    (:class:`PoolPrecision`), its block in ``point.state.precision``."""
    pool = WorkerPool(point.processes, job)
    prec = PoolPrecision(point.precision, pool) if point.precision and job.precision else None
    watch = _PoolWatch(point, pool, prec)
    try:
        with during_load(watch.on_signal, pool.kill_now):
            pool.start()
            point.sampler.start()
            point.scraper.start()
            recs, health = pool.join(watch.poll)
            if pool.job.continuous_warmup:
                point.state.warmup = pool.warmup()
    except BaseException:
        pool.abort()
        raise
    finally:
        point.sampler.mark_window_end()
        point.scraper.mark_window_end()
        if prec is not None:
            point.state.precision = prec.finish()
    records.extend(recs)
    state = point.state
    if state.incomplete_reason == "server_died":
        relabel_server_died(records)
    if any(h.error for h in health) and state.incomplete_reason is None:
        state.incomplete_reason = "client_worker_failed"
    client.update(_pooled_client(records, health, point.wl.arrival.mode))


def _pooled_client(
    records: list[RequestRecord], health: list[WorkerHealth], mode: str
) -> dict[str, Any]:
    """The ``client`` section of a multi-process point: the single-process keys (pooled over
    the workers), ``cpu_s`` summed, ``wall_s`` and ``cpu_share`` of the busiest worker, and
    each worker's own health under ``workers`` (see :func:`merge_health`)."""
    merged = merge_health(health)
    is_open = mode == "open"
    busiest = max(health, key=lambda h: h.cpu_share or 0.0, default=None)
    return {
        **record_health(records),
        "event_loop_lag_ms": merged["event_loop_lag_ms"],
        "dispatch_lag_ms": merged["dispatch_lag_ms"] if is_open else None,
        "slot_wait_ms": merged["slot_wait_ms"] if is_open else None,
        "not_sent": merged["not_sent"] if is_open else None,
        "processes": merged["processes"],
        "reader": reader_in_use(),
        "reads": merged["reads"],
        "reader_wakeups": merged["reader_wakeups"],
        "read_lag_ms": merged["read_lag_ms"],
        "read_lag_exact": merged["read_lag_exact"],
        "cpu_s": merged["cpu_s"],
        "wall_s": busiest.wall_s if busiest else None,
        "cpu_share": busiest.cpu_share if busiest else None,
        "workers": merged["workers"],
    }


@dataclass
class _PoolWatch:
    """The pooled point's watcher, called by :meth:`WorkerPool.join` about every 0.1 s: acts on
    Ctrl-C/SIGTERM/SIGHUP, marks the telemetry window, watches the server, checks the precision
    stop, redraws the progress."""

    point: PooledPoint
    pool: WorkerPool
    precision: PoolPrecision | None = None
    signalled: bool = False
    cancelled: bool = False
    marked: bool = False
    died_at: float | None = None

    def on_signal(self) -> None:
        """Ctrl-C, SIGTERM or SIGHUP: the point is interrupted; the next :meth:`poll` cancels the
        workers (a signal handler touches no lock the main thread may hold)."""
        state = self.point.state
        state.incomplete_reason = state.incomplete_reason or "interrupted"
        self.signalled = True

    def poll(self, c: LiveCounters) -> None:
        """One look at the workers' summed counters."""
        if self.signalled:
            self._cancel()
        if not self.marked and c.phase == "measuring":
            self.point.sampler.mark_window_start()
            self.point.scraper.mark_window_start()
            self.marked = True
        if c.phase != "done":
            self._watchdog(c)
        if self.precision is not None:
            self.precision.poll()
        self.point.progress.update(c)

    def _cancel(self) -> None:
        if not self.cancelled:
            self.pool.request_stop(cancel=True)
            self.cancelled = True

    def _watchdog(self, c: LiveCounters) -> None:
        """Server gone: stop sending at once, abandon the streams in flight 2 s later (time
        for them to see the connection drop), as the in-process driver does."""
        if self.died_at is not None:
            if time.monotonic() - self.died_at >= 2.0:
                self._cancel()
            return
        server, endpoint = self.point.ctx.server, self.point.ctx.endpoint
        died = server is not None and server.poll() is not None
        if server is None and c.failures.get("connect_failed"):
            # an endpoint we do not own refuses connections: is it gone?
            died = not healthy(endpoint)
        if died:
            self.point.state.incomplete_reason = "server_died"
            self.pool.request_stop()
            self.died_at = time.monotonic()
