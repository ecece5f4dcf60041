"""The Prometheus text parser on a vLLM-shaped /metrics page, and MetricsScraper against a real
local HTTP server (http.server on 127.0.0.1, a real socket) serving changing metrics."""

# ruff: noqa: E501  (exposition lines are as long as vLLM writes them)

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from infer_prof.core.measurement.prometheus_text import (
    PrometheusParseError,
    max_samples,
    parse_prometheus_text,
    sum_samples,
)
from infer_prof.telemetry.prometheus import (
    MetricsScraper,
    extract_vllm,
    mark_not_counted,
    metrics_url,
)

# As vLLM 0.1x's prometheus_client renders it (abridged), with two engines (data parallel).
VLLM_METRICS = r"""# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 14521.0
python_gc_objects_collected_total{generation="1"} 2791.0
# HELP process_max_fds Maximum number of open file descriptors.
# TYPE process_max_fds gauge
process_max_fds 1.048576e+06
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="x",engine="0"} 7.0
vllm:num_requests_running{model_name="x",engine="1"} 5.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="x",engine="0"} 3.0
vllm:num_requests_waiting{model_name="x",engine="1"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="x",engine="0"} 0.4375
vllm:kv_cache_usage_perc{model_name="x",engine="1"} 0.25
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{model_name="x",engine="0"} 4096.0
vllm:prefix_cache_queries_total{model_name="x",engine="1"} 1024.0
# HELP vllm:prefix_cache_queries_created Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_created gauge
vllm:prefix_cache_queries_created{model_name="x",engine="0"} 1.7512345678901e+09
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{model_name="x",engine="0"} 1024.0
vllm:prefix_cache_hits_total{model_name="x",engine="1"} 0.0
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="x",engine="0"} 2.0
vllm:num_preemptions_total{model_name="x",engine="1"} 1.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",num_gpu_blocks="2048"} 1.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="x",engine="0"} 0.0
vllm:time_to_first_token_seconds_bucket{le="0.005",model_name="x",engine="0"} 2.0
vllm:time_to_first_token_seconds_bucket{le="0.01",model_name="x",engine="0"} 9.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="x",engine="0"} 12.0
vllm:time_to_first_token_seconds_count{model_name="x",engine="0"} 12.0
vllm:time_to_first_token_seconds_sum{model_name="x",engine="0"} 0.0841
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="1",running_lora_adapters="a \"quoted\" name, a\\b",waiting_lora_adapters="line\none"} 1.7512345e+09
# TYPE odd_values gauge
odd_values{kind="plus_inf"} +Inf
odd_values{kind="minus_inf"} -Inf
odd_values{kind="nan"} NaN
odd_values{kind="with_timestamp"} 42 1751234567890
odd_values { kind = "spaced" , } 7
"""


def test_parser_on_a_vllm_page() -> None:
    m = parse_prometheus_text(VLLM_METRICS)
    assert m["vllm:num_requests_running"] == [
        ({"model_name": "x", "engine": "0"}, 7.0),
        ({"model_name": "x", "engine": "1"}, 5.0),
    ]
    assert m["process_max_fds"] == [({}, 1048576.0)]
    assert m["python_gc_objects_collected_total"][1] == ({"generation": "1"}, 2791.0)
    # Histogram lines are plain samples under their own names; le="+Inf" is a label string.
    buckets = m["vllm:time_to_first_token_seconds_bucket"]
    assert [(lab["le"], v) for lab, v in buckets] == [
        ("0.001", 0.0),
        ("0.005", 2.0),
        ("0.01", 9.0),
        ("+Inf", 12.0),
    ]
    assert m["vllm:time_to_first_token_seconds_count"] == [
        ({"model_name": "x", "engine": "0"}, 12.0)
    ]
    assert m["vllm:time_to_first_token_seconds_sum"][0][1] == 0.0841
    assert "vllm:time_to_first_token_seconds" not in m  # HELP/TYPE lines make no sample
    # Escaped quote, backslash and newline in label values; commas inside a value.
    ((lora_labels, lora_value),) = m["vllm:lora_requests_info"]
    assert lora_labels == {
        "max_lora": "1",
        "running_lora_adapters": 'a "quoted" name, a\\b',
        "waiting_lora_adapters": "line\none",
    }
    assert lora_value == 1751234500.0
    odd = {lab["kind"]: v for lab, v in m["odd_values"]}
    assert odd["plus_inf"] == math.inf
    assert odd["minus_inf"] == -math.inf
    assert math.isnan(odd["nan"])
    assert odd["with_timestamp"] == 42.0  # the timestamp is dropped
    assert odd["spaced"] == 7.0
    assert m["vllm:cache_config_info"][0][0]["num_gpu_blocks"] == "2048"


