"""Client accuracy against ground truth: the arithmetic behind ``infer-prof calibrate``.

Pure. The truth comes from the synthetic server (kernel arrival time of each request, the time
each token was sent), matched to the client's records by request id. Reported per metric:
the error of each percentile (client percentile - true percentile) and the distribution of
per-request errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from infer_prof.core.measurement.metrics import RequestRecord, itl_ns, summarize_run, ttft_ns
from infer_prof.core.measurement.stats import Distribution, percentile, summarize

NS_PER_MS = 1e6


class PercentileErrors(msgspec.Struct, kw_only=True):
    """One metric's client and true percentiles (ms, p50 / p90 / p99) and the error, client
    minus truth (ms); None where a side has no sample. For TTFT also the distribution of the
    per-request errors (ms; ``per_request_error_ms``, None without a matched request); ITL has
    none (``UNSET``: not written)."""

    p50_client_ms: float | None
    p50_truth_ms: float | None
    p50_error_ms: float | None
    p90_client_ms: float | None
    p90_truth_ms: float | None
    p90_error_ms: float | None
    p99_client_ms: float | None
    p99_truth_ms: float | None
    p99_error_ms: float | None
    per_request_error_ms: Distribution | None | UnsetType = UNSET


class ThroughputError(msgspec.Struct, kw_only=True):
    """Requests/s as the client measured it and as the server's truth says (first arrival to
    last token sent), and the client's error in percent; None where unknown."""

    client: float | None
    truth: float | None
    error_pct: float | None


class AccuracyReport(msgspec.Struct, kw_only=True):
    """The client against the server's truth at one level (:func:`compare_to_truth`): the
    requests matched on both sides, the client's measured records and failures, the TTFT and ITL
    errors (ms) and the requests/s error (%)."""

    matched_requests: int
    client_records: int
    failed: int
    ttft: PercentileErrors
    itl: PercentileErrors
    request_throughput: ThroughputError


def truth_ttft_ns(t: dict[str, Any]) -> int | None:
    """True TTFT of one request: first token sent - request arrived (kernel time)."""
    return t["send_ns"][0] - t["arrival_ns"] if t["send_ns"] else None


def truth_itl_ns(t: dict[str, Any]) -> list[int]:
    """True inter-token gaps of one request: differences of consecutive send times."""
    s = t["send_ns"]
    return [b - a for a, b in zip(s, s[1:], strict=False)]


def _ms(x: float | None) -> float | None:
    return None if x is None else x / NS_PER_MS


def _pct_errors(client: Sequence[float], truth: Sequence[float]) -> PercentileErrors:
    """Client and true p50 / p90 / p99 of ``client`` and ``truth`` (ns) in ms, and their
    difference."""
    c50, c90, c99 = (percentile(client, q) for q in (50, 90, 99))
    t50, t90, t99 = (percentile(truth, q) for q in (50, 90, 99))

    def err(c: float | None, t: float | None) -> float | None:
        return None if c is None or t is None else (c - t) / NS_PER_MS

    return PercentileErrors(
        p50_client_ms=_ms(c50), p50_truth_ms=_ms(t50), p50_error_ms=err(c50, t50),
        p90_client_ms=_ms(c90), p90_truth_ms=_ms(t90), p90_error_ms=err(c90, t90),
        p99_client_ms=_ms(c99), p99_truth_ms=_ms(t99), p99_error_ms=err(c99, t99),
    )


