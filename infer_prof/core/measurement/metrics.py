"""Per-request latency metrics and the run summary, as ../DESIGN.md defines them.

All timestamps are integer nanoseconds on one monotonic clock (``time.perf_counter_ns`` of the
machine; kernel receive timestamps are converted onto it). Per request:

- ``send_ns``: just before the request bytes went out.
- ``chunk_ns[i]``: arrival of the i-th token-carrying chunk, which carried ``chunk_tokens[i]``
  tokens
  (from the server's usage counter: a chunk may carry several tokens).

Definitions:

- TTFT = chunk_ns[0] - send_ns
- E2E = chunk_ns[-1] - send_ns
- TPOT = (E2E - TTFT) / (output_tokens - 1); undefined when output_tokens <= 1
- ITL = chunk_ns[i] - chunk_ns[i-1] for i >= 1, split evenly over chunk_tokens[i] tokens when a
  chunk carries more than one; pooled over requests.
- TTFO (time to first output token) = chunk_ns[first_answer_chunk] - send_ns: the first answer
  (content or tool call) chunk of a reasoning model; None (never 0) when the request ended still
  reasoning. Answer TPOT = (chunk_ns[-1] - chunk_ns[first_answer_chunk]) / (tokens from the first
  answer chunk on - 1), where a request streamed reasoning and answer
  (:mod:`infer_prof.core.measurement.reasoning`). TPOT and ITL cover every generated token.
- Prefill throughput per user = prompt_tokens / TTFT (tokens/s).
- Throughputs divide by the measured window (warm-up excluded): requests/s = completed / window,
  output tokens/s = output tokens of completed requests / window, total adds their prompt tokens.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from infer_prof.core.measurement.bunching_record import SendBunching
from infer_prof.core.measurement.reasoning import (
    ReasoningSummary,
    reasoned,
    summarize_reasoning,
)
from infer_prof.core.measurement.stats import PERCENTILE_METHOD, Distribution, summarize

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


@dataclass
class RequestRecord:
    """Everything measured about one request. Times are perf_counter nanoseconds."""

    index: int
    input_len: int
    max_tokens: int
    warmup: bool = False
    worker: int = 0
    scheduled_ns: int | None = None  # when the driver wanted to send it (open loop, or slot free)
    send_ns: int | None = None
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    done_ns: int | None = None  # the response was complete (stream end seen)
    prompt_tokens: int | None = None  # from the server's usage
    output_tokens: int | None = None  # from the server's usage
    token_count_source: str = "usage"  # "usage" or "chunks" when the server sent no usage
    finish_reason: str | None = None
    error: str | None = None  # failure kind: "timeout", "http_500", "connection_closed", ...
    error_detail: str | None = None
    retry_after_s: float | None = None  # a rate_limited (429) answer's Retry-After, in seconds
    timestamp_source: str = "kernel"  # "kernel" (SO_TIMESTAMPNS) or "userspace"
    # sent after the measured requests ran out, to hold the load until the last measured one
    # ended (also ``warmup``: never measured); error "cut" when stopped at that end
    cooldown: bool = False
    # prompt tokens the server found in its prefix cache (usage.prompt_tokens_details.
    # cached_tokens; vLLM sends it with --enable-prompt-tokens-details)
    cached_tokens: int | None = None
    # speculative decoding, as the server reported it for this request (vLLM's
    # metrics.speculative_decoding): verify steps, draft tokens proposed and accepted
    spec_steps: int | None = None
    spec_draft_tokens: int | None = None
    spec_accepted_tokens: int | None = None
    # a reasoning model's stream (core.measurement.reasoning): the index in chunk_ns of the first
    # answer (content or tool-call) chunk, None if none came; the tokens its reasoning chunks
    # carried; the server's usage.completion_tokens_details.reasoning_tokens, if sent
    first_answer_chunk: int | None = None
    reasoning_chunk_tokens: int = 0
    reasoning_tokens_usage: int | None = None
    # the LoRA adapter the request asked for (its ``model``); None: the served model itself
    adapter: str | None = None

    @property
    def ok(self) -> bool:
        """Completed without error and produced at least one token."""
        return self.error is None and self.done_ns is not None and bool(self.chunk_ns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "input_len": self.input_len,
            "max_tokens": self.max_tokens,
            "warmup": self.warmup,
            "worker": self.worker,
            "scheduled_ns": self.scheduled_ns,
            "send_ns": self.send_ns,
            "chunk_ns": self.chunk_ns,
            "chunk_tokens": self.chunk_tokens,
            "done_ns": self.done_ns,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "token_count_source": self.token_count_source,
            "finish_reason": self.finish_reason,
            "error": self.error,
            "error_detail": self.error_detail,
            "retry_after_s": self.retry_after_s,
            "timestamp_source": self.timestamp_source,
            "cooldown": self.cooldown,
            "cached_tokens": self.cached_tokens,
            "spec_steps": self.spec_steps,
            "spec_draft_tokens": self.spec_draft_tokens,
            "spec_accepted_tokens": self.spec_accepted_tokens,
            "first_answer_chunk": self.first_answer_chunk,
            "reasoning_chunk_tokens": self.reasoning_chunk_tokens,
            "reasoning_tokens_usage": self.reasoning_tokens_usage,
            "adapter": self.adapter,
            "ttft_ms": _ms(ttft_ns(self)),
            "ttfo_ms": _ms(ttfo_ns(self)),
            "tpot_ms": _ms(tpot_ns(self)),
            "e2e_ms": _ms(e2e_ns(self)),
            "queue_ms": _ms(queue_ns(self)),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in names})


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / NS_PER_MS


def first_token_known(r: RequestRecord) -> bool:
    """Whether the arrival of a request's first token can be known: False when it produced
    more than one token (``output_tokens``, else the sum of ``chunk_tokens``) and every one of
    its token-carrying events arrived at one time (one event carried them all, or one read held
    the whole response). Then the first token came at some unknown time before that event, and
    the request has no TTFT and no TPOT (:mod:`infer_prof.core.measurement.stream_shape` counts
    them)."""
    if not r.chunk_ns:
        return False
    tokens = r.output_tokens if r.output_tokens is not None else sum(r.chunk_tokens)
    return tokens <= 1 or r.chunk_ns[-1] != r.chunk_ns[0]


def ttft_ns(r: RequestRecord) -> int | None:
    """Time to first token: first token-carrying chunk arrival - send. None if never measured,
    or when the first token's arrival cannot be known (:func:`first_token_known`)."""
    if r.send_ns is None or not r.chunk_ns or not first_token_known(r):
        return None
    return r.chunk_ns[0] - r.send_ns


