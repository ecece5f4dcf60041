"""Metric definitions on small integer-nanosecond fixtures (DESIGN.md's definitions)."""

import pytest

from infer_prof.core.measurement.metrics import (
    RequestRecord,
    busy_concurrency,
    e2e_ns,
    itl_ns,
    measured_window_ns,
    queue_ns,
    send_bunching,
    stream_span_s,
    summarize_run,
    tpot_ns,
    ttft_ns,
)

MS = 1_000_000


def rec(
    index, send, chunks, tokens=None, out=None, prompt=10, warmup=False, error=None, scheduled=None
):
    tokens = tokens or [1] * len(chunks)
    return RequestRecord(
        index=index,
        input_len=prompt,
        max_tokens=sum(tokens),
        warmup=warmup,
        scheduled_ns=scheduled,
        send_ns=send,
        chunk_ns=list(chunks),
        chunk_tokens=tokens,
        done_ns=chunks[-1] if chunks and error is None else None,
        prompt_tokens=prompt,
        output_tokens=out if out is not None else sum(tokens),
        error=error,
    )


def test_single_request_metrics():
    # sent at 0; tokens at 50, 65, 80, 95 ms
    r = rec(0, 0, [50 * MS, 65 * MS, 80 * MS, 95 * MS])
    assert ttft_ns(r) == 50 * MS
    assert e2e_ns(r) == 95 * MS
    assert tpot_ns(r) == pytest.approx((95 - 50) * MS / 3)
    assert itl_ns(r) == [15 * MS, 15 * MS, 15 * MS]


def test_multi_token_chunk_splits_its_gap():
    # the third chunk carries 3 tokens after a 30 ms gap: three gaps of 10 ms
    r = rec(0, 0, [40 * MS, 50 * MS, 80 * MS], tokens=[1, 1, 3])
    assert itl_ns(r) == [10 * MS, 10 * MS, 10 * MS, 10 * MS]
    assert r.output_tokens == 5
    assert tpot_ns(r) == pytest.approx(40 * MS / 4)


def test_first_chunk_with_several_tokens_adds_no_gap():
    r = rec(0, 0, [40 * MS, 55 * MS], tokens=[2, 1])
    assert itl_ns(r) == [15 * MS]


def test_tpot_undefined_for_one_token():
    r = rec(0, 0, [40 * MS], tokens=[1])
    assert tpot_ns(r) is None
    assert itl_ns(r) == []


def test_unmeasured_is_none():
    r = RequestRecord(index=0, input_len=1, max_tokens=1)
    assert ttft_ns(r) is None and e2e_ns(r) is None and tpot_ns(r) is None
    assert queue_ns(r) is None


def test_queue_time_is_send_minus_scheduled():
    r = rec(0, 7 * MS, [60 * MS], scheduled=5 * MS)
    assert queue_ns(r) == 2 * MS


def test_summary_excludes_warmup_and_counts_failures():
    records = [
        rec(-1, 0, [500 * MS], warmup=True),  # warm-up: ignored everywhere
        rec(0, 1000 * MS, [1050 * MS, 1065 * MS], prompt=10),
        rec(1, 1000 * MS, [1060 * MS, 1075 * MS, 1090 * MS], prompt=20),
        rec(2, 1010 * MS, [], error="timeout"),
        rec(3, 1020 * MS, [1070 * MS], error="http_500"),
    ]
    s = summarize_run(records)
    assert s.requests_completed == 2
    assert s.requests_failed == 2
    assert s.failure_kinds == {"http_500": 1, "timeout": 1}
    # window: first measured send (1000 ms) to last end (1090 ms) = 0.09 s
    assert measured_window_ns(records) == (1000 * MS, 1090 * MS)
    assert s.duration_s == pytest.approx(0.09)
    assert s.request_throughput == pytest.approx(2 / 0.09)
    assert s.output_throughput == pytest.approx(5 / 0.09)
    assert s.total_throughput == pytest.approx((5 + 30) / 0.09)
    assert s.ttft_ms.p50 == pytest.approx(55.0)  # TTFTs 50 and 60 ms
    assert s.itl_ms.count == 3 and s.itl_ms.mean == pytest.approx(15.0)
    assert s.e2e_ms.max == pytest.approx(90.0)


