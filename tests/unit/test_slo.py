"""SLO parsing, the run-level check and goodput, on hand-computed integer-nanosecond records."""

import pytest

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.workload.slo import (
    Slo,
    SloError,
    check_summary,
    evaluate_slos,
    format_slos,
    parse_slos,
    request_violations,
    slos_from_mapping,
)

MS = 1_000_000


def rec(i, ttft_ms, gaps_ms, send_ms=0, ok=True, warmup=False):
    """A completed request sent at send_ms, first token after ttft_ms, then the given gaps."""
    send = send_ms * MS
    chunks = [send + ttft_ms * MS]
    for g in gaps_ms:
        chunks.append(chunks[-1] + g * MS)
    return RequestRecord(
        index=i,
        input_len=8,
        max_tokens=len(chunks),
        warmup=warmup,
        send_ns=send,
        chunk_ns=chunks,
        chunk_tokens=[1] * len(chunks),
        done_ns=chunks[-1] if ok else None,
        output_tokens=len(chunks),
        error=None if ok else "timeout",
    )


def test_parse_in_order_with_percentile_mean_max():
    slos = parse_slos(" ttft_p99=2000, tpot_p50=200,e2e_mean=5000.5,itl_p99.9=50,ttft_max=9")
    assert [s.key for s in slos] == ["ttft_p99", "tpot_p50", "e2e_mean", "itl_p99.9", "ttft_max"]
    assert slos[0] == Slo("ttft", "p99", 2000.0)
    assert slos[3].quantile == 99.9 and slos[2].quantile is None
    assert format_slos(slos[:2]) == "ttft_p99=2000,tpot_p50=200"
    assert slos_from_mapping({"tpot_p90": 10}) == [Slo("tpot", "p90", 10.0)]


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "empty"),
        ("ttft_p99", "has no"),
        ("ttft_p100=5", "unknown SLO"),
        ("latency_p99=5", "unknown SLO"),
        ("ttft_p99=abc", "not a number"),
        ("ttft_p99=0", "> 0"),
        ("ttft_p99=-1", "> 0"),
        ("ttft_p99=inf", "finite"),
        ("ttft_p99=1,ttft_p99=2", "twice"),
    ],
)
def test_parse_errors_name_the_problem(text, words):
    with pytest.raises(SloError, match=words):
        parse_slos(text)


def test_run_level_uses_pooled_percentile_and_goodput_each_request():
    # TTFTs 10, 20, 30, 40 ms; linear-interpolation p50 = 25 ms, p99 = 39.7 ms
    records = [rec(i, t, [5, 5], send_ms=i * 10) for i, t in enumerate([10, 20, 30, 40])]
    rep = evaluate_slos(records, parse_slos("ttft_p50=25,ttft_p99=39"))
    c50, c99 = rep.checks
    assert c50.value_ms == pytest.approx(25.0) and c50.passed
    assert c99.value_ms == pytest.approx(39.7) and not c99.passed
    assert not rep.passed
    assert rep.failures == ["ttft_p99 39.700 ms > 39 ms"]
    # goodput: each request's TTFT must be <= both limits (25 and 39): 10 and 20 ms are good
    assert rep.good_requests == 2 and rep.completed_requests == 4
    # window: first send 0 ms to last end 30 + 40 + 10 = 80 ms
    assert rep.duration_s == pytest.approx(0.080)
    assert rep.goodput == pytest.approx(2 / 0.080)
    d = rep.section()  # the result's slo section
    assert d.passed is False and d.checks[0].value_ms == pytest.approx(25.0)


def test_goodput_excludes_failed_and_warmup_and_reads_tpot_itl_per_request():
    good = rec(0, 10, [5, 5, 5])  # tpot 5, itl max 5
    slow_tokens = rec(1, 10, [5, 5, 20])  # tpot 10, itl max 20
    failed = rec(2, 10, [5], ok=False)
    warm = rec(3, 1, [1], warmup=True)
    slos = parse_slos("tpot_p99=8,itl_max=10")
    rep = evaluate_slos([good, slow_tokens, failed, warm], slos)
    assert rep.completed_requests == 2 and rep.good_requests == 1
    assert request_violations(slow_tokens, slos) == [
        "tpot 10.000 ms > 8 ms",
        "itl 20.000 ms > 10 ms",
    ]
    assert request_violations(failed, slos) == ["not completed"]
    # run level: TPOT values 5 and 10 -> p99 = 9.95 > 8; pooled ITL max = 20 > 10
    assert [c.passed for c in rep.checks] == [False, False]


def test_one_token_answer_has_no_tpot_and_does_not_fail_goodput():
    one = rec(0, 10, [])
    rep = evaluate_slos([one], parse_slos("tpot_p99=1,ttft_p99=100"))
    assert rep.good_requests == 1
    # but the run-level tpot check has nothing measured: it fails with that reason
    assert not rep.checks[0].passed and "not measured" in rep.failures[0]


def test_no_records_means_no_window_and_no_goodput():
    rep = evaluate_slos([], parse_slos("ttft_p99=1"))
    assert rep.goodput is None and rep.duration_s is None and not rep.passed


def test_check_summary_reads_result_distributions():
    summary = {"ttft_ms": {"p99": 120.0, "mean": 50.0}, "tpot_ms": None}
    checks = check_summary(summary, parse_slos("ttft_p99=100,ttft_mean=60,tpot_p50=5"))
    assert [(c.value_ms, c.passed) for c in checks] == [(120.0, False), (50.0, True), (None, False)]
    with pytest.raises(SloError, match="p50, p90, p99"):
        check_summary(summary, parse_slos("ttft_p95=1"))
