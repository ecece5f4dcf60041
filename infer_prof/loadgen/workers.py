"""Spread the load over worker processes when one process would be the bottleneck.

Each worker is a forked process with its own event loop (uvloop when installed) that runs the
ordinary closed- or open-loop driver on its share of the load and sends its
:class:`~infer_prof.core.measurement.metrics.RequestRecord` list back. ``perf_counter_ns`` is one
clock for every process of a Linux machine (CLOCK_MONOTONIC), and the client's token times are
kernel receive timestamps converted onto it, so records from all workers merge as they are.

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

This module is the parent's side (how many processes, spawning, gathering, merging); a
worker's own run is :mod:`infer_prof.loadgen.worker_process`, the state they share
:mod:`infer_prof.loadgen.worker_shared`.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any

from infer_prof.core.measurement.bounded_samples import BoundedSamples
from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.measurement.stats import summary_dict
from infer_prof.loadgen.client_health import loop_lag_samples
from infer_prof.loadgen.closed_loop import LiveCounters
from infer_prof.loadgen.stamped_reader import reader_in_use
from infer_prof.loadgen.worker_process import worker_main
from infer_prof.loadgen.worker_shared import (
    PHASES,
    SLOTS,
    Shared,
    SharedWarmupGate,
    WorkerHealth,
    WorkerJob,
)

#: Token events per second one worker process is given by :func:`choose_processes`, by reader
#: (stamped_reader.reader_in_use): what keeps a process idle about half of the time, so that it
#: reads each stream's data well within one inter-token gap. Measured per read, whole client
#: included (`infer-prof calibrate`, 1024 streams, 2 cores): ~10 us with the C reader, ~20 us
#: with the pure-Python one. On 2 cores shared with the server, one C-reader process at 68k
#: events/s met every target where two did not.
EVENTS_PER_PROCESS_BY_READER = {"c": 80_000, "python": 40_000}
EVENTS_PER_PROCESS = EVENTS_PER_PROCESS_BY_READER[reader_in_use()]
#: How much more a read costs over TLS (decryption, OpenSSL state per connection): measured
#: 33-46 us per read against 16-20 us for plain HTTP at 128 streams (benchmarks/tls_cost.py,
#: `calibrate --tls`), so an https stream counts twice when processes are chosen.
TLS_READ_COST_FACTOR = 2.0
#: The inter-token gap :func:`expected_events_per_s` assumes for a stream whose pace is not
#: known: 10 ms, a fast GPU decode step, so the busiest plausible stream.
ASSUMED_ITL_S = 0.010


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
        self.shared = Shared(self.ctx, n_procs, job.precision)
        self.procs: list[Any] = []

    def start(self) -> None:
        for w in range(self.n):
            p = self.ctx.Process(
                target=worker_main,
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
            base = w * SLOTS
            c.sent += arr[base]
            c.completed += arr[base + 1]
            c.failed += arr[base + 2]
            c.output_tokens += arr[base + 3]
            phases.append(arr[base + 4])
            refused += arr[base + 5]
            c.warmup_done += arr[base + 6]
        c.phase = PHASES[min(phases)] if phases else "starting"
        if refused:
            c.failures["connect_failed"] = refused
        return c

    def measured_enough(self) -> None:
        """The point is precise: every worker takes no more measured requests (as when its
        measured specs run out: requests in flight finish, a continuous warm-up's cool-down
        runs), the closed loop's streams at their next request, the open loop at its next
        send."""
        self.shared.precise.value = 1

    def request_stop(self, cancel: bool = False) -> None:
        """Stop sending; with ``cancel``, also abandon requests in flight (marked cancelled)."""
        self.shared.stop.set()
        if cancel:
            self.shared.cancel.set()

    def kill_now(self) -> None:
        """SIGKILL every worker at once, without waiting (a second stop signal)."""
        for p in self.procs:
            if p.pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(p.pid, signal.SIGKILL)

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
    lag = loop_lag_samples()
    for h in health:
        lag.merge(h.loop_lag_ms)
    read = BoundedSamples()
    for h in health:
        read.merge(h.read_lag)
    disp = [x * 1e-6 for h in health for x in h.dispatch_lag_ns]
    slot = [x * 1e-6 for h in health for x in h.slot_wait_ns]
    return {
        "processes": len(health),
        "cpu_s": sum(h.cpu_s for h in health),
        "event_loop_lag_ms": lag.summary_dict(),
        "reads": sum(h.reads for h in health),
        "reader_wakeups": (
            sum(h.reader_wakeups for h in health if h.reader_wakeups is not None)
            if any(h.reader_wakeups is not None for h in health)
            else None
        ),
        "read_lag_ms": read.summary_dict(1e-6),
        "read_lag_exact": read.exact,
        "dispatch_lag_ms": summary_dict(disp),
        "slot_wait_ms": summary_dict(slot),
        "not_sent": sum(h.not_sent for h in health),
        "workers": [h.to_dict() for h in health],
    }