def e2e_ns(r: RequestRecord) -> int | None:
    """End-to-end latency: last token-carrying chunk arrival - send."""
    if r.send_ns is None or not r.chunk_ns:
        return None
    return r.chunk_ns[-1] - r.send_ns


def tpot_ns(r: RequestRecord) -> float | None:
    """Time per output token after the first: (E2E - TTFT) / (output_tokens - 1).

    None when output_tokens <= 1 (undefined) or when timing is missing.
    """
    tokens = r.output_tokens
    first, total = ttft_ns(r), e2e_ns(r)
    if tokens is None or tokens <= 1 or first is None or total is None:
        return None
    return (total - first) / (tokens - 1)


def ttfo_ns(r: RequestRecord) -> int | None:
    """Time to first output token (content or tool call): the first answer chunk's arrival -
    send. None when no answer chunk arrived (a request that ended still reasoning), or when the
    first token's arrival cannot be known (:func:`first_token_known`)."""
    i = r.first_answer_chunk
    if r.send_ns is None or i is None or i >= len(r.chunk_ns) or not first_token_known(r):
        return None
    return r.chunk_ns[i] - r.send_ns


def answer_tpot_ns(r: RequestRecord) -> float | None:
    """Time per answer token after the first, where a request streamed reasoning and answer:
    (last chunk - first answer chunk) / (tokens from the first answer chunk on - 1). None
    without reasoning, without an answer chunk, or with fewer than 2 tokens from it on."""
    i = r.first_answer_chunk
    if i is None or not reasoned(r) or ttfo_ns(r) is None:
        return None
    tokens = sum(r.chunk_tokens[i:])
    if tokens <= 1:
        return None
    return (r.chunk_ns[-1] - r.chunk_ns[i]) / (tokens - 1)