def compare_to_truth(
    records: Sequence[RequestRecord], truth: Sequence[dict[str, Any]], id_prefix: str
) -> AccuracyReport:
    """Errors of the client's TTFT, ITL and requests/s against the server's truth.

    ``truth`` entries carry ``request_id`` = ``id_prefix + str(record.index)``. Only completed,
    non-warm-up requests present on both sides are compared.
    """
    by_id = {t.get("request_id"): t for t in truth if not t.get("aborted")}
    pairs = [
        (r, by_id[f"{id_prefix}{r.index}"])
        for r in records
        if not r.warmup and r.ok and f"{id_prefix}{r.index}" in by_id
    ]
    c_ttft, t_ttft, e_ttft = [], [], []
    c_itl: list[float] = []
    t_itl: list[float] = []
    for r, t in pairs:
        ct, tt = ttft_ns(r), truth_ttft_ns(t)
        if ct is None or tt is None:
            continue
        c_ttft.append(float(ct))
        t_ttft.append(float(tt))
        e_ttft.append((ct - tt) / NS_PER_MS)
        c_itl.extend(itl_ns(r))
        t_itl.extend(float(g) for g in truth_itl_ns(t))
    summary = summarize_run([r for r, _ in pairs])
    client_rps = summary.request_throughput
    truth_rps = None
    if pairs:
        start = min(t["arrival_ns"] for _, t in pairs)
        end = max(t["send_ns"][-1] for _, t in pairs)
        truth_rps = len(pairs) / ((end - start) / 1e9) if end > start else None
    ttft = _pct_errors(c_ttft, t_ttft)
    ttft.per_request_error_ms = summarize(e_ttft)
    return AccuracyReport(
        matched_requests=len(pairs),
        client_records=sum(1 for r in records if not r.warmup),
        failed=sum(1 for r in records if not r.warmup and not r.ok),
        ttft=ttft,
        itl=_pct_errors(c_itl, t_itl),
        request_throughput=ThroughputError(
            client=client_rps,
            truth=truth_rps,
            error_pct=(client_rps / truth_rps - 1) * 100 if client_rps and truth_rps else None,
        ),
    )


#: The accuracy a load level must show to be trusted (ms, except requests/s in percent):
#: absolute error of the client's percentile against the true one.
DEFAULT_TARGETS: dict[str, float] = {
    "ttft_p50_ms": 2.0,
    "ttft_p99_ms": 5.0,
    "itl_p50_ms": 0.5,
    "itl_p99_ms": 2.0,
    "request_throughput_pct": 2.0,
}


#: Targets by calibration mode: ``lean`` (the built-in server as cheap as it can be) and
#: ``server_cost`` (the built-in server burning CPU per token, ``calibrate --server-cost-us``, like
#: a real API server on the client's host; issue 14 asks the same accuracy there).
TARGETS_BY_MODE: dict[str, dict[str, float]] = {
    "lean": DEFAULT_TARGETS,
    "server_cost": dict(DEFAULT_TARGETS),
}


def calibration_mode(server_cost_us: float) -> str:
    """The calibration mode (a key of :data:`TARGETS_BY_MODE`) for a server costing
    ``server_cost_us`` us of CPU per streamed token: ``lean`` at 0, else ``server_cost``."""
    return "server_cost" if server_cost_us > 0 else "lean"


def misses(report: AccuracyReport, targets: dict[str, float] | None = None) -> list[str]:
    """The targets one :func:`compare_to_truth` report misses (empty: it is within all).

    A target whose error could not be computed (no matched requests) counts as missed."""
    t = DEFAULT_TARGETS if targets is None else targets
    checks = {
        "ttft_p50_ms": ("TTFT p50", report.ttft.p50_error_ms),
        "ttft_p99_ms": ("TTFT p99", report.ttft.p99_error_ms),
        "itl_p50_ms": ("ITL p50", report.itl.p50_error_ms),
        "itl_p99_ms": ("ITL p99", report.itl.p99_error_ms),
        "request_throughput_pct": ("req/s", report.request_throughput.error_pct),
    }
    return [
        name
        for key, (name, err) in checks.items()
        if key in t and (err is None or abs(err) > t[key])
    ]


def trusted_up_to(levels: Sequence[tuple[int, Sequence[str]]]) -> int | None:
    """The highest concurrency below which every checked level is within its targets
    (``levels``: each level's concurrency and the targets it missed, :func:`misses`); None when
    the lowest level already misses."""
    best = None
    for concurrency, missed in sorted(levels, key=lambda level: level[0]):
        if missed:
            break
        best = concurrency
    return best