def test_sum_and_max_over_label_sets() -> None:
    m = parse_prometheus_text(VLLM_METRICS)
    assert sum_samples(m, "vllm:num_requests_running") == 12.0
    assert max_samples(m, "vllm:kv_cache_usage_perc") == 0.4375
    assert sum_samples(m, "vllm:not_there") is None
    assert sum_samples({"g": [({}, math.nan)]}, "g") is None  # NaN is not a measurement


def test_extract_vllm_figures() -> None:
    v = extract_vllm(parse_prometheus_text(VLLM_METRICS))
    assert v == {
        "kv_cache_usage_perc": 0.4375,  # the fuller engine
        "running": 12.0,
        "waiting": 3.0,
        "preemptions_total": 3.0,
        "prefix_cache_hits_total": 1024.0,
        "prefix_cache_queries_total": 5120.0,
        "estimated_read_bytes_per_gpu_total": None,  # absent from this page: None, not 0
        "lora_adapters_running": 2.0,  # the names in lora_requests_info's labels
        "lora_adapters_waiting": 1.0,
        "spec_decode_drafts_total": None,  # no speculative decoding: None, not 0
        "spec_decode_draft_tokens_total": None,
        "spec_decode_accepted_tokens_total": None,
    }


def test_extract_vllm_older_names() -> None:
    old = (
        'vllm:gpu_cache_usage_perc{model_name="x"} 0.5\n'
        'vllm:gpu_prefix_cache_hits_total{model_name="x"} 10\n'
        'vllm:gpu_prefix_cache_queries_total{model_name="x"} 40\n'
    )
    v = extract_vllm(parse_prometheus_text(old))
    assert v["kv_cache_usage_perc"] == 0.5
    assert v["prefix_cache_hits_total"] == 10.0
    assert v["prefix_cache_queries_total"] == 40.0
    assert v["running"] is None


@pytest.mark.parametrize(
    "line",
    [
        'metric{a="b" 1',  # unterminated label set
        "metric{a=b} 1",  # unquoted label value
        'metric{a="b"} one',  # bad value
        "metric",  # no value
        "9metric 1",  # bad name
        'metric{a="b} 1',  # unterminated label value
    ],
)
def test_parser_rejects_malformed_lines(line: str) -> None:
    with pytest.raises(PrometheusParseError, match="^line 2: "):
        parse_prometheus_text("# TYPE metric gauge\n" + line + "\n")


def test_metrics_url() -> None:
    assert metrics_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/metrics"
    assert metrics_url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000/metrics"
    assert metrics_url("http://h:1/custom/metrics") == "http://h:1/custom/metrics"


# ---------------------------------------------------------------------------- scraper