def prefill_tok_s(r: RequestRecord) -> float | None:
    """Prefill throughput a user sees: prompt tokens / TTFT, in tokens/s. None without a
    prompt token count or a TTFT."""
    first = ttft_ns(r)
    if r.prompt_tokens is None or not first or first <= 0:
        return None
    return r.prompt_tokens / (first / NS_PER_S)


def itl_ns(r: RequestRecord) -> list[float]:
    """Inter-token latencies of one request: gaps between token-carrying chunks.

    A chunk carrying k > 1 tokens contributes k gaps of (gap / k) each. Tokens that arrive inside
    the first chunk have no gap before them and contribute nothing.
    """
    out: list[float] = []
    times, counts = r.chunk_ns, r.chunk_tokens
    for i in range(1, len(times)):
        gap = times[i] - times[i - 1]
        k = counts[i] if i < len(counts) else 1
        if k <= 1:
            out.append(float(gap))
        else:
            out.extend([gap / k] * k)
    return out


def queue_ns(r: RequestRecord) -> int | None:
    """Client-side wait between when a request was due and when it was sent (never hidden)."""
    if r.scheduled_ns is None or r.send_ns is None:
        return None
    return max(0, r.send_ns - r.scheduled_ns)


@dataclass(frozen=True)
class RunSummary:
    """The numbers a run reports. Latency distributions are in milliseconds; None = not measured."""

    requests_completed: int
    requests_failed: int
    failure_kinds: dict[str, int]
    duration_s: float | None
    request_throughput: float | None
    output_throughput: float | None
    total_throughput: float | None
    total_output_tokens: int
    total_prompt_tokens: int
    ttft_ms: Distribution | None
    tpot_ms: Distribution | None
    itl_ms: Distribution | None
    e2e_ms: Distribution | None
    queue_ms: Distribution | None
    percentile_method: str = PERCENTILE_METHOD
    #: The seconds the rates are over: ``duration_s`` (the wall window) or, for a closed loop,
    #: the streams' mean span (:func:`stream_span_s`); ``rate_basis`` says which.
    rate_window_s: float | None = None
    rate_basis: str = "window"
    #: completed requests left out of TTFT and TPOT: their first token's arrival cannot be
    #: known (:func:`first_token_known`)
    first_token_unknown: int = 0
    #: a reasoning model's figures: None when no completed request streamed reasoning
    ttfo_ms: Distribution | None = None
    answer_tpot_ms: Distribution | None = None
    reasoning: ReasoningSummary | None = None
    #: prompt tokens / TTFT per request (tokens/s)
    prefill_tok_s_user: Distribution | None = None

    def to_dict(self) -> dict[str, Any]:
        def dist(d: Distribution | None) -> dict[str, Any] | None:
            return None if d is None else d.to_dict()

        return {
            "requests_completed": self.requests_completed,
            "requests_failed": self.requests_failed,
            "failure_kinds": dict(self.failure_kinds),
            "duration_s": self.duration_s,
            "request_throughput": self.request_throughput,
            "output_throughput": self.output_throughput,
            "total_throughput": self.total_throughput,
            "rate_window_s": self.rate_window_s,
            "rate_basis": self.rate_basis,
            "total_output_tokens": self.total_output_tokens,
            "total_prompt_tokens": self.total_prompt_tokens,
            "ttft_ms": dist(self.ttft_ms),
            "tpot_ms": dist(self.tpot_ms),
            "itl_ms": dist(self.itl_ms),
            "e2e_ms": dist(self.e2e_ms),
            "queue_ms": dist(self.queue_ms),
            "first_token_unknown": self.first_token_unknown,
            "ttfo_ms": dist(self.ttfo_ms),
            "answer_tpot_ms": dist(self.answer_tpot_ms),
            "prefill_tok_s_user": dist(self.prefill_tok_s_user),
            "percentile_method": self.percentile_method,
        }


def response_end_ns(r: RequestRecord) -> int | None:
    """When a request's response ended: the stream end seen (``done_ns``), else its last
    token-carrying chunk (a request cut or failed mid-stream), else None."""
    return r.done_ns if r.done_ns is not None else (r.chunk_ns[-1] if r.chunk_ns else None)


