"""What a worker pool's parent and its forked worker processes share: the job every worker
runs (:class:`WorkerJob`), the health each reports back (:class:`WorkerHealth`), and the
cross-process state made before forking (:class:`Shared`: per-worker counters, the start
gate, the spec claim counter, the results queue; :class:`SharedWarmupGate`)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

import msgspec

from infer_prof.core.measurement.bounded_samples import BoundedSamples
from infer_prof.core.measurement.stats import summary_dict
from infer_prof.loadgen.client_health import loop_lag_samples
from infer_prof.loadgen.closed_loop import LoadPhase, RequestBuilder, RequestSpec, WarmupGate
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.loadgen.open_loop import OpenLoopPlan
from infer_prof.results.document_base import Distribution
from infer_prof.results.load_sections import WorkerClient

PHASES: tuple[LoadPhase, ...] = get_args(LoadPhase)
"""A worker's phases, in order; its shared ``phase`` slot holds the index."""

# shared counters per worker: sent, completed, failed, output_tokens, phase, connect_failed,
# warmup_done
SLOTS = 7
"""Shared counters per worker (their order: the comment above)."""


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
    # measured until precise: each worker sends its token arrivals and TPOTs to the parent
    # (loadgen.worker_tally) and stops taking measured requests once the parent says so
    precision: bool = False


@dataclass
class WorkerHealth:
    """One worker's own health during the measured phase (see the module docstring)."""

    worker: int
    pid: int = 0
    streams: int = 0  # closed loop: its concurrency; open loop: its max_concurrency (0: none)
    requests: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    loop_lag_ms: BoundedSamples = field(default_factory=loop_lag_samples)
    reads: int = 0
    reader_wakeups: int | None = None  # the loop's ReaderGroup wake-ups (None: no group)
    read_lag: BoundedSamples = field(default_factory=BoundedSamples)  # ns, bounded
    dispatch_lag_ns: list[int] = field(default_factory=list)
    slot_wait_ns: list[int] = field(default_factory=list)  # open loop with a cap
    not_sent: int = 0  # open loop: arrivals due after the deadline or after stop
    error: str | None = None

    @property
    def cpu_share(self) -> float | None:
        """CPU seconds per wall second of the measured phase (1.0 = one core busy)."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else None

    def record(self) -> WorkerClient:
        """This worker's figures as the result's ``client.workers[i]`` (ms for latencies)."""
        def dist(d: dict[str, Any] | None) -> Distribution | None:
            return None if d is None else Distribution(**d)
        return WorkerClient(
            worker=self.worker, pid=self.pid, streams=self.streams, requests=self.requests,
            cpu_s=self.cpu_s, wall_s=self.wall_s, cpu_share=self.cpu_share,
            event_loop_lag_ms=dist(self.loop_lag_ms.summary_dict()), reads=self.reads,
            reader_wakeups=self.reader_wakeups,
            read_lag_ms=dist(self.read_lag.summary_dict(1e-6)),
            read_lag_exact=self.read_lag.exact,
            dispatch_lag_ms=dist(summary_dict(self.dispatch_lag_ns, 1e-6)),
            slot_wait_ms=dist(summary_dict(self.slot_wait_ns, 1e-6)),
            not_sent=self.not_sent, error=self.error)

    def to_dict(self) -> dict[str, Any]:
        """:meth:`record` as JSON types."""
        return dict(msgspec.to_builtins(self.record()))


class Shared:
    """Cross-process state, created before forking: :data:`SLOTS` counters per worker, the
    start gate, the claim counter, stop/cancel events, the results queue, the warm-up gate,
    and with ``precision`` the tally queue and the precise flag."""

    def __init__(self, ctx: Any, n: int, precision: bool = False) -> None:
        self.n = n
        self.counters = ctx.Array("q", n * SLOTS, lock=False)
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
        # the precision stop (WorkerJob.precision): the workers' tallies, and the parent's
        # verdict (1: precise, take no more measured requests)
        self.tally = ctx.Queue() if precision else None
        self.precise = ctx.Value("b", 0, lock=False)


class SharedWarmupGate(WarmupGate):
    """A :class:`~infer_prof.loadgen.closed_loop.WarmupGate` over every worker's streams: the
    count of warmed streams, the first send and the opening live in shared memory, so all
    workers switch to measured requests together (each at its streams' next request)."""

    REASONS = ("steady", "duration", "pool_exhausted")

    def __init__(self, shared: Shared, streams: int, seconds: float | None) -> None:
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
