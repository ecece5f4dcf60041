"""Scraping the inference server's Prometheus ``/metrics`` during a run.

``MetricsScraper`` polls the endpoint on a background thread, and at once at the measured
window's edges, and keeps a time series of the vLLM engine figures that explain throughput: KV
cache usage, running and waiting requests, preemptions, prefix-cache hits. A failed scrape is
counted and its error kept; it never stops the run. The parser itself is pure and lives in
``infer_prof.core.measurement.prometheus_text``.

Other servers' metrics go into the same series where they have them (:data:`OTHER_SERVERS`):
SGLang (``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:token_usage``) and TGI
(``tgi_batch_current_size``, ``tgi_queue_size``). The server is recognised by its metric names
(``server_kind``); a figure it does not expose is null, with ``<summary key>_reason`` saying so
(:data:`NOT_EXPOSED`).
"""

from __future__ import annotations

import math
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from infer_prof.core.measurement import timeseries as ts
from infer_prof.core.measurement.counters import flag_enabled, not_counted_reason
from infer_prof.core.measurement.prometheus_text import (
    Samples,
    max_samples,
    parse_prometheus_text,
    sum_by_label,
    sum_samples,
)

__all__ = [
    "GAUGES",
    "COUNTERS",
    "FLAG_GATED",
    "MetricsScraper",
    "extract_server",
    "extract_vllm",
    "mark_not_counted",
    "parse_prometheus_text",
]

