"""The closed-loop driver: N streams, each sending its next request when its last one ends."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen.client import stream_request
from infer_prof.loadgen.client_health import ReadStats
from infer_prof.loadgen.endpoint import Endpoint, StreamConnection, resolve
from infer_prof.loadgen.pacing import SendPacer, per_turn_for

#: A request's prompt: token IDs, text, or chat messages (a dataset's, for the chat API).
Prompt = list[int] | str | list[dict[str, str]]

#: Where a load is: connecting, warming up, waiting at the start gate (a client process
#: waiting for the others), measuring, done. A client process's shared slot holds the index.
LoadPhase = Literal["starting", "warm-up", "waiting", "measuring", "done"]


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: its prompt (token IDs, text or chat messages), asked output length,
    whether it warms up, and the LoRA adapter it asks for (its ``model``; None: the served
    model). ``body``: its request bytes when they were built before the load
    (:mod:`infer_prof.loadgen.prepared`; the prompt is then empty, the bytes hold it); None:
    the driver's builder makes them at the send."""

    index: int
    prompt: Prompt
    input_len: int
    max_tokens: int
    warmup: bool = False
    adapter: str | None = None
    body: bytes | None = None


class RecordSink(Protocol):
    """Where a driver puts each request's record, before the request is sent (then fills it
    in place): a list, or a :class:`~infer_prof.run.record_spool.RecordSpool` that sends
    ended records to disk (told by :attr:`LiveCounters.on_end`)."""

    def append(self, rec: RequestRecord, /) -> None: ...


@dataclass
class LiveCounters:
    """Running totals the progress display reads while the driver runs. ``on_end(record)``,
    when set, is told each request that has ended, once nothing more is written into its
    record (a :class:`~infer_prof.run.record_spool.RecordSpool` takes it out of memory)."""

    sent: int = 0
    completed: int = 0  # measured requests only (warm-ups count in warmup_done)
    failed: int = 0
    output_tokens: int = 0
    warmup_done: int = 0
    phase: LoadPhase = "starting"
    failures: dict[str, int] = field(default_factory=dict)
    reads: ReadStats = field(default_factory=ReadStats)
    on_end: Callable[[RequestRecord], None] | None = None

    def add_tokens(self, n: int) -> None:
        self.output_tokens += n

    def ended(self, rec: RequestRecord) -> None:
        """``rec`` is final: tell :attr:`on_end`."""
        if self.on_end is not None:
            self.on_end(rec)


@dataclass
class ClosedLoopPlan:
    """What to run: ``concurrency`` streams over the specs, bounded by count and/or duration."""

    concurrency: int
    timeout_s: float
    duration_s: float | None = None
    # asked before each measured request is taken (never per token): True ends the measured
    # phase as the duration does (a point measured until precise:
    # infer_prof.core.measurement.precision)
    stop_when: Callable[[], bool] | None = None


RequestBuilder = Callable[[RequestSpec], bytes]


@dataclass(frozen=True)
class DriverIO:
    """What every request of a driver shares: where it goes (``endpoint``), how a spec becomes
    its request bytes (``build``), the running totals it counts in (``counters``), the event
    that stops the sending (``stop``: server death, Ctrl-C), and where its record goes
    (``records``, before the send)."""

    endpoint: Endpoint
    build: RequestBuilder
    counters: LiveCounters
    stop: asyncio.Event
    records: RecordSink

    def request_bytes(self, spec: RequestSpec) -> bytes:
        """The bytes to send for ``spec``: those prepared before the load, else built now."""
        return spec.body if spec.body is not None else self.build(spec)


