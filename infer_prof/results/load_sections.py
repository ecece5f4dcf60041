"""The sections of the result document that say how the load ran: the loop and its load
(``load``), the warm-up and its first wave (``warmup``), how tokens arrived (``stream``), a trace
replay's arrivals (``trace_replay``) and the load generator's own health (``client``). Part of
:class:`infer_prof.results.document.Result`.
"""

from __future__ import annotations

from typing import Literal

from infer_prof.core.measurement.bunching_record import SendBunching as SendBunching
from infer_prof.core.measurement.stream_record import Stream as Stream
from infer_prof.core.measurement.warmup_record import FirstWave as FirstWave
from infer_prof.core.measurement.warmup_record import MeanP50 as MeanP50
from infer_prof.core.measurement.warmup_record import PhaseStagger as PhaseStagger
from infer_prof.core.measurement.warmup_record import Warmup as Warmup
from infer_prof.core.measurement.warmup_record import WarmupEnd as WarmupEnd
from infer_prof.core.measurement.warmup_record import WaveTtft as WaveTtft
from infer_prof.results.document_base import Distribution, Section

LoadMode = Literal["closed", "open"]


class Load(Section):
    """The load the point ran: closed loop (``concurrency`` streams) or open loop (``rate``
    requests/s, ``burstiness``, ``max_concurrency``)."""

    mode: LoadMode
    concurrency: int | None = None
    rate: float | None = None
    burstiness: float | None = None
    max_concurrency: int | None = None
    in_flight_mean: float | None = None
    send_bunching: SendBunching | None = None


class TraceReplay(Section):
    """A trace replay's arrivals, achieved against scheduled (``run.point_document.trace_replay``):
    requests/s over the sends made, ``(n - 1) / (last send - first send)``, and each request's
    signed send lag in ms (actual - scheduled send)."""

    scheduled_requests: int | None = None
    sent_requests: int | None = None
    scheduled_rate: float | None = None
    achieved_rate: float | None = None
    rate_error_pct: float | None = None
    send_lag_ms: Distribution | None = None


class WorkerClient(Section):
    """One client process's own figures over the measured phase
    (``loadgen.worker_shared.WorkerHealth``): its number and pid, the streams it drove (closed
    loop: its concurrency; open loop: its cap, 0 for none), requests, CPU and wall seconds and
    their ratio, event-loop lag, reads and reader wake-ups, read lag (exact or from the bounded
    histogram), dispatch lag and slot wait (ms), sends it could not make, and its error."""

    worker: int | None = None
    pid: int | None = None
    streams: int | None = None
    requests: int | None = None
    cpu_s: float | None = None
    wall_s: float | None = None
    cpu_share: float | None = None
    event_loop_lag_ms: Distribution | None = None
    reads: int | None = None
    reader_wakeups: int | None = None
    read_lag_ms: Distribution | None = None
    read_lag_exact: bool | None = None
    dispatch_lag_ms: Distribution | None = None
    slot_wait_ms: Distribution | None = None
    not_sent: int | None = None
    error: str | None = None


class Client(Section):
    """The load generator's own health over the point (``run.load``, ``run.load_pool``;
    docs/client.md): how request times were stamped, client queue time (ms), event-loop lag,
    dispatch lag and slot wait (ms, open loop only; None in a closed loop), sends the open loop
    could not make (``not_sent``), the reader and its reads, read lag (ms), CPU seconds per
    wall second of the busiest process (``cpu_share``), and how many requests were prepared
    before the load or built at their send. With more than one client process the
    figures are pooled and each worker's own are under ``workers``."""

    timestamp_source: str | list[str] | None = None
    queue_ms: Distribution | None = None
    spool_error: str | None = None
    event_loop_lag_ms: Distribution | None = None
    dispatch_lag_ms: Distribution | None = None
    slot_wait_ms: Distribution | None = None
    not_sent: int | None = None
    processes: int | None = None
    reader: str | None = None
    reads: int | None = None
    reader_wakeups: int | None = None
    read_lag_ms: Distribution | None = None
    read_lag_exact: bool | None = None
    cpu_s: float | None = None
    wall_s: float | None = None
    cpu_share: float | None = None
    workers: list[WorkerClient] | None = None
    #: requests whose bytes were built before the load (``loadgen.prepared``; a multi-turn
    #: point's turns); None when the point prepared none (a result from before)
    prepared_requests: int | None = None
    #: requests taken without prepared bytes, so made and built at their send on the load's hot
    #: path (a duration-bound point past its look-ahead, or past the memory budget); one client
    #: process only (None with several: worker processes take from lazy sources themselves)
    requests_built_at_send: int | None = None


class TurnTtft(Section):
    """TTFT of one turn's completed requests, milliseconds."""

    mean: float | None = None
    p50: float | None = None
    p99: float | None = None


class TurnInput(Section):
    """Input tokens of one turn's requests (the server's count, else the planned length)."""

    mean: float | None = None
    min: float | None = None
    max: float | None = None


class TurnFigures(Section):
    """One turn of a multi-turn run (``core.workload.sessions.by_turn``): its measured
    requests, those completed, their TTFT and input tokens (None without a value)."""

    turn: int
    requests: int | None = None
    completed: int | None = None
    ttft_ms: TurnTtft | None = None
    input_tokens: TurnInput | None = None


class PrefixCache(Section):
    """The server's prefix-cache figures over the measured window
    (``core.workload.sessions.prefix_cache``): ``hits`` and ``queries`` in tokens, ``hit_rate``
    = hits / queries, and ``reason`` when the rate is null."""

    hits: float | None = None
    queries: float | None = None
    hit_rate: float | None = None
    reason: str | None = None


class Sessions(Section):
    """A multi-turn run (``loadgen.sessions.SessionRun.result``): its settings (turns per
    session, think time between turns in seconds, where conversations came from, sessions asked
    and how the conversation was sent), sessions started and completed (every turn answered),
    per-turn figures and the server's prefix-cache hit rate."""

    turns: int | None = None
    think_time_s: float | None = None
    source: str | None = None
    sessions: int | None = None
    prompt: str | None = None
    sessions_started: int | None = None
    sessions_completed: int | None = None
    by_turn: list[TurnFigures] = []
    prefix_cache: PrefixCache | None = None