def measured_window_ns(records: Sequence[RequestRecord]) -> tuple[int, int] | None:
    """The measured window: first send of a non-warm-up request to the last response end.

    None when no measured request was sent or none finished.
    """
    sends = [r.send_ns for r in records if not r.warmup and r.send_ns is not None]
    ends = [
        r.done_ns if r.done_ns is not None else r.chunk_ns[-1]
        for r in records
        if not r.warmup and (r.done_ns is not None or r.chunk_ns)
    ]
    if not sends or not ends:
        return None
    start, end = min(sends), max(ends)
    return (start, end) if end > start else None


def stream_span_s(records: Iterable[RequestRecord]) -> float | None:
    """A closed loop's stream time: the mean, over the streams (``worker``) that sent measured
    requests, of each stream's span from its first measured send to its last measured end, in
    seconds.

    Rates over it are those of ``c`` streams kept busy: ``sum(n_s * D) / c = N * D / c`` for
    streams of ``n_s`` requests of ``D`` seconds each, so ``N / span = c / D``. The wall window
    (first send to last end) is that only when every stream starts and ends its measured
    requests together (lock-step); streams out of phase (the staggered warm-up, varied lengths)
    start and end up to one request apart, so the wall window is longer by about one request and
    its rates read low by about ``1 / (requests per stream + 1)`` (7 % at 200 requests over 16
    streams), a figure that would change with ``-n``. None without a measured request that
    ended.
    """
    spans: dict[int, list[int]] = {}
    for r in records:
        if r.warmup or r.send_ns is None:
            continue
        end = response_end_ns(r)
        if end is None:
            continue
        lo_hi = spans.setdefault(r.worker, [r.send_ns, end])
        lo_hi[0] = min(lo_hi[0], r.send_ns)
        lo_hi[1] = max(lo_hi[1], end)
    if not spans:
        return None
    mean = sum(hi - lo for lo, hi in spans.values()) / len(spans)
    return mean / NS_PER_S if mean > 0 else None


def in_flight_mean(records: Iterable[RequestRecord]) -> float | None:
    """Time-weighted mean of requests in flight over the measured window (client side).

    ``sum over requests of overlap([send, end], window) / window``, every request counted
    (warm-up ones too: a warm-up request still running when measuring starts is load the server
    carries), the window being :func:`measured_window_ns`. Against the asked concurrency it
    shows how much of the asked load was really offered: client-side send delays, the ramp-down
    at the end of a counted run. None without a window.
    """
    recs = list(records)
    window = measured_window_ns([r for r in recs if not r.warmup])
    if not window or window[1] <= window[0]:
        return None
    lo, hi = window
    area = 0
    for r in recs:
        if r.send_ns is None:
            continue
        end = response_end_ns(r)
        if end is None:
            continue
        area += max(0, min(end, hi) - max(r.send_ns, lo))
    return area / (hi - lo)


def send_bunching(
    records: Iterable[RequestRecord], within_ns: int = 1_000_000
) -> SendBunching | None:
    """How bunched the measured requests' sends are: whether the streams run in lock-step.

    ``share``: of the gaps between consecutive sends (all streams, sorted by time), the share
    shorter than ``within_ns``. ``independent_share``: the same for sends at the same mean rate
    arriving independently (Poisson): ``1 - exp(-rate * within)``, ``rate = (n - 1) / (last send
    - first send)``. A closed loop whose requests all have the same lengths tends to lock its
    streams into waves (they end in the same decode step and resend together), so every wave's
    prefills queue at once and TTFT reads higher than for the same streams out of phase; a share
    far above the independent one shows it. None with fewer than 3 sends or no time between them.
    """
    sends = sorted(r.send_ns for r in records if not r.warmup and r.send_ns is not None)
    if len(sends) < 3 or sends[-1] <= sends[0]:
        return None
    gaps = [b - a for a, b in zip(sends[:-1], sends[1:], strict=True)]
    rate = len(gaps) / (sends[-1] - sends[0])  # sends per ns
    return SendBunching(
        within_ms=within_ns / 1e6,
        share=sum(g < within_ns for g in gaps) / len(gaps),
        independent_share=1.0 - math.exp(-rate * within_ns),
    )