class WarmupGate:
    """When a warm-up under the load itself ends, so measuring starts at steady state.

    The streams never pause: each takes warm-up specs until the gate opens, then measured ones.
    It opens (``reason``) when

    - ``"steady"``: every one of ``streams`` streams has finished a warm-up request, i.e. the
      whole first wave (the requests sent together into an idle server) has completed and
      every stream is running a request that arrived among others in flight;
    - ``"duration"``: ``seconds`` have passed since the first warm-up send;
    - ``"pool_exhausted"``: the warm-up specs ran out first (recorded; see the result).

    One process's gate; :class:`~infer_prof.loadgen.worker_shared.SharedWarmupGate` spans workers.
    """

    def __init__(self, streams: int, seconds: float | None = None) -> None:
        self.streams = streams
        self.seconds = seconds
        self.first_send_ns: int | None = None
        self.opened_ns: int | None = None
        self.reason: str | None = None
        self._warmed: set[int] = set()
        self._callbacks: list[Callable[[], None]] = []

    def on_open(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (once, in this process) when the gate is first seen open."""
        self._callbacks.append(fn)

    def sending(self) -> None:
        """A warm-up request is about to be sent."""
        if self.first_send_ns is None:
            self.first_send_ns = time.perf_counter_ns()

    def warmed(self, stream: int) -> None:
        """Stream ``stream`` finished a warm-up request."""
        if stream not in self._warmed:
            self._warmed.add(stream)
            if self.seconds is None and len(self._warmed) >= self.streams:
                self.open("steady")

    def open(self, reason: str) -> None:
        if self.opened_ns is None:
            self.opened_ns = time.perf_counter_ns()
            self.reason = reason

    def is_open(self) -> bool:
        """Whether measuring has begun (checks the duration; fires ``on_open`` callbacks)."""
        if (self.opened_ns is None and self.seconds is not None
                and self.first_send_ns is not None
                and time.perf_counter_ns() - self.first_send_ns >= self.seconds * 1e9):
            self.open("duration")
        if self.opened_ns is not None and self._callbacks:
            callbacks, self._callbacks = self._callbacks, []
            for fn in callbacks:
                fn()
        return self.opened_ns is not None

    def to_dict(self) -> dict[str, Any]:
        """What the warm-up did: how it ended, and its seconds (first send to gate open)."""
        secs = None
        if self.opened_ns is not None and self.first_send_ns is not None:
            secs = round((self.opened_ns - self.first_send_ns) / 1e9, 3)
        return {"ended_by": self.reason, "seconds": secs}


def new_record(spec: RequestSpec, worker: int, scheduled_ns: int | None) -> RequestRecord:
    """The record a request's measurements go into; ``scheduled_ns`` is when it was due."""
    return RequestRecord(
        index=spec.index,
        input_len=spec.input_len,
        max_tokens=spec.max_tokens,
        warmup=spec.warmup,
        worker=worker,
        scheduled_ns=scheduled_ns,
        adapter=spec.adapter,
    )


def account(rec: RequestRecord, counters: LiveCounters) -> None:
    """Count a finished request in ``counters``: a warm-up one in ``warmup_done``, a measured
    one as completed or failed; every failure by kind (a refused connection during the warm-up
    is still the watchdog's cue). The record is final then (:meth:`LiveCounters.ended`)."""
    if rec.warmup:
        counters.warmup_done += 1
        if not rec.ok:
            kind = rec.error or "no_tokens"
            counters.failures[kind] = counters.failures.get(kind, 0) + 1
    elif rec.ok:
        counters.completed += 1
    else:
        counters.failed += 1
        kind = rec.error or "no_tokens"
        counters.failures[kind] = counters.failures.get(kind, 0) + 1
    counters.ended(rec)


async def cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the tasks still running and wait until each has ended (what they raise is
    dropped: the loop that made them is ending, by its own end or by an error of its own)."""
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def open_quietly(conn: StreamConnection) -> None:
    """Connect ahead of time; a failure is left for the request that uses the connection."""
    with contextlib.suppress(Exception):
        await conn.ensure_open()


async def stream_one(
    conn: StreamConnection,
    spec: RequestSpec,
    stream: int,
    free_ns: int,
    io: DriverIO,
    timeout_s: float,
    pacer: SendPacer,
) -> tuple[RequestRecord, int]:
    """One request of a closed-loop stream: its record (appended to ``io.records`` before the
    send, so an interrupted caller keeps it), the streamed response (``timeout_s`` seconds at
    most), the count in ``io.counters``; returns the record and when the stream became free
    again (``perf_counter_ns``)."""
    rec = new_record(spec, stream, free_ns)
    counters = io.counters
    io.records.append(rec)
    counters.sent += 1
    await stream_request(
        conn, io.request_bytes(spec), rec, timeout_s, counters.add_tokens, counters.reads, pacer
    )
    free_ns = time.perf_counter_ns()
    account(rec, counters)
    return rec, free_ns


class _GatedLoop:
    """The closed loop with a warm-up under the load itself (see :func:`run_closed_loop`).

    It also cools down under the load: once the measured specs are used up (or the duration has
    passed), a stream whose measured requests are done keeps sending requests from the warm-up
    pool until the last measured request of this process has ended, and those still running
    then are cut. Streams out of phase finish up to one request apart; without this, the last
    measured requests would run while the load drained, faster than under ``c`` streams.
    Cool-down requests are recorded as warm-up ones with ``cooldown`` set (error ``"cut"`` when
    cut), so the load they carried is in the record."""

    def __init__(self, io: DriverIO, warmup: Iterator[RequestSpec],
                 measured: Iterator[RequestSpec], plan: ClosedLoopPlan, gate: WarmupGate,
                 conns: list[StreamConnection], pacer: SendPacer) -> None:
        self.io, self.warmup, self.measured, self.plan = io, warmup, measured, plan
        self.gate, self.conns, self.pacer = gate, conns, pacer
        self.deadline_ns: int | None = None  # the measured phase's end (a duration bound)
        self.exhausted = False  # no measured spec is left to take
        self.in_flight = 0  # measured requests sent and not ended
        self.measured_done = asyncio.Event()  # exhausted, and none in flight
        self.cool_counters = LiveCounters(reads=io.counters.reads)  # not measured, nor warm-up

    async def run(self) -> None:
        """``plan.concurrency`` streams, each warm-up, measured, then cool-down requests."""
        self.gate.on_open(self._measuring)
        counters = self.io.counters
        counters.phase = "warm-up"
        tasks = [asyncio.create_task(self._stream(i)) for i in range(self.plan.concurrency)]
        try:
            await asyncio.gather(*tasks)
            counters.phase = "done"
        finally:
            await cancel_all(tasks)

    def _measuring(self) -> None:
        """The gate opened: the measured phase (and its duration) starts now."""
        self.io.counters.phase = "measuring"
        if self.plan.duration_s:
            self.deadline_ns = time.perf_counter_ns() + int(self.plan.duration_s * 1e9)

    def _next_warmup(self) -> RequestSpec | None:
        """A warm-up spec while the gate is shut (opening it when the pool runs out); None
        once it is open."""
        gate = self.gate
        if gate.is_open():
            return None
        spec = next(self.warmup, None)
        if spec is None:
            gate.open("pool_exhausted")
            gate.is_open()
        else:
            gate.sending()
        return spec

    def _next_measured(self) -> RequestSpec | None:
        """The next measured spec; None once they ran out, the duration passed or
        ``plan.stop_when()`` said so (then the measured phase ends with its last request)."""
        if self.exhausted:
            return None
        end = self.deadline_ns
        stop_when = self.plan.stop_when
        spec = None
        if (end is None or time.perf_counter_ns() < end) and not (
                stop_when is not None and stop_when()):
            spec = next(self.measured, None)
        if spec is None:
            self.exhausted = True
            if self.in_flight == 0:
                self.measured_done.set()
        return spec

    def _measured_ended(self) -> None:
        """A measured request ended (or was cancelled)."""
        self.in_flight -= 1
        if self.exhausted and self.in_flight == 0:
            self.measured_done.set()

    async def _cool_down(self, conn: StreamConnection, wid: int, free_ns: int) -> int | None:
        """One cool-down request, cut short when the last measured one ends: the stream's next
        free time, or None when the stream is done."""
        spec = next(self.warmup, None)
        if spec is None or self.measured_done.is_set():
            return None
        io = self.io
        mine: list[RequestRecord] = []
        cool_io = replace(io, counters=self.cool_counters, records=mine)
        req = asyncio.ensure_future(stream_one(conn, spec, wid, free_ns, cool_io,
                                               self.plan.timeout_s, self.pacer))
        ended = asyncio.ensure_future(self.measured_done.wait())
        try:
            await asyncio.wait({req, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
            if not req.done():
                req.cancel()
                await asyncio.gather(req, return_exceptions=True)
            for rec in mine:
                rec.cooldown = True
                if req.cancelled() and rec.error is None:
                    rec.error, rec.error_detail = "cut", "cool-down ended with the measured load"
                io.records.append(rec)
                io.counters.ended(rec)
        if req.cancelled():
            return None
        return req.result()[1]

    async def _stream(self, wid: int) -> None:
        """Stream ``wid``: warm-up specs until the gate opens, measured ones, then cool-down."""
        conn = self.conns[wid]
        stop, pacer = self.io.stop, self.pacer
        free_ns = time.perf_counter_ns()
        while not stop.is_set():
            await pacer.turn()
            if stop.is_set():
                return
            spec = self._next_warmup()
            if spec is None:
                spec = self._next_measured()
                if spec is None:
                    if self.measured_done.is_set():
                        return
                    nxt = await self._cool_down(conn, wid, free_ns)
                    if nxt is None:
                        return
                    free_ns = nxt
                    continue
                self.in_flight += 1
            try:
                rec, free_ns = await stream_one(conn, spec, wid, free_ns, self.io,
                                                 self.plan.timeout_s, pacer)
            finally:
                if not spec.warmup:
                    self._measured_ended()
            if spec.warmup:
                self.gate.warmed(wid)
            if rec.error == "connect_failed":
                await asyncio.sleep(0.5)  # as in run_closed_loop: let the watchdog decide


async def run_closed_loop(
    io: DriverIO,
    warmup: Iterable[RequestSpec],
    measured: Iterator[RequestSpec],
    plan: ClosedLoopPlan,
    gate: WarmupGate | None = None,
) -> None:
    """Run warm-up then the measured phase, appending every request's record to ``io.records``.

    With a ``gate`` the warm-up is the load itself: ``concurrency`` streams take specs from
    ``warmup`` until the gate opens, then from ``measured``, without pausing (a duration bound
    counts from the gate's opening). Without one, warm-up requests run first, at up to
    ``concurrency`` at once, and all finish before the measured phase starts. Then
    ``concurrency`` streams each take the next spec as soon as
    their previous request ends, until the specs run out, ``duration_s`` has passed since the
    measured phase began, or ``io.stop`` is set (server death, Ctrl-C). ``io.records`` is filled
    as requests finish, so a caller that is interrupted still holds everything measured.
    A request's ``scheduled_ns`` is when its stream became free: ``send - scheduled`` is the
    client's own dispatch delay, reported as queue time.
    """
    family, addr = await resolve(io.endpoint)
    conns = [StreamConnection(addr, family, io.endpoint) for _ in range(plan.concurrency)]
    pacer = SendPacer(per_turn_for(plan.concurrency))  # no waits at <= 256 streams
    counters, stop = io.counters, io.stop

    async def worker(wid: int, specs: Iterator[RequestSpec], deadline_ns: int | None,
                     stop_when: Callable[[], bool] | None = None) -> None:
        conn = conns[wid]
        free_ns = time.perf_counter_ns()
        while not stop.is_set():
            if deadline_ns is not None and time.perf_counter_ns() >= deadline_ns:
                return
            if stop_when is not None and stop_when():
                return
            await pacer.turn()  # a burst of sends must not starve the reads (loadgen.pacing)
            if stop.is_set():
                return
            spec = next(specs, None)
            if spec is None:
                return
            rec, free_ns = await stream_one(conn, spec, wid, free_ns, io, plan.timeout_s, pacer)
            if rec.error == "connect_failed":
                # the server refuses connections: do not burn through the remaining
                # requests; give the caller's watchdog time to decide whether it is gone
                await asyncio.sleep(0.5)

    if gate is not None:
        try:
            await _GatedLoop(io, iter(warmup), measured, plan, gate, conns, pacer).run()
        finally:
            for c in conns:
                c.close()
        return

    warmup = list(warmup)
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
        await asyncio.gather(*(open_quietly(c) for c in conns))
        counters.phase = "measuring"
        deadline = time.perf_counter_ns() + int(plan.duration_s * 1e9) if plan.duration_s else None
        tasks = [
            asyncio.create_task(worker(i, measured, deadline, plan.stop_when))
            for i in range(plan.concurrency)
        ]
        await asyncio.gather(*tasks)
        counters.phase = "done"
    finally:
        await cancel_all(tasks)
        for c in conns:
            c.close()
