from infer_prof.core.measurement.accuracy import (
    DEFAULT_TARGETS,
    AccuracyReport,
    PercentileErrors,
    ThroughputError,
    misses,
    trusted_up_to,
)


def _errors(p50, p99):
    return PercentileErrors(p50_client_ms=None, p50_truth_ms=None, p50_error_ms=p50,
                            p90_client_ms=None, p90_truth_ms=None, p90_error_ms=None,
                            p99_client_ms=None, p99_truth_ms=None, p99_error_ms=p99)


def report(ttft=(0.1, 0.2), itl=(0.01, 0.5), rps=0.1):
    return AccuracyReport(matched_requests=1, client_records=1, failed=0,
                          ttft=_errors(*ttft), itl=_errors(*itl),
                          request_throughput=ThroughputError(client=None, truth=None,
                                                             error_pct=rps))


def test_within_every_target_misses_nothing():
    assert misses(report()) == []


def test_each_target_is_checked_on_the_absolute_error():
    assert misses(report(ttft=(-2.5, 0.0))) == ["TTFT p50"]
    assert misses(report(ttft=(0.0, 5.01))) == ["TTFT p99"]
    assert misses(report(itl=(0.6, 0.0))) == ["ITL p50"]
    assert misses(report(itl=(0.0, -2.1))) == ["ITL p99"]
    assert misses(report(rps=-3.0)) == ["req/s"]
    # exactly on the limit is within it
    assert misses(report(ttft=(2.0, 5.0), itl=(0.5, 2.0), rps=2.0)) == []


def test_an_error_that_could_not_be_computed_is_a_miss():
    assert misses(report(itl=(None, None))) == ["ITL p50", "ITL p99"]


def test_own_targets_replace_the_defaults():
    assert misses(report(ttft=(3.0, 3.0)), {"ttft_p50_ms": 4.0}) == []
    assert set(DEFAULT_TARGETS) == {
        "ttft_p50_ms",
        "ttft_p99_ms",
        "itl_p50_ms",
        "itl_p99_ms",
        "request_throughput_pct",
    }


def test_trusted_up_to_stops_at_the_first_level_that_misses():
    levels = [(128, []), (1, []), (1024, ["ITL p99"]), (512, [])]
    assert trusted_up_to(levels) == 512
    assert trusted_up_to([(1, ["req/s"])]) is None
    assert trusted_up_to([]) is None


def test_steal_share_between_two_readings():
    from infer_prof.run.calibrate import cpu_ticks, steal_pct

    assert steal_pct((10, 1000), (60, 2000)) == 5.0  # 50 of 1000 ticks stolen
    assert steal_pct((10, 1000), (10, 1000)) is None  # no time passed
    assert steal_pct(None, (10, 1000)) is None
    now = cpu_ticks()  # Linux: real counters from /proc/stat
    assert now is not None and 0 <= now[0] <= now[1]


def test_calibration_mode_picks_the_server_cost_targets():
    from infer_prof.core.measurement.accuracy import TARGETS_BY_MODE, calibration_mode

    assert calibration_mode(0.0) == "lean"
    assert calibration_mode(15.0) == "server_cost"
    t = TARGETS_BY_MODE["server_cost"]
    assert (t["ttft_p50_ms"], t["ttft_p99_ms"], t["itl_p50_ms"], t["itl_p99_ms"]) == (2, 5, 0.5, 2)
    assert t["request_throughput_pct"] == 2