def test_summary_of_nothing_is_null_not_zero():
    s = summarize_run([])
    assert s.requests_completed == 0
    assert s.request_throughput is None
    assert s.ttft_ms is None and s.itl_ms is None
    d = s.to_dict()
    assert d["ttft_ms"] is None and d["output_throughput"] is None


def test_record_round_trips_through_dict():
    r = rec(3, 0, [50 * MS, 65 * MS])
    back = RequestRecord.from_dict(r.to_dict())
    assert back == r


def test_busy_concurrency_is_in_flight_while_any_is():
    # one stream with gaps between requests: always 1 while busy
    one = [rec(0, 0, [50 * MS, 100 * MS]), rec(1, 300 * MS, [350 * MS, 400 * MS])]
    assert busy_concurrency(one) == 1.0
    # A: 0-100 ms, B: 50-150 ms, C (warm-up) ignored, D failed after sending (its end unknown)
    two = [
        rec(0, 0, [40 * MS, 100 * MS]),
        rec(1, 50 * MS, [90 * MS, 150 * MS]),
        rec(2, 0, [10 * MS, 200 * MS], warmup=True),
        rec(3, 60 * MS, [], error="http_500"),
    ]
    # busy 0-150 ms (150 ms); integral 50 x 1 + 50 x 2 + 50 x 1 = 200 -> 200 / 150
    assert busy_concurrency(two) == pytest.approx(4 / 3, rel=1e-12)
    assert busy_concurrency([]) is None


def test_send_bunching_tells_lock_step_waves_from_independent_sends():
    import math

    # 4 streams in lock-step: waves of 4 sends 0.2 ms apart, a wave every 100 ms
    waves = [rec(i, (i // 4) * 100 * MS + (i % 4) * MS // 5, [(i // 4) * 100 * MS + 90 * MS])
             for i in range(40)]
    b = send_bunching(waves)
    assert b is not None and b.within_ms == 1.0
    assert b.share == pytest.approx(30 / 39)  # 3 short gaps per wave of 4, 10 waves
    span = 9 * 100 * MS + 3 * MS // 5
    assert b.independent_share == pytest.approx(1 - math.exp(-39 / span * MS))
    assert b.share is not None and b.independent_share is not None
    assert b.share > 10 * b.independent_share
    # the same number of sends spread evenly: no gap under 1 ms
    even = [rec(i, i * 25 * MS, [i * 25 * MS + 20 * MS]) for i in range(40)]
    spread = send_bunching(even)
    assert spread is not None and spread.share == 0.0
    # warm-ups do not count; too few sends: None
    assert send_bunching([rec(0, 0, [MS]), rec(1, 0, [MS], warmup=True), rec(2, MS, [2 * MS])]) \
        is None


def test_closed_loop_rates_are_over_the_streams_mean_span():
    """Two streams out of phase, each running two 10 ms requests back to back, the second
    stream 5 ms behind: the wall window is 25 ms, but each stream was busy 20 ms, so the load
    of 2 streams x 1 request per 10 ms is 200 requests/s, not 4 / 25 ms = 160."""
    def req(i, worker, start_ms):
        r = rec(i, start_ms * MS, [(start_ms + 4) * MS, (start_ms + 10) * MS])
        r.worker = worker
        return r

    records = [req(0, 0, 0), req(1, 1, 5), req(2, 0, 10), req(3, 1, 15),
               rec(-1, 0, [3 * MS], warmup=True)]  # a warm-up is no part of any span
    assert stream_span_s(records) == pytest.approx(0.020)
    wall = summarize_run(records)
    assert wall.duration_s == pytest.approx(0.025) and wall.rate_basis == "window"
    assert wall.request_throughput == pytest.approx(160.0)
    steady = summarize_run(records, rate_window_s=stream_span_s(records))
    assert steady.duration_s == pytest.approx(0.025)  # the window itself is unchanged
    assert steady.rate_basis == "stream_spans" and steady.rate_window_s == pytest.approx(0.020)
    assert steady.request_throughput == pytest.approx(200.0)
    assert steady.output_throughput == pytest.approx(400.0)  # 2 tokens per request
    # in lock-step (both streams start and end together) the two agree
    lock = [req(0, 0, 0), req(1, 1, 0), req(2, 0, 10), req(3, 1, 10)]
    assert stream_span_s(lock) == pytest.approx(measured_window_ns(lock)[1] / 1e9)
    assert stream_span_s([rec(-1, 0, [MS], warmup=True)]) is None