def page(
    kv: tuple[float, float],
    running: tuple[int, int],
    waiting: tuple[int, int],
    preemptions: int,
    hits: int,
    queries: int,
    read_bytes: float,
) -> str:
    """A vLLM /metrics page for two engines; counters live on engine 0 (engine 1 reads 0)."""
    lines = ["# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage."]
    lines.append("# TYPE vllm:kv_cache_usage_perc gauge")
    for e in (0, 1):
        lab = f'{{model_name="x",engine="{e}"}}'
        lines.append(f"vllm:kv_cache_usage_perc{lab} {kv[e]}")
        lines.append(f"vllm:num_requests_running{lab} {float(running[e])}")
        lines.append(f"vllm:num_requests_waiting{lab} {float(waiting[e])}")
        lines.append(f"vllm:num_preemptions_total{lab} {float(preemptions if e == 0 else 0)}")
        lines.append(f"vllm:prefix_cache_hits_total{lab} {float(hits if e == 0 else 0)}")
        lines.append(f"vllm:prefix_cache_queries_total{lab} {float(queries if e == 0 else 0)}")
        lines.append(
            f"vllm:estimated_read_bytes_per_gpu_total{lab} {read_bytes if e == 0 else 0.0}"
        )
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{le="+Inf",engine="{e}"}} 3.0')
    return "\n".join(lines) + "\n"


class MetricsServer:
    """Serves ``pages`` in order, one per GET /metrics (``None``: answer 500); then the last."""

    def __init__(self, pages: list[str | None]) -> None:
        self.pages = pages
        self.requests = 0
        self.paths: list[str] = []
        self.accepts: list[str | None] = []
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                with lock:
                    i = min(outer.requests, len(outer.pages) - 1)
                    outer.requests += 1
                    outer.paths.append(self.path)
                    outer.accepts.append(self.headers.get("Accept"))
                body = outer.pages[i]
                if body is None:
                    self.send_error(500, "engine busy")
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True)

    def __enter__(self) -> MetricsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


SCRIPT: list[str | None] = [
    # t = 0 s, warm-up (before the window)
    page((0.0, 0.0), (0, 0), (0, 0), preemptions=0, hits=0, queries=0, read_bytes=0.0),
    # t = 1 s, window start
    page((0.10, 0.05), (3, 1), (0, 0), preemptions=2, hits=100, queries=1000, read_bytes=1e9),
    None,  # t = 2 s: the server answers 500
    # t = 3 s
    page((0.90, 0.30), (10, 6), (5, 3), preemptions=5, hits=600, queries=3000, read_bytes=5e9),
    # t = 5 s, window end; the preemption counter restarted (engine restart) and reads 1
    page((0.50, 0.20), (4, 4), (2, 0), preemptions=1, hits=700, queries=3500, read_bytes=6e9),
    # t = 6 s, after the window
    page((0.0, 0.0), (0, 0), (0, 0), preemptions=9, hits=2000, queries=9000, read_bytes=9e9),
]


@pytest.fixture
def scripted() -> Iterator[tuple[dict, MetricsServer]]:
    with MetricsServer(SCRIPT) as server:
        clock = Clock(10_000_000_000)
        scraper = MetricsScraper(server.url, interval_s=3600.0, clock=clock)
        scraper.start()  # t = 0
        clock.now = 11_000_000_000
        scraper.mark_window_start()  # t = 1
        clock.now = 12_000_000_000
        scraper.scrape_now()  # t = 2, fails
        clock.now = 13_000_000_000
        scraper.scrape_now()  # t = 3
        clock.now = 15_000_000_000
        scraper.mark_window_end()  # t = 5
        clock.now = 16_000_000_000
        yield scraper.stop(), server  # t = 6


def test_scraper_series(scripted: tuple[dict, MetricsServer]) -> None:
    result, server = scripted
    assert server.paths == ["/metrics"] * 6
    assert server.accepts == ["text/plain; version=0.0.4"] * 6
    assert result["available"] is True
    assert result["reason"] is None
    assert result["url"] == server.url + "/metrics"
    assert result["scrapes_ok"] == 5
    assert result["scrape_errors"] == 1
    assert "500" in result["last_error"]
    assert result["window"] == {"start_s": 1.0, "end_s": 5.0, "marked": True}
    s = result["series"]
    assert s["t_s"] == [0.0, 1.0, 3.0, 5.0, 6.0]
    assert s["kv_cache_usage_perc"] == [0.0, 0.10, 0.90, 0.50, 0.0]
    assert s["running"] == [0.0, 4.0, 16.0, 8.0, 0.0]
    assert s["waiting"] == [0.0, 0.0, 8.0, 2.0, 0.0]
    assert s["preemptions_total"] == [0.0, 2.0, 5.0, 1.0, 9.0]
    assert s["prefix_cache_hits_total"] == [0.0, 100.0, 600.0, 700.0, 2000.0]
    assert s["prefix_cache_queries_total"] == [0.0, 1000.0, 3000.0, 3500.0, 9000.0]
    assert s["estimated_read_bytes_per_gpu_total"] == [0.0, 1e9, 5e9, 6e9, 9e9]