def busy_concurrency(records: Iterable[RequestRecord]) -> float | None:
    """Requests in flight, averaged over the time at least one was (client side).

    Measured requests, each in flight from ``send_ns`` to its end (``done_ns``, else its last
    chunk): ``integral(n(t) dt) / time with n(t) >= 1``. At one stream in a closed loop this is
    1.0 whatever the gaps between requests; it is the batch estimate when the server exposes no
    running-requests gauge. ``None`` when no measured request has both ends.
    """
    events: list[tuple[int, int]] = []
    for r in records:
        if r.warmup or r.send_ns is None:
            continue
        end = response_end_ns(r)
        if end is None or end <= r.send_ns:
            continue
        events.append((r.send_ns, 1))
        events.append((end, -1))
    if not events:
        return None
    events.sort()
    area = busy = 0
    n, prev = 0, events[0][0]
    for t, step in events:
        if n > 0:
            area += n * (t - prev)
            busy += t - prev
        n += step
        prev = t
    return area / busy if busy > 0 else None


def summarize_run(
    records: Iterable[RequestRecord],
    window_ns: tuple[int, int] | None = None,
    rate_window_s: float | None = None,
) -> RunSummary:
    """Aggregate measured (non-warm-up) requests into a :class:`RunSummary`.

    Latency metrics pool completed requests only; failures are counted by kind. TTFT and TPOT
    leave out the requests whose first token's arrival cannot be known (counted in
    ``first_token_unknown``). ``window_ns``
    defaults to :func:`measured_window_ns`. Rates (requests/s, tokens/s) are counts over
    ``rate_window_s`` where given (a closed loop's :func:`stream_span_s`), else over the window.
    """
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    failed = [r for r in measured if not r.ok]
    kinds = Counter(r.error or "no_tokens" for r in failed)
    window = window_ns if window_ns is not None else measured_window_ns(measured)
    duration_s = (window[1] - window[0]) / NS_PER_S if window else None
    out_tokens = sum(r.output_tokens or 0 for r in ok)
    prompt_tokens = sum(r.prompt_tokens or 0 for r in ok)
    basis = "stream_spans" if rate_window_s else "window"
    per_s = rate_window_s if rate_window_s else duration_s

    def rate(x: float) -> float | None:
        return x / per_s if per_s else None

    def dist_ms(values: list[float]) -> Distribution | None:
        d = summarize(values)
        return None if d is None else d.scaled(1.0 / NS_PER_MS)

    itls: list[float] = []
    for r in ok:
        itls.extend(itl_ns(r))
    thinking = summarize_reasoning(ok, per_s)
    return RunSummary(
        requests_completed=len(ok),
        requests_failed=len(failed),
        failure_kinds=dict(sorted(kinds.items())),
        duration_s=duration_s,
        request_throughput=rate(len(ok)),
        output_throughput=rate(out_tokens),
        total_throughput=rate(out_tokens + prompt_tokens),
        total_output_tokens=out_tokens,
        total_prompt_tokens=prompt_tokens,
        ttft_ms=dist_ms([float(v) for r in ok if (v := ttft_ns(r)) is not None]),
        tpot_ms=dist_ms([t for r in ok if (t := tpot_ns(r)) is not None]),
        itl_ms=dist_ms(itls),
        e2e_ms=dist_ms([float(v) for r in ok if (v := e2e_ns(r)) is not None]),
        queue_ms=dist_ms([float(v) for r in measured if (v := queue_ns(r)) is not None]),
        rate_window_s=per_s,
        rate_basis=basis,
        first_token_unknown=sum(1 for r in ok if not first_token_known(r)),
        ttfo_ms=dist_ms([float(v) for r in ok if (v := ttfo_ns(r)) is not None])
        if thinking else None,
        answer_tpot_ms=dist_ms([t for r in ok if (t := answer_tpot_ns(r)) is not None]),
        reasoning=thinking,
        prefill_tok_s_user=summarize([p for r in ok if (p := prefill_tok_s(r)) is not None]),
    )