# Series key -> (metric names, newest first; how label sets combine).
# vLLM's kv_cache_usage_perc is a fraction (1.0 = full), despite its name; with several engines
# (data parallel) each has its own cache, and the fullest one is what preempts: take the max.
GAUGES: dict[str, tuple[tuple[str, ...], str]] = {
    "kv_cache_usage_perc": (("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), "max"),
    "running": (("vllm:num_requests_running",), "sum"),
    "waiting": (("vllm:num_requests_waiting",), "sum"),
}
# Counters: summed over label sets (engines); the window figure is their increase.
COUNTERS: dict[str, tuple[str, ...]] = {
    "preemptions_total": ("vllm:num_preemptions_total",),
    "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prefix_cache_queries_total": (
        "vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_queries_total",
    ),
    "estimated_read_bytes_per_gpu_total": ("vllm:estimated_read_bytes_per_gpu_total",),
    # speculative decoding (vLLM with --speculative-config): verify steps that had a draft,
    # draft tokens proposed, draft tokens accepted (vllm/v1/spec_decode/metrics.py)
    "spec_decode_drafts_total": ("vllm:spec_decode_num_drafts_total",),
    "spec_decode_draft_tokens_total": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_decode_accepted_tokens_total": ("vllm:spec_decode_num_accepted_tokens_total",),
}
# vLLM's vllm:lora_requests_info (with --enable-lora): one sample per state the scheduler has
# been in, its value the time of that state (s since the epoch), the adapters running and
# waiting as comma-separated label values; the newest sample is the present state. Series key
# -> its label: how many adapters are in that state now.
LORA_GAUGES: dict[str, str] = {
    "lora_adapters_running": "running_lora_adapters",
    "lora_adapters_waiting": "waiting_lora_adapters",
}
#: Draft tokens accepted at each draft position, a counter per ``position`` label; each
#: position is its own series, ``<PER_POSITION><position>`` (0 is the first draft token).
PER_POSITION_METRIC = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
PER_POSITION = "spec_decode_accepted_per_pos_total_"
SERIES_KEYS: tuple[str, ...] = ("t_s", *GAUGES, *COUNTERS, *LORA_GAUGES)
# Summary key -> (series key, the vLLM flag without which the counter stays at 0). Such a
# figure is null with ``<key>_reason`` when it was not counted (see ``core.measurement.counters``).
FLAG_GATED: dict[str, tuple[str, str]] = {
    "estimated_read_bytes_per_gpu": (
        "estimated_read_bytes_per_gpu_total",
        "--enable-mfu-metrics",
    ),
}


# Other servers: series key -> (metric names, how label sets combine), as in GAUGES/COUNTERS.
# SGLang's token_usage is the fraction of its KV-cache token pool in use (1.0 = full), the same
# meaning as vLLM's kv_cache_usage_perc. TGI's batch_current_size is the requests in the running
# batch; queue_size the requests waiting for one.
OTHER_SERVERS: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "sglang": {
        "kv_cache_usage_perc": (("sglang:token_usage",), "max"),
        "running": (("sglang:num_running_reqs",), "sum"),
        "waiting": (("sglang:num_queue_reqs",), "sum"),
    },
    "tgi": {
        "running": (("tgi_batch_current_size",), "sum"),
        "waiting": (("tgi_queue_size",), "sum"),
    },
}
# Summary keys a server's metrics do not give, and why (the summary's <key>_reason).
_PREFIX = ("prefix_cache_hits", "prefix_cache_queries", "prefix_cache_hit_rate")
NOT_EXPOSED: dict[str, dict[str, str]] = {
    "sglang": {
        "preemptions": "SGLang exposes no counter of preempted (retracted) requests",
        **{k: "SGLang exposes a prefix-cache hit-rate gauge (sglang:cache_hit_rate), not the "
              "hit and query counters" for k in _PREFIX},
    },
    "tgi": {
        "kv_cache_usage_max": "TGI exposes no KV-cache use",
        "kv_cache_usage_mean": "TGI exposes no KV-cache use",
        "preemptions": "TGI exposes no preemption counter",
        **{k: "TGI exposes no prefix-cache counters" for k in _PREFIX},
    },
}


def server_kind(samples: Samples) -> str | None:
    """Which server wrote the metrics: ``vllm``, ``sglang`` or ``tgi`` (by its metric names;
    the first found in that order), else None."""
    for kind, prefix in (("vllm", "vllm:"), ("sglang", "sglang:"), ("tgi", "tgi_")):
        if any(n.startswith(prefix) for n in samples):
            return kind
    return None


def extract_server(samples: Samples) -> tuple[str | None, dict[str, float | None]]:
    """``(server kind, figures)`` of one scrape: vLLM's by :func:`extract_vllm`, SGLang's and
    TGI's by :data:`OTHER_SERVERS` into the same series keys (None where not exposed)."""
    kind = server_kind(samples)
    if kind not in OTHER_SERVERS:
        return kind, extract_vllm(samples)
    out: dict[str, float | None] = dict.fromkeys((*GAUGES, *COUNTERS, *LORA_GAUGES))
    for key, (names, how) in OTHER_SERVERS[kind].items():
        combine = max_samples if how == "max" else sum_samples
        out[key] = next((v for n in names if (v := combine(samples, n)) is not None), None)
    return kind, out


def extract_vllm(samples: Samples) -> dict[str, float | None]:
    """The vLLM figures of one scrape: ``{series key: value or None where the metric is absent}``.

    Gauges and counters per ``GAUGES`` / ``COUNTERS``; the first metric name present wins (newer
    vLLM names first, older ones as fallbacks).
    """
    out: dict[str, float | None] = {}
    for key, (names, how) in GAUGES.items():
        combine = max_samples if how == "max" else sum_samples
        out[key] = next((v for n in names if (v := combine(samples, n)) is not None), None)
    for key, names in COUNTERS.items():
        out[key] = next((v for n in names if (v := sum_samples(samples, n)) is not None), None)
    out.update(lora_adapter_counts(samples))
    return out


def lora_adapter_counts(samples: Samples) -> dict[str, float | None]:
    """How many LoRA adapters vLLM's scheduler runs and keeps waiting now (:data:`LORA_GAUGES`):
    the names in the labels of the newest ``vllm:lora_requests_info`` sample (the one with the
    largest value, a time); None without that metric (LoRA not enabled)."""
    rows = samples.get("vllm:lora_requests_info") or []
    if not rows:
        return dict.fromkeys(LORA_GAUGES)
    labels, _ = max(rows, key=lambda row: row[1])
    return {key: float(len([n for n in labels.get(label, "").split(",") if n.strip()]))
            for key, label in LORA_GAUGES.items()}


def summarize_metrics(
    series: dict[str, list[Any]], start_s: float | None, end_s: float | None
) -> dict[str, Any]:
    """Summary of the scraped series over the window ``[start_s, end_s]`` (``None``: open end).

    Gauges: ``*_max`` (largest scrape) and ``*_mean`` (time-weighted, trapezoid, over the
    window's scrapes). ``running_busy_mean``: the running gauge's mean over the time it was
    above 0 (``core.measurement.timeseries.busy_mean``): the batch an engine step ran with.
    Counters: increase from the window's first scrape to its last, resets
    handled (``core.measurement.timeseries.counter_increase``); ``None`` if the metric is absent
    there. ``prefix_cache_hit_rate`` = hits increase / queries increase, ``None`` with no queries
    (``prefix_cache_hit_rate_reason`` says why). ``spec_decode_drafts``, ``_draft_tokens``,
    ``_accepted_tokens``: the speculative-decoding counters' increases, and
    ``spec_decode_accepted_per_position`` each draft position's (None: not exposed).
    ``lora_adapters_running_max``/``_mean`` and ``lora_adapters_waiting_max``: LoRA adapters
    vLLM ran at once and kept waiting (:func:`lora_adapter_counts`; None without LoRA).
    ``estimated_read_bytes_per_gpu`` is that counter's increase (bytes, summed over engines);
    ``estimated_read_bytes_per_gpu_reason`` says why it is null (not exposed, not read at the
    window's edges); :func:`mark_not_counted` nulls it where the server did not count it.
    """
    t: list[float] = series["t_s"]
    idx = ts.window_indices(t, start_s, end_s)
    tw = ts.take(t, idx)

    def col(key: str) -> list[Any]:  # (a series a hand-made or older scrape lacks: unread)
        return ts.take(series.get(key) or [None] * len(t), idx)

    spec = {key: ts.counter_increase(col(f"spec_decode_{key}_total"))
            for key in ("drafts", "draft_tokens", "accepted_tokens")}
    hits = ts.counter_increase(col("prefix_cache_hits_total"))
    queries = ts.counter_increase(col("prefix_cache_queries_total"))
    out: dict[str, Any] = {
        "scrapes": len(idx),
        "window_s": (tw[-1] - tw[0]) if tw else None,
        "kv_cache_usage_max": ts.maximum(col("kv_cache_usage_perc")),
        "kv_cache_usage_mean": ts.time_weighted_mean(tw, col("kv_cache_usage_perc")),
        "running_max": ts.maximum(col("running")),
        "running_mean": ts.time_weighted_mean(tw, col("running")),
        "running_busy_mean": ts.busy_mean(tw, col("running")),
        "waiting_max": ts.maximum(col("waiting")),
        "waiting_mean": ts.time_weighted_mean(tw, col("waiting")),
        "preemptions": ts.counter_increase(col("preemptions_total")),
        "prefix_cache_hits": hits,
        "prefix_cache_queries": queries,
        "prefix_cache_hit_rate": ts.ratio(hits, queries),
        "lora_adapters_running_max": ts.maximum(col("lora_adapters_running")),
        "lora_adapters_running_mean": ts.time_weighted_mean(tw, col("lora_adapters_running")),
        "lora_adapters_waiting_max": ts.maximum(col("lora_adapters_waiting")),
        # (no scrape at all: the scraper's reason says why)
        "prefix_cache_hit_rate_reason": None if ts.ratio(hits, queries) is not None or not idx
        else ("the server exposes no prefix-cache counters (vllm:prefix_cache_queries_total)"
              if queries is None else "no prefix-cache queries in the window"),
        **{f"spec_decode_{key}": value for key, value in spec.items()},
        "spec_decode_accepted_per_position": _per_position(series, idx),
    }
    for key, (series_key, _) in FLAG_GATED.items():
        values = col(series_key)
        out[key] = ts.counter_increase(values)
        out[f"{key}_reason"] = None
        if out[key] is None and values:  # (no scrape at all: the scraper's reason says why)
            out[f"{key}_reason"] = (
                f"not read at the window's first or last scrape of {_metric_name(series_key)}"
                if any(v is not None for v in values)
                else f"the server does not expose {_metric_name(series_key)}"
            )
    return out


def _per_position(series: dict[str, list[Any]], idx: list[int]) -> list[float | None] | None:
    """Each draft position's accepted-token increase over the window, position 0 first (None
    for a position not read at the window's edges); None when the server exposes none."""
    keys = sorted((k for k in series if k.startswith(PER_POSITION)),
                  key=lambda k: int(k[len(PER_POSITION):]))
    if not keys:
        return None
    return [ts.counter_increase(ts.take(series[k], idx)) for k in keys]


def _metric_name(series_key: str) -> str:
    return COUNTERS[series_key][0]


def mark_not_counted(
    summary: dict[str, Any], launch_args: list[str] | None, output_tokens: int | None
) -> dict[str, Any]:
    """``summary`` (of :func:`summarize_metrics`) with each flag-gated counter that the server
    did not count set to null and its reason in ``<key>_reason`` (``core.measurement.counters`` has
    the rule). ``launch_args``: the server's command line when infer-prof started it, ``None`` for
    an endpoint it did not start; ``output_tokens``: tokens generated in the window.
    """
    out = dict(summary)
    for key, (series_key, flag) in FLAG_GATED.items():
        reason = not_counted_reason(
            out.get(key),
            _metric_name(series_key),
            flag,
            flag_enabled(launch_args, flag),
            output_tokens,
        )
        if reason is not None:
            out[key] = None
            out[f"{key}_reason"] = reason
    return out


def metrics_url(url: str) -> str:
    """The endpoint to poll: ``url`` as given, or ``url + "/metrics"`` when it has no path.

    ``metrics_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/metrics"``.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.path in ("", "/"):
        return urllib.parse.urlunsplit(parts._replace(path="/metrics"))
    return url


def _make_fetch(
    timeout_s: float, api_key: str | None = None, context: Any = None
) -> Callable[[str], str]:
    # No proxy: the metrics endpoint is the server the load goes to, reached directly.
    # ``context``: the endpoint's TLS context (ssl.SSLContext) for an https endpoint.
    handlers: list[Any] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    opener = urllib.request.build_opener(*handlers)
    # Ask for the classic text format: OpenMetrics output renames "vllm:x" to "vllm_x".
    headers = {"Accept": "text/plain; version=0.0.4"}
    if api_key:  # an endpoint behind a key may guard /metrics with it too
        headers["Authorization"] = f"Bearer {api_key}"

    def fetch(url: str) -> str:
        req = urllib.request.Request(url, headers=headers)
        with opener.open(req, timeout=timeout_s) as resp:
            data: bytes = resp.read()
            charset = resp.headers.get_content_charset() or "utf-8"
        return data.decode(charset, "replace")

    return fetch


class MetricsScraper:
    """Polls a Prometheus ``/metrics`` endpoint on a background thread; summarizes the window.

    Use: ``start()`` (first scrape, thread starts), ``mark_window_start()`` /
    ``mark_window_end()`` around the measured load (each scrapes at once, so the counters are
    read at the window's edges), ``stop()`` for the result. ``fetch(url) -> str`` replaces the
    HTTP GET (urllib, no proxy, ``timeout_s``); ``clock`` returns integer nanoseconds
    (``time.perf_counter_ns``); ``api_key`` is sent as a Bearer token. A scrape is stamped at
    the midpoint of its request.
    """

    def __init__(
        self,
        url: str,
        interval_s: float = 1.0,
        fetch: Callable[[str], str] | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
        *,
        timeout_s: float = 5.0,
        api_key: str | None = None,
        context: Any = None,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self.url = metrics_url(url)
        self.interval_s = float(interval_s)
        self._fetch = fetch if fetch is not None else _make_fetch(timeout_s, api_key, context)
        self._clock = clock
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False
        self._stopped = False
        self._t0_ns: int | None = None
        self._window_start_ns: int | None = None
        self._window_end_ns: int | None = None
        self._series: dict[str, list[Any]] = {k: [] for k in SERIES_KEYS}
        self._ok = 0
        self._errors = 0
        self._last_error: str | None = None
        self._server_kind: str | None = None

    def start(self) -> None:
        """Scrape once and start the polling thread. Never raises for a failed scrape."""
        if self._started:
            raise RuntimeError("MetricsScraper.start() called twice")
        self._started = True
        self._t0_ns = self._clock()
        self.scrape_now()
        self._thread = threading.Thread(target=self._run, name="infer-prof-metrics", daemon=True)
        self._thread.start()

    def mark_window_start(self) -> None:
        """Mark the start of the measured window now, and scrape at once."""
        self._window_start_ns = self._clock()
        self.scrape_now()

    def mark_window_end(self) -> None:
        """Scrape at once, then mark the end of the measured window."""
        self.scrape_now()
        self._window_end_ns = self._clock()

    def stop(self) -> dict[str, Any]:
        """Stop polling, scrape a last time, and return the result.

        ``{available, reason, url, interval_s, t0_ns, scrapes_ok, scrape_errors, last_error,
        window: {start_s, end_s, marked}, series: {t_s, kv_cache_usage_perc, running, waiting,
        preemptions_total, prefix_cache_hits_total, prefix_cache_queries_total,
        estimated_read_bytes_per_gpu_total, spec_decode_{drafts,draft_tokens,accepted_tokens}
        _total, and spec_decode_accepted_per_pos_total_<position> where the server has them},
        summary}``. ``available`` is True when at least one
        scrape succeeded; without one, every summary figure is ``None``.
        """
        if self._started and not self._stopped:
            self._stop_event.set()
            if self._thread is not None:
                self._thread.join()
            self.scrape_now()
        self._stopped = True
        return self._result()

    def scrape_now(self) -> None:
        """Scrape once now (thread-safe); a failure is counted, never raised."""
        if not self._started or self._stopped:
            return
        with self._lock:
            t_a = self._clock()
            try:
                samples = parse_prometheus_text(self._fetch(self.url))
            except Exception as exc:  # HTTP error, refused connection, timeout, bad text
                self._errors += 1
                self._last_error = f"{type(exc).__name__}: {exc}"
                return
            t_b = self._clock()
            kind, values = extract_server(samples)
            self._server_kind = self._server_kind or kind
            assert self._t0_ns is not None
            for pos, count in sum_by_label(samples, PER_POSITION_METRIC, "position").items():
                if pos.isdigit():
                    values[PER_POSITION + pos] = count
            done = len(self._series["t_s"])
            self._series["t_s"].append(((t_a + t_b) // 2 - self._t0_ns) / 1e9)
            for key, value in values.items():  # (a series first seen now: None before it)
                column = self._series.setdefault(key, [None] * done)
                column.append(None if value is None or math.isnan(value) else value)
            for column in self._series.values():  # (a series not in this scrape)
                if len(column) == done:
                    column.append(None)
            self._ok += 1

    def _run(self) -> None:
        next_t = time.perf_counter() + self.interval_s
        while not self._stop_event.wait(max(0.0, next_t - time.perf_counter())):
            self.scrape_now()
            next_t += self.interval_s
            now = time.perf_counter()
            if next_t < now:  # a slow scrape: skip ahead rather than burst
                next_t = now + self.interval_s

    def _result(self) -> dict[str, Any]:
        t0 = self._t0_ns
        ws = we = None
        if t0 is not None and self._window_start_ns is not None:
            ws = (self._window_start_ns - t0) / 1e9
        if t0 is not None and self._window_end_ns is not None:
            we = (self._window_end_ns - t0) / 1e9
        available = self._ok > 0
        if available:
            reason = None
        elif not self._started:
            reason = "not started"
        else:
            reason = f"no successful scrape of {self.url}: {self._last_error}"
        return {
            "available": available,
            "reason": reason,
            "url": self.url,
            "interval_s": self.interval_s,
            "t0_ns": t0,
            "scrapes_ok": self._ok,
            "scrape_errors": self._errors,
            "last_error": self._last_error,
            "window": {
                "start_s": ws,
                "end_s": we,
                "marked": self._window_start_ns is not None and self._window_end_ns is not None,
            },
            "series": {k: list(v) for k, v in self._series.items()},
            "server_kind": self._server_kind,
            "summary": self._summary(ws, we),
        }

    def _summary(self, ws: float | None, we: float | None) -> dict[str, Any]:
        summary = summarize_metrics(self._series, ws, we)
        for key, reason in NOT_EXPOSED.get(self._server_kind or "", {}).items():
            summary[key] = None
            summary[f"{key}_reason"] = reason
        return summary