def test_scraper_window_summary(scripted: tuple[dict, MetricsServer]) -> None:
    result, _ = scripted
    summary = result["summary"]
    # Window scrapes at t = 1, 3, 5 s.
    assert summary["scrapes"] == 3
    assert summary["window_s"] == 4.0
    assert summary["kv_cache_usage_max"] == 0.90
    # (2 * (0.1 + 0.9) / 2 + 2 * (0.9 + 0.5) / 2) / 4 = 0.6
    assert summary["kv_cache_usage_mean"] == pytest.approx(0.6, rel=1e-12)
    assert summary["running_max"] == 16.0
    assert summary["running_mean"] == 11.0  # (2 * 10 + 2 * 12) / 4
    # never idle in the window: the busy mean weighs 4, 16, 8 by 1, 2, 1 s: 44 / 4
    assert summary["running_busy_mean"] == 11.0
    assert summary["waiting_max"] == 8.0
    assert summary["waiting_mean"] == 4.5  # (2 * 4 + 2 * 5) / 4
    # 2 -> 5 is +3; 5 -> 1 is a reset, +1: 4 preemptions in the window (9 after it excluded).
    assert summary["preemptions"] == 4.0
    assert summary["prefix_cache_hits"] == 600.0
    assert summary["prefix_cache_queries"] == 2500.0
    assert summary["prefix_cache_hit_rate"] == 0.24
    assert summary["estimated_read_bytes_per_gpu"] == 5e9
    assert summary["estimated_read_bytes_per_gpu_reason"] is None
    # it counted: nothing to null, whoever started the server
    for args in (None, ["--model", "m"]):
        assert mark_not_counted(summary, args, 1000)["estimated_read_bytes_per_gpu"] == 5e9


def test_scraper_without_queries_has_no_hit_rate() -> None:
    flat = page((0.1, 0.1), (1, 1), (0, 0), preemptions=0, hits=0, queries=0, read_bytes=0.0)
    with MetricsServer([flat]) as server:
        scraper = MetricsScraper(server.url + "/metrics", interval_s=3600.0)
        scraper.start()
        scraper.mark_window_start()
        scraper.mark_window_end()
        summary = scraper.stop()["summary"]
    assert summary["prefix_cache_queries"] == 0.0
    assert summary["prefix_cache_hit_rate"] is None
    assert summary["preemptions"] == 0.0


def test_scraper_with_no_server_is_unavailable_and_null() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    scraper = MetricsScraper(f"http://127.0.0.1:{port}", interval_s=3600.0, timeout_s=2.0)
    scraper.start()
    scraper.mark_window_start()
    scraper.mark_window_end()
    result = scraper.stop()
    assert result["available"] is False
    assert result["scrapes_ok"] == 0
    assert result["scrape_errors"] == 4
    assert result["reason"].startswith(f"no successful scrape of http://127.0.0.1:{port}/metrics: ")
    assert "URLError" in result["reason"]
    assert result["series"]["t_s"] == []
    summary = result["summary"]
    assert summary["scrapes"] == 0
    assert all(v is None for k, v in summary.items() if k != "scrapes")


def test_scraper_survives_garbage() -> None:
    good = page((0.2, 0.0), (1, 0), (0, 0), 0, 0, 0, 0.0)
    with MetricsServer(["<html>not metrics</html>\n", good]) as server:
        scraper = MetricsScraper(server.url, interval_s=3600.0)
        scraper.start()
        scraper.scrape_now()
        result = scraper.stop()
    assert result["scrape_errors"] == 1
    assert result["last_error"].startswith("PrometheusParseError: line 1: ")
    assert result["series"]["kv_cache_usage_perc"] == [0.2, 0.2]


