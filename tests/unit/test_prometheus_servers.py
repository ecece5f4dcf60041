"""SGLang's and TGI's Prometheus metrics in the same fields as vLLM's: fixture pages as each
server documents them (tests/fixtures/metrics/), scraped from a real local HTTP server."""

from __future__ import annotations

from pathlib import Path

import pytest

from infer_prof.core.measurement.prometheus_text import parse_prometheus_text
from infer_prof.telemetry.prometheus import (
    NOT_EXPOSED,
    MetricsScraper,
    extract_server,
    server_kind,
)

from .test_prometheus import SCRIPT, MetricsServer

METRICS = Path(__file__).parent.parent / "fixtures" / "metrics"


def test_sglang_page_maps_running_waiting_and_kv_use() -> None:
    kind, v = extract_server(parse_prometheus_text((METRICS / "sglang.prom").read_text()))
    assert kind == "sglang"
    assert v["running"] == 162.0 and v["waiting"] == 2826.0
    assert v["kv_cache_usage_perc"] == 0.28
    assert v["preemptions_total"] is None and v["prefix_cache_hits_total"] is None


def test_tgi_page_maps_batch_and_queue() -> None:
    kind, v = extract_server(parse_prometheus_text((METRICS / "tgi.prom").read_text()))
    assert kind == "tgi"
    assert v["running"] == 8.0 and v["waiting"] == 3.0
    assert v["kv_cache_usage_perc"] is None and v["preemptions_total"] is None


def test_vllm_page_is_still_vllm() -> None:
    samples = parse_prometheus_text(SCRIPT[3] or "")
    kind, v = extract_server(samples)
    assert kind == "vllm" and v["running"] == 16.0 and v["preemptions_total"] == 5.0
    assert server_kind(parse_prometheus_text("# nothing\nprocess_cpu_seconds_total 1\n")) is None


def _scrape(pages: list[str]) -> dict:
    with MetricsServer(list(pages)) as server:
        scraper = MetricsScraper(server.url, interval_s=3600.0)
        scraper.start()
        scraper.mark_window_start()
        scraper.mark_window_end()
        return scraper.stop()


def test_scraped_sglang_summary_and_the_reasons_for_what_it_lacks() -> None:
    text = (METRICS / "sglang.prom").read_text()
    busier = text.replace('Instruct"} 162.0', 'Instruct"} 200.0')
    assert busier != text
    result = _scrape([text, text, busier])
    assert result["server_kind"] == "sglang"
    assert result["series"]["running"][-1] == 200.0
    s = result["summary"]
    assert s["running_max"] == 200.0 and s["waiting_max"] == 2826.0
    assert s["kv_cache_usage_max"] == 0.28
    assert s["preemptions"] is None and "retracted" in s["preemptions_reason"]
    assert s["prefix_cache_hit_rate"] is None and s["prefix_cache_hit_rate_reason"]


def test_scraped_tgi_summary_nulls_kv_and_preemptions_with_reasons() -> None:
    text = (METRICS / "tgi.prom").read_text()
    result = _scrape([text])
    assert result["server_kind"] == "tgi"
    s = result["summary"]
    # (a time-weighted mean of equal values: equal up to rounding)
    assert s["running_mean"] == pytest.approx(8.0) and s["waiting_mean"] == pytest.approx(3.0)
    for key in ("kv_cache_usage_max", "kv_cache_usage_mean", "preemptions",
                "prefix_cache_hits"):
        assert s[key] is None and s[f"{key}_reason"] == NOT_EXPOSED["tgi"][key]
