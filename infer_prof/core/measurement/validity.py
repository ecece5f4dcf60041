"""Is a run big enough, and was the client healthy enough, to trust its numbers?

Pure. Two kinds of reasons, both reported by name (as MLPerf's LoadGen marks a run INVALID with
the rule it broke, instead of silently printing its numbers):

Too small or too short (``invalid``):

- ``too_few_requests``: completed measured requests < ``min_requests`` (default 10). Below
  about ten samples even the p50 is one request's value, and request throughput moves in steps
  of more than 10% per request.
- ``too_short``: measured window < ``min_duration_s`` (default 5 s). The window's two edges
  (ramp-up, drain) each last about one request's E2E latency, and server-side state (batch
  size, KV-cache occupancy) takes a few seconds to settle; a window of a few seconds makes those
  edges a large share of what throughput divides by. Workload files set stricter limits
  (``min_requests``, ``min_duration_s``); these defaults are the floor for ad-hoc runs.

The stream did not carry the engine's timing (``stream_problem``, also invalid): the server
or a proxy delivered late or in bursts, read from the result's ``stream`` block
(:mod:`infer_prof.core.measurement.stream_shape`):

- ``buffered_stream``: more than half the gaps between a request's events were under 1/10 of
  the steady gap (``stream.bunched``) while the client read in time (its read-lag p99 within
  the limit below, against the steady gap). Tokens came in bursts: TTFT, ITL and TPOT describe
  the proxy's flushes, not the engine. Fix: ``proxy_buffering off`` and HTTP/1.1 to the
  upstream (nginx), or whatever turns off response buffering in the gateway.
- ``first_token_unknown``: more than ``max_first_token_unknown_share`` (default 0.05) of the
  completed requests had all their tokens in one event: they have no TTFT or TPOT (left out
  of those percentiles), so the percentiles describe only the rest.

Client could not keep up (``client_overloaded``, also invalid):

- ``read_lag``: the client's read-lag p99 (time received data waited in the kernel before the
  client read it) > ``max_read_lag_fraction`` (default 0.5) x the run's ITL p50 (the figure the
  summary table shows; the reason names it and the limit). Timestamps are the kernel's, so a
  late read costs nothing *until* the next token of the same stream arrives before the read:
  then both are read together and get the later token's time. Half an ITL of p99 lag leaves a
  margin before that happens. When the stream is bunched its ITL p50 is the proxy's (often 0)
  and says nothing about the engine's pace: the basis is then the span of a burst,
  ``(stream.events_per_burst - 1) x stream.reference_gap_ms`` (a client late by L reads about
  1 + L / gap events as one, so only a lag near that span could have made the bursts itself);
  a client within it is not blamed and the run is ``buffered_stream``.
  A check is never skipped because its basis is 0: only when no basis was measured. A client
  that read late while busy under half the window (``cpu_share``) was starved, not slow: the
  reason says that other processes on its machine (the server, a gateway) held its cores.
- ``dispatch_lag``: the p99 of how late requests were sent against their schedule, when not
  waiting for a concurrency slot, > ``max_dispatch_lag_ms`` (default 5 ms): the open-loop
  arrival pattern that was asked for is not the one the server saw.
- ``client_cpu``: a client process (or, with ``--client-processes`` > 1, any one worker) was
  busy > ``max_cpu_share`` (default 0.9) of the measured window's wall time: its event loop had
  no idle time left, so reads and sends queue behind each other even where the lags above do
  not show it yet. Windows under 1 s are not judged (start-up costs dominate them).

With several client processes the result's ``client`` holds pooled figures and a ``workers``
list; :func:`client_figures` takes the worst of the pooled read-lag p99 and each worker's, so
one overloaded worker is not averaged away by idle ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infer_prof.core.measurement.validity_record import Validity as ValiditySection
from infer_prof.core.measurement.validity_record import ValidityRules as RulesSection

DEFAULT_MIN_REQUESTS = 10
DEFAULT_MIN_DURATION_S = 5.0
DEFAULT_MAX_READ_LAG_FRACTION = 0.5
DEFAULT_MAX_DISPATCH_LAG_MS = 5.0
DEFAULT_MAX_CPU_SHARE = 0.9
DEFAULT_MAX_FIRST_TOKEN_UNKNOWN_SHARE = 0.05
#: a client late to read while busier than this was slow itself; below it, it was starved
STARVED_CPU_SHARE = 0.5
MIN_CPU_WINDOW_S = 1.0


@dataclass(frozen=True)
class ValidityRules:
    """Thresholds; see the module docstring for why the defaults are what they are."""

    min_requests: int = DEFAULT_MIN_REQUESTS
    min_duration_s: float = DEFAULT_MIN_DURATION_S
    max_read_lag_fraction: float = DEFAULT_MAX_READ_LAG_FRACTION
    max_dispatch_lag_ms: float = DEFAULT_MAX_DISPATCH_LAG_MS
    max_cpu_share: float = DEFAULT_MAX_CPU_SHARE
    max_first_token_unknown_share: float = DEFAULT_MAX_FIRST_TOKEN_UNKNOWN_SHARE

    def __post_init__(self) -> None:
        if self.min_requests < 0 or self.min_duration_s < 0:
            raise ValueError("min_requests and min_duration_s must be >= 0")
        if self.max_read_lag_fraction <= 0 or self.max_dispatch_lag_ms <= 0:
            raise ValueError("max_read_lag_fraction and max_dispatch_lag_ms must be > 0")
        if self.max_cpu_share <= 0:
            raise ValueError("max_cpu_share must be > 0")


@dataclass(frozen=True)
class Validity:
    """The verdict: ``valid`` unless some reason was found; each reason is one line."""

    reasons: list[str] = field(default_factory=list)  # too small / too short
    client_reasons: list[str] = field(default_factory=list)  # client could not keep up
    rules: ValidityRules = field(default_factory=ValidityRules)
    # the server or a proxy delivered late or in bursts, or no first-token times
    stream_reasons: list[str] = field(default_factory=list)

    @property
    def client_overloaded(self) -> bool:
        return bool(self.client_reasons)

    @property
    def stream_problem(self) -> bool:
        return bool(self.stream_reasons)

    @property
    def valid(self) -> bool:
        return not self.reasons and not self.client_reasons and not self.stream_reasons

    def section(self) -> ValiditySection:
        """The verdict as the result's ``validity`` section: every reason (the run's, the
        stream's, the client's), the two kinds flagged, and the rules (their limits as floats,
        as the file reads back)."""
        r = self.rules
        return ValiditySection(
            valid=self.valid,
            reasons=[*self.reasons, *self.stream_reasons, *self.client_reasons],
            client_overloaded=self.client_overloaded,
            stream_problem=self.stream_problem,
            rules=RulesSection(
                min_requests=r.min_requests,
                min_duration_s=float(r.min_duration_s),
                max_read_lag_fraction=float(r.max_read_lag_fraction),
                max_dispatch_lag_ms=float(r.max_dispatch_lag_ms),
                max_cpu_share=float(r.max_cpu_share),
                max_first_token_unknown_share=float(r.max_first_token_unknown_share),
            ),
        )


def check_validity(
    completed: int,
    duration_s: float | None,
    rules: ValidityRules | None = None,
    *,
    read_lag_p99_ms: float | None = None,
    itl_p50_ms: float | None = None,
    dispatch_lag_p99_ms: float | None = None,
    cpu_share_max: float | None = None,
    stream: Mapping[str, Any] | None = None,
) -> Validity:
    """Apply ``rules`` to a run's numbers; a health figure that is None is not checked.
    ``stream`` is the result's ``stream`` block (:func:`infer_prof.core.measurement.stream_shape.
    stream_shape`): bunched delivery and requests without a first-token time."""
    rules = rules or ValidityRules()
    reasons = []
    if completed < rules.min_requests:
        reasons.append(
            f"too_few_requests: {completed} completed measured requests < minimum "
            f"{rules.min_requests}"
        )
    if duration_s is None or duration_s < rules.min_duration_s:
        got = "no measured window" if duration_s is None else f"{duration_s:.2f} s"
        reasons.append(f"too_short: measured window {got} < minimum {rules.min_duration_s:g} s")
    stream = stream or {}
    client, streamed = [], []
    bunched = bool(stream.get("bunched"))
    ref = stream.get("reference_gap_ms")
    basis = None
    if bunched and ref:
        # a client late by L reads about 1 + L / gap events as one: to have made bursts of e
        # events itself it must have been late by (e - 1) steady gaps
        span = (float(stream.get("events_per_burst") or 2) - 1) * float(ref)
        basis = (span, "the span of a burst ((events per burst - 1) x steady gap)")
    elif itl_p50_ms is not None:
        basis = (itl_p50_ms, "ITL p50")
    late = False
    if read_lag_p99_ms is not None and basis is not None:
        limit = rules.max_read_lag_fraction * basis[0]
        if read_lag_p99_ms > limit:
            late = True
            client.append(
                f"read_lag: client read-lag p99 {read_lag_p99_ms:.3f} ms > "
                f"{rules.max_read_lag_fraction:g} x {basis[1]} {basis[0]:.3f} ms "
                f"(limit {limit:.3f} ms): the client could not keep up; tokens of a stream may "
                "have been read together and timed late"
                + (f"; the client itself was busy only {cpu_share_max:.0%} of the window: other "
                   "processes on its machine (the server, a gateway) held the cores it needed, "
                   "so run the client on another machine"
                   if cpu_share_max is not None and cpu_share_max < STARVED_CPU_SHARE else "")
            )
    if bunched and not late:
        share = stream.get("close_gap_share") or 0.0
        streamed.append(
            f"buffered_stream: {share:.0%} of the gaps between a request's events were under "
            f"{stream.get('close_gap_fraction', 0.1):g} x the steady gap ({float(ref or 0):.3f}"
            f" ms): {stream.get('bursts_per_request')} bursts per request of "
            f"{stream.get('events_per_burst')} events, while the client read in time"
            + (f" (read-lag p99 {read_lag_p99_ms:.3f} ms). " if read_lag_p99_ms is not None
               else ". ") +
            "The server or a proxy delivered tokens in bursts, so TTFT, ITL and TPOT describe "
            "the proxy, not the engine; for nginx set `proxy_buffering off` and "
            "`proxy_http_version 1.1`"
        )
    unknown = int(stream.get("first_token_unknown") or 0)
    unknown_share = float(stream.get("first_token_unknown_share") or 0.0)
    if unknown and unknown_share > rules.max_first_token_unknown_share:
        streamed.append(
            f"first_token_unknown: {unknown} of {stream.get('requests')} requests "
            f"({unknown_share:.0%} > {rules.max_first_token_unknown_share:.0%}) had all their "
            "tokens in one event (no per-chunk usage and no text to time, e.g. a gateway that "
            "drops them): they have no TTFT or TPOT and are left out of those percentiles"
        )
    if dispatch_lag_p99_ms is not None and dispatch_lag_p99_ms > rules.max_dispatch_lag_ms:
        client.append(
            f"dispatch_lag: requests were sent late against their schedule, p99 "
            f"{dispatch_lag_p99_ms:.3f} ms > {rules.max_dispatch_lag_ms:g} ms"
        )
    if cpu_share_max is not None and cpu_share_max > rules.max_cpu_share:
        client.append(
            f"client_cpu: a client process was busy {cpu_share_max:.0%} of the measured window "
            f"(> {rules.max_cpu_share:.0%}): it had no idle time left to read and send on time; "
            "use more --client-processes or a bigger client machine"
        )
    return Validity(reasons, client, rules, streamed)


def _p(d: Any, key: str = "p99") -> float | None:
    return d.get(key) if isinstance(d, Mapping) else None


def _worst(values: list[Any]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, int | float)]
    return max(nums) if nums else None


def client_figures(client: Mapping[str, Any]) -> dict[str, float | None]:
    """The health figures :func:`check_validity` judges, from a result's ``client`` section
    (one process, or several with a ``workers`` list):

    - ``read_lag_p99_ms``: the worst of ``read_lag_ms.p99`` and each worker's;
    - ``dispatch_lag_p99_ms``: ``dispatch_lag_ms.p99`` (open loop; None in closed loop);
    - ``cpu_share_max``: the busiest process's CPU seconds per wall second of the measured
      window (``cpu_share``, its own or each worker's), leaving out windows under 1 s.
    """
    workers = [w for w in client.get("workers") or [] if isinstance(w, Mapping)]
    shares = [
        h.get("cpu_share") for h in [client, *workers] if (h.get("wall_s") or 0) >= MIN_CPU_WINDOW_S
    ]
    return {
        "read_lag_p99_ms": _worst(
            [_p(client.get("read_lag_ms")), *(_p(w.get("read_lag_ms")) for w in workers)]
        ),
        "dispatch_lag_p99_ms": _p(client.get("dispatch_lag_ms")),
        "cpu_share_max": _worst(shares),
    }


def check_result(result: Mapping[str, Any], rules: ValidityRules | None = None) -> Validity:
    """:func:`check_validity` on a result file's mapping: ``summary.requests_completed``,
    ``summary.duration_s``, ``summary.itl_ms.p50`` and the client's figures
    (:func:`client_figures`: read-lag p99, dispatch-lag p99 in open loop only (in closed loop a
    request's wait for a free stream is not lag against a schedule), busiest CPU share) and
    the ``stream`` block."""
    summary = result.get("summary") or {}
    return check_validity(
        int(summary.get("requests_completed") or 0),
        summary.get("duration_s"),
        rules,
        itl_p50_ms=_p(summary.get("itl_ms"), "p50"),
        **client_figures(result.get("client") or {}),
        stream=result.get("stream"),
    )