def test_scraper_thread_polls_on_its_own() -> None:
    """The background thread scrapes between start and stop (no timing asserted)."""
    pages: list[str | None] = [page((i / 10, 0.0), (i, 0), (0, 0), i, 0, 0, 0.0) for i in range(10)]
    with MetricsServer(pages) as server:
        scraper = MetricsScraper(server.url, interval_s=0.005)
        scraper.start()
        deadline = time.monotonic() + 10.0
        while server.requests < 5 and time.monotonic() < deadline:
            time.sleep(0.005)
        result = scraper.stop()
    series = result["series"]
    assert len(series["t_s"]) >= 6
    assert series["t_s"] == sorted(series["t_s"])
    assert series["running"] == [float(min(i, 9)) for i in range(len(series["t_s"]))]


def _scrape_three(pages: list[str | None]) -> dict:
    """Scrape ``pages`` from a real HTTP server: start, window start, window end."""
    with MetricsServer(pages) as server:
        scraper = MetricsScraper(server.url, interval_s=3600.0)
        scraper.start()
        scraper.mark_window_start()
        scraper.mark_window_end()
        summary: dict = scraper.stop()["summary"]
    return summary


def busy(read_bytes: float) -> str:
    return page((0.5, 0.5), (8, 8), (0, 0), preemptions=0, hits=0, queries=10, read_bytes=read_bytes)


def test_counter_that_stays_zero_while_working_is_null_with_its_reason() -> None:
    """What vLLM 0.26 serves without --enable-mfu-metrics: the counter is there and reads 0.0
    throughout, while 16 requests run."""
    summary = _scrape_three([busy(0.0)] * 4)
    assert summary["estimated_read_bytes_per_gpu"] == 0.0  # the raw increase
    assert summary["running_max"] == 16.0
    # --endpoint run (launch flags unknown), 4,096 tokens generated in the window
    endpoint = mark_not_counted(summary, None, 4096)
    assert endpoint["estimated_read_bytes_per_gpu"] is None
    assert "rose by 0 while 4,096 output tokens" in endpoint["estimated_read_bytes_per_gpu_reason"]
    # infer-prof started vLLM without the flag
    launched = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]
    started = mark_not_counted(summary, launched, 4096)
    assert started["estimated_read_bytes_per_gpu"] is None
    assert "--engine-arg=--enable-mfu-metrics" in started["estimated_read_bytes_per_gpu_reason"]
    # the rest of the summary is untouched, and the scraper's own dict is not modified
    assert started["running_max"] == 16.0
    assert summary["estimated_read_bytes_per_gpu"] == 0.0


def test_counter_that_counts_with_the_flag_stands() -> None:
    summary = _scrape_three([busy(0.0), busy(2e9), busy(7e9), busy(7e9)])
    launched = ["python", "-m", "vllm.entrypoints.openai.api_server", "--enable-mfu-metrics"]
    marked = mark_not_counted(summary, launched, 4096)
    assert marked["estimated_read_bytes_per_gpu"] == 5e9
    assert marked["estimated_read_bytes_per_gpu_reason"] is None


def test_counter_not_exposed_says_so() -> None:
    no_counter = "\n".join(
        ln for ln in busy(0.0).splitlines() if "estimated_read_bytes" not in ln
    )
    summary = _scrape_three([no_counter + "\n"] * 4)
    assert summary["estimated_read_bytes_per_gpu"] is None
    assert summary["estimated_read_bytes_per_gpu_reason"] == (
        "the server does not expose vllm:estimated_read_bytes_per_gpu_total"
    )
    assert mark_not_counted(summary, None, 4096)["estimated_read_bytes_per_gpu_reason"] == (
        "the server does not expose vllm:estimated_read_bytes_per_gpu_total"
    )
