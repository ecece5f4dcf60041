"""Client accuracy against ground truth: the arithmetic behind ``infer-prof calibrate``.

Pure. The truth comes from the synthetic server (kernel arrival time of each request, the time
each token was sent), matched to the client's records by request id. Reported per metric:
the error of each percentile (client percentile - true percentile) and the distribution of
per-request errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infer_prof.core.measurement.metrics import RequestRecord, itl_ns, summarize_run, ttft_ns
from infer_prof.core.measurement.stats import percentile, summarize

NS_PER_MS = 1e6


def truth_ttft_ns(t: dict[str, Any]) -> int | None:
    """True TTFT of one request: first token sent - request arrived (kernel time)."""
    return t["send_ns"][0] - t["arrival_ns"] if t["send_ns"] else None


def truth_itl_ns(t: dict[str, Any]) -> list[int]:
    """True inter-token gaps of one request: differences of consecutive send times."""
    s = t["send_ns"]
    return [b - a for a, b in zip(s, s[1:], strict=False)]


def _pct_errors(client: Sequence[float], truth: Sequence[float]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for q in (50, 90, 99):
        c, t = percentile(client, q), percentile(truth, q)
        out[f"p{q}_client_ms"] = None if c is None else c / NS_PER_MS
        out[f"p{q}_truth_ms"] = None if t is None else t / NS_PER_MS
        out[f"p{q}_error_ms"] = None if c is None or t is None else (c - t) / NS_PER_MS
    return out


def compare_to_truth(
    records: Sequence[RequestRecord], truth: Sequence[dict[str, Any]], id_prefix: str
) -> dict[str, Any]:
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
    err_dist = summarize(e_ttft)
    return {
        "matched_requests": len(pairs),
        "client_records": sum(1 for r in records if not r.warmup),
        "failed": sum(1 for r in records if not r.warmup and not r.ok),
        "ttft": {
            **_pct_errors(c_ttft, t_ttft),
            "per_request_error_ms": err_dist.to_dict() if err_dist else None,
        },
        "itl": _pct_errors(c_itl, t_itl),
        "request_throughput": {
            "client": client_rps,
            "truth": truth_rps,
            "error_pct": (client_rps / truth_rps - 1) * 100 if client_rps and truth_rps else None,
        },
    }


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


def misses(report: dict[str, Any], targets: dict[str, float] | None = None) -> list[str]:
    """The targets one :func:`compare_to_truth` report misses (empty: it is within all).

    A target whose error could not be computed (no matched requests) counts as missed."""
    t = DEFAULT_TARGETS if targets is None else targets
    checks = {
        "ttft_p50_ms": ("TTFT p50", report["ttft"]["p50_error_ms"]),
        "ttft_p99_ms": ("TTFT p99", report["ttft"]["p99_error_ms"]),
        "itl_p50_ms": ("ITL p50", report["itl"]["p50_error_ms"]),
        "itl_p99_ms": ("ITL p99", report["itl"]["p99_error_ms"]),
        "request_throughput_pct": ("req/s", report["request_throughput"]["error_pct"]),
    }
    return [
        name
        for key, (name, err) in checks.items()
        if key in t and (err is None or abs(err) > t[key])
    ]


def trusted_up_to(reports: Sequence[dict[str, Any]]) -> int | None:
    """The highest concurrency below which every checked level is within its targets
    (reports carry ``concurrency`` and ``misses``); None when the lowest level already misses."""
    best = None
    for rep in sorted(reports, key=lambda r: r["concurrency"]):
        if rep["misses"]:
            break
        best = rep["concurrency"]
    return best
