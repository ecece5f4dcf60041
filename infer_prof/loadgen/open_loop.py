"""The open-loop driver: request i is sent at ``t0 + offset_i``, whatever is still in flight.

Offsets come from :class:`infer_prof.core.workload.arrivals.ArrivalProcess` (Poisson, gamma,
constant). The schedule is absolute: a request sent late does not push the later ones back, so the
achieved rate is the asked rate however the event loop jitters.

Every request's ``scheduled_ns`` is its due time ``t0 + offset``. Its queue time
(``send_ns - scheduled_ns``, :func:`infer_prof.core.measurement.metrics.queue_ns`) is therefore
everything the client added before the request went out, reported and never hidden inside TTFT
(which is measured from ``send_ns``). :class:`OpenLoopHealth` splits it in two:

- slot wait: with ``max_concurrency`` set, time waiting for a free slot
  (``slot_free - due``, 0 when a slot was free);
- dispatch lag: the client's own lateness, ``send - max(due, slot_free)``: timer resolution
  and event-loop lag. It is the number that tells whether the asked arrival pattern was the one
  the server saw (see :mod:`infer_prof.core.measurement.validity`).

Connections: an idle pool of kept-alive connections, filled by the warm-up requests and
``preconnect``; a request takes an idle one or opens a new one (opening happens before
``send_ns``, so it is counted as dispatch lag, not as TTFT).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen.client import stream_request
from infer_prof.loadgen.closed_loop import (
    DriverIO,
    RequestSpec,
    account,
    new_record,
)
from infer_prof.loadgen.endpoint import StreamConnection, resolve

#: Seconds between the end of warm-up and t0 when no start gate is given: room to create the
#: dispatcher and the first timers, so that request 0 is not late by construction.
START_LEAD_S = 0.02
_STOP_POLL_S = 0.2


@dataclass
class OpenLoopPlan:
    """How to send: concurrency cap (None: none), per-request timeout, an optional send
    deadline (seconds after t0; requests due later are not sent), and connections to open
    before t0 (None: ``max_concurrency`` when capped, else none beyond the warm-up's)."""

    timeout_s: float
    max_concurrency: int | None = None
    duration_s: float | None = None
    preconnect: int | None = None
    warmup_concurrency: int = 64
    # asked before each measured send (never per token): True stops sending, as the deadline
    stop_when: Callable[[], bool] | None = None


@dataclass
class OpenLoopHealth:
    """The driver's own timing, integer ns per request sent (see the module docstring)."""

    t0_ns: int | None = None
    dispatch_lag_ns: list[int] = field(default_factory=list)
    slot_wait_ns: list[int] = field(default_factory=list)
    cap_bound: int = 0  # requests that found every slot busy
    not_sent: int = 0  # due after the deadline or after stop

    def achieved_rate(self, records: Iterable[RequestRecord]) -> float | None:
        """(n - 1) / (last send - first send) over measured requests, requests/s."""
        sends = sorted(r.send_ns for r in records if not r.warmup and r.send_ns is not None)
        if len(sends) < 2 or sends[-1] == sends[0]:
            return None
        return (len(sends) - 1) / ((sends[-1] - sends[0]) / 1e9)


async def run_open_loop(
    io: DriverIO,
    warmup: list[RequestSpec],
    specs_with_offsets: Iterable[tuple[RequestSpec, float]],
    plan: OpenLoopPlan,
    health: OpenLoopHealth | None = None,
    start_gate: Callable[[], Awaitable[int]] | None = None,
    worker_id: int = 0,
) -> None:
    """Run warm-up, then send each ``(spec, offset_s)`` at ``t0 + offset_s``.

    Warm-up requests run first, ``plan.warmup_concurrency`` at a time, and all finish before
    t0. ``t0`` is ``START_LEAD_S`` after warm-up, or the ``perf_counter_ns`` value that
    ``start_gate()`` returns (worker processes share one start that way). Offsets must be
    non-decreasing. Sending stops when the specs run out, at ``plan.duration_s`` after t0, or
    when ``io.stop`` is set; requests in flight are then awaited (cancel the task to abandon
    them). ``io.records`` is filled as requests are sent, so an interrupted caller keeps them.
    """
    family, addr = await resolve(io.endpoint)
    loop = _OpenLoop(io, plan, health if health is not None else OpenLoopHealth(),
                     family, addr, worker_id)
    counters, stop = io.counters, io.stop
    try:
        if warmup:
            counters.phase = "warm-up"
            await loop.warm_up(warmup)
        await loop.preconnect()
        if stop.is_set():
            return
        t0 = await start_gate() if start_gate is not None else (
            time.perf_counter_ns() + int(START_LEAD_S * 1e9))
        loop.health.t0_ns = t0
        counters.phase = "measuring"
        await loop.dispatch(specs_with_offsets, t0)
        if loop.tasks:
            await asyncio.gather(*list(loop.tasks), return_exceptions=True)
        counters.phase = "done"
    finally:
        pending = list(loop.tasks)
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for c in loop.idle:
            c.close()


class _OpenLoop:
    """One open loop's state: the idle pool of kept-alive connections, the requests in flight,
    the concurrency cap's semaphore, and the health figures it measures."""

    def __init__(self, io: DriverIO, plan: OpenLoopPlan, health: OpenLoopHealth, family: int,
                 addr: tuple[Any, ...], worker_id: int) -> None:
        self.io, self.plan, self.health = io, plan, health
        self.family, self.addr, self.worker_id = family, addr, worker_id
        self.idle: list[StreamConnection] = []
        self.tasks: set[asyncio.Task[None]] = set()
        cap = plan.max_concurrency
        self.sem = asyncio.Semaphore(cap) if cap else None

    def connection(self) -> StreamConnection:
        """An idle kept-alive connection, else a new one (opened by its first request)."""
        idle = self.idle
        return idle.pop() if idle else StreamConnection(self.addr, self.family, self.io.endpoint)

    async def warm_up(self, warmup: list[RequestSpec]) -> None:
        """Every warm-up request, ``plan.warmup_concurrency`` at a time (their connections stay
        in the idle pool)."""
        io, idle = self.io, self.idle
        counters = io.counters
        wsem = asyncio.Semaphore(max(1, self.plan.warmup_concurrency))

        async def warm(spec: RequestSpec) -> None:
            async with wsem:
                if io.stop.is_set():
                    return
                conn = self.connection()
                rec = RequestRecord(
                    index=spec.index,
                    input_len=spec.input_len,
                    max_tokens=spec.max_tokens,
                    warmup=True,
                    worker=self.worker_id,
                    scheduled_ns=time.perf_counter_ns(),
                    adapter=spec.adapter,
                )
                io.records.append(rec)
                counters.sent += 1
                await stream_request(
                    conn, io.request_bytes(spec), rec, self.plan.timeout_s, counters.add_tokens,
                    counters.reads
                )
                if conn.sock is not None:
                    idle.append(conn)
                account(rec, counters)

        await asyncio.gather(*(warm(s) for s in warmup))

    async def preconnect(self) -> None:
        """Open connections up to ``plan.preconnect`` (default: the cap) before t0; those that
        fail to open are dropped (a request opens its own)."""
        plan, idle = self.plan, self.idle
        want = plan.preconnect if plan.preconnect is not None else (plan.max_concurrency or 0)
        if want > len(idle) and not self.io.stop.is_set():
            extra = [StreamConnection(self.addr, self.family, self.io.endpoint)
                     for _ in range(want - len(idle))]
            opened = await asyncio.gather(*(c.ensure_open() for c in extra), return_exceptions=True)
            idle.extend(c for c, r in zip(extra, opened, strict=True) if r is None)

    async def dispatch(self, specs_with_offsets: Iterable[tuple[RequestSpec, float]],
                       t0: int) -> None:
        """Send each spec at ``t0 + offset`` (``perf_counter_ns``), waiting for a slot under
        the cap, until the specs run out, the deadline or ``stop``."""
        plan, health, sem, stop = self.plan, self.health, self.sem, self.io.stop
        deadline = t0 + int(plan.duration_s * 1e9) if plan.duration_s else None
        block_end_ns = 0  # when the dispatcher last got a slot it had to wait for
        for spec, offset in specs_with_offsets:
            due = t0 + int(offset * 1e9)
            if stop.is_set() or (deadline is not None and due >= deadline) or (
                    plan.stop_when is not None and plan.stop_when()):
                health.not_sent += 1
                break
            wait_s = (due - time.perf_counter_ns()) / 1e9
            if wait_s > 0:
                # wake at the due time; the loop's timer resolution (~1 ms under uvloop) and its
                # lag show up as dispatch lag, measured. Long waits also wake on ``stop``.
                if wait_s > _STOP_POLL_S:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), wait_s)
                else:
                    await asyncio.sleep(wait_s)
                if stop.is_set():
                    health.not_sent += 1
                    break
            free_ns: int | None = None
            if sem is not None:
                # cap-bound: no slot now, or the request fell due while the dispatcher was
                # blocked waiting for an earlier request's slot (it queued behind it)
                blocked = sem.locked()
                await sem.acquire()
                if blocked:
                    block_end_ns = time.perf_counter_ns()
                if blocked or block_end_ns > due:
                    health.cap_bound += 1
                    free_ns = time.perf_counter_ns()
                    health.slot_wait_ns.append(max(0, free_ns - due))
                else:
                    health.slot_wait_ns.append(0)
            self.launch(spec, due, free_ns)
            if free_ns is None and wait_s <= 0:
                await asyncio.sleep(0)  # a burst (rate inf): let sends go out as they are made

    def launch(self, spec: RequestSpec, due_ns: int | None, free_ns: int | None) -> None:
        """Record ``spec`` (due at ``due_ns``; its slot free at ``free_ns``) and send it in a
        task of its own."""
        io = self.io
        rec = new_record(spec, self.worker_id, due_ns)
        io.records.append(rec)
        io.counters.sent += 1
        task = asyncio.create_task(self.one(spec, rec, free_ns))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def one(self, spec: RequestSpec, rec: RequestRecord, free_ns: int | None) -> None:
        """One measured request: stream it, free its slot, keep its connection, and note its
        dispatch lag (``send - max(due, slot_free)``, ns)."""
        io, sem = self.io, self.sem
        counters = io.counters
        conn = self.connection()
        try:
            await stream_request(
                conn, io.request_bytes(spec), rec, self.plan.timeout_s, counters.add_tokens,
                counters.reads
            )
        finally:
            if sem is not None:
                sem.release()
        if conn.sock is not None:
            self.idle.append(conn)
        if not rec.warmup and rec.send_ns is not None and rec.scheduled_ns is not None:
            start = rec.scheduled_ns if free_ns is None else max(rec.scheduled_ns, free_ns)
            self.health.dispatch_lag_ns.append(max(0, rec.send_ns - start))
        account(rec, counters)
        if rec.error == "connect_failed":
            await asyncio.sleep(0.5)  # as the closed loop: let the caller's watchdog decide
