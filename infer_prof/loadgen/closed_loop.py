"""The closed-loop driver: N streams, each sending its next request when its last one ends."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from infer_prof.core.metrics import RequestRecord
from infer_prof.loadgen.client import (
    Endpoint,
    ReadStats,
    StreamConnection,
    resolve,
    stream_request,
)
from infer_prof.loadgen.pacing import SendPacer


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: its prompt (token IDs), asked output length, and whether it warms up."""

    index: int
    prompt: list[int] | str
    input_len: int
    max_tokens: int
    warmup: bool = False


@dataclass
class LiveCounters:
    """Running totals the progress display reads while the driver runs."""

    sent: int = 0
    completed: int = 0
    failed: int = 0
    output_tokens: int = 0
    phase: str = "starting"
    failures: dict[str, int] = field(default_factory=dict)
    reads: ReadStats = field(default_factory=ReadStats)

    def add_tokens(self, n: int) -> None:
        self.output_tokens += n


@dataclass
class ClosedLoopPlan:
    """What to run: ``concurrency`` streams over the specs, bounded by count and/or duration."""

    concurrency: int
    timeout_s: float
    duration_s: float | None = None


RequestBuilder = Callable[[RequestSpec], bytes]


def new_record(spec: RequestSpec, worker: int, scheduled_ns: int | None) -> RequestRecord:
    """The record a request's measurements go into; ``scheduled_ns`` is when it was due."""
    return RequestRecord(
        index=spec.index,
        input_len=spec.input_len,
        max_tokens=spec.max_tokens,
        warmup=spec.warmup,
        worker=worker,
        scheduled_ns=scheduled_ns,
    )


def account(rec: RequestRecord, counters: LiveCounters) -> None:
    """Count a finished request in ``counters``: completed, or failed by kind."""
    if rec.ok:
        counters.completed += 1
    else:
        counters.failed += 1
        kind = rec.error or "no_tokens"
        counters.failures[kind] = counters.failures.get(kind, 0) + 1


async def _open_quietly(conn: StreamConnection) -> None:
    """Connect ahead of time; a failure is left for the request that uses the connection."""
    with contextlib.suppress(Exception):
        await conn.ensure_open()


async def run_closed_loop(
    endpoint: Endpoint,
    build: RequestBuilder,
    warmup: list[RequestSpec],
    measured: Iterator[RequestSpec],
    plan: ClosedLoopPlan,
    counters: LiveCounters,
    stop: asyncio.Event,
    records: list[RequestRecord],
) -> None:
    """Run warm-up then the measured phase, appending every request's record to ``records``.

    Warm-up requests run first, at up to ``concurrency`` at once, and all finish before the
    measured phase starts. Then ``concurrency`` streams each take the next spec as soon as
    their previous request ends, until the specs run out, ``duration_s`` has passed since the
    measured phase began, or ``stop`` is set (server death, Ctrl-C). ``records`` is filled as
    requests finish, so a caller that is interrupted still holds everything measured.
    A request's ``scheduled_ns`` is when its stream became free: ``send - scheduled`` is the
    client's own dispatch delay, reported as queue time.
    """
    family, addr = await resolve(endpoint)
    conns = [StreamConnection(addr, family) for _ in range(plan.concurrency)]
    pacer = SendPacer()

    async def worker(wid: int, specs: Iterator[RequestSpec], deadline_ns: int | None) -> None:
        conn = conns[wid]
        free_ns = time.perf_counter_ns()
        while not stop.is_set():
            if deadline_ns is not None and time.perf_counter_ns() >= deadline_ns:
                return
            await pacer.turn()  # a burst of sends must not starve the reads (loadgen.pacing)
            if stop.is_set():
                return
            spec = next(specs, None)
            if spec is None:
                return
            rec = new_record(spec, wid, free_ns)
            records.append(rec)
            counters.sent += 1
            await stream_request(
                conn, build(spec), rec, plan.timeout_s, counters.add_tokens, counters.reads, pacer
            )
            free_ns = time.perf_counter_ns()
            account(rec, counters)
            if rec.error == "connect_failed":
                # the server refuses connections: do not burn through the remaining
                # requests; give the caller's watchdog time to decide whether it is gone
                await asyncio.sleep(0.5)

    tasks: list[asyncio.Task[None]] = []
    try:
        if warmup:
            counters.phase = "warm-up"
            it = iter(warmup)
            n = min(plan.concurrency, len(warmup))
            tasks = [asyncio.create_task(worker(i, it, None)) for i in range(n)]
            await asyncio.gather(*tasks)
        if stop.is_set():
            return
        # open every stream's connection before the clock starts: 1024 TCP handshakes at the
        # start of the measured phase would otherwise delay the reads of the first streams
        await asyncio.gather(*(_open_quietly(c) for c in conns))
        counters.phase = "measuring"
        deadline = time.perf_counter_ns() + int(plan.duration_s * 1e9) if plan.duration_s else None
        tasks = [
            asyncio.create_task(worker(i, measured, deadline)) for i in range(plan.concurrency)
        ]
        await asyncio.gather(*tasks)
        counters.phase = "done"
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in conns:
            c.close()
