"""Run validity: too small, too short, client overloaded."""

import pytest

from infer_prof.core.measurement.validity import (
    ValidityRules,
    check_result,
    check_validity,
    client_figures,
)


def test_valid_run_has_no_reasons():
    v = check_validity(100, 30.0, read_lag_p99_ms=1.0, itl_p50_ms=15.0, dispatch_lag_p99_ms=0.2)
    assert v.valid and v.reasons == [] and not v.client_overloaded
    assert v.section().rules is not None and v.section().rules.min_requests == 10


def test_too_few_and_too_short_each_named():
    v = check_validity(9, 4.99)
    assert not v.valid
    assert [r.split(":")[0] for r in v.reasons] == ["too_few_requests", "too_short"]
    assert "9 completed" in v.reasons[0] and "4.99 s < minimum 5 s" in v.reasons[1]
    # exactly at the limits is valid
    assert check_validity(10, 5.0).valid
    assert "no measured window" in check_validity(50, None).reasons[0]


def test_configurable_rules():
    rules = ValidityRules(min_requests=100, min_duration_s=60)
    assert not check_validity(99, 120, rules).valid
    assert check_validity(0, 0, ValidityRules(min_requests=0, min_duration_s=0)).valid
    with pytest.raises(ValueError):
        ValidityRules(max_read_lag_fraction=0)


def test_client_overloaded_by_read_lag_against_itl():
    # ITL p50 15 ms -> read-lag limit 7.5 ms
    assert not check_validity(100, 30, read_lag_p99_ms=7.5, itl_p50_ms=15.0).client_overloaded
    v = check_validity(100, 30, read_lag_p99_ms=7.6, itl_p50_ms=15.0)
    assert v.client_overloaded and not v.valid and v.client_reasons[0].startswith("read_lag")


def test_client_overloaded_by_dispatch_lag():
    v = check_validity(100, 30, dispatch_lag_p99_ms=12.0)
    assert v.client_overloaded and "12.000 ms > 5 ms" in v.client_reasons[0]


def test_check_result_reads_result_mapping():
    result = {
        "summary": {"requests_completed": 50, "duration_s": 12.0, "itl_ms": {"p50": 2.0}},
        "client": {"read_lag_ms": {"p99": 1.5}, "dispatch_delay_ms": {"p99": 99.0}},
    }
    v = check_result(result)
    assert v.client_overloaded and v.client_reasons[0].startswith("read_lag")
    assert check_result({"summary": {}, "client": {}}).reasons[0].startswith("too_few")


def test_client_overloaded_by_cpu_share():
    assert not check_validity(100, 30, cpu_share_max=0.9).client_overloaded
    v = check_validity(100, 30, cpu_share_max=0.97)
    assert v.client_overloaded and v.client_reasons[0].startswith("client_cpu")
    assert "97%" in v.client_reasons[0] and "--client-processes" in v.client_reasons[0]
    assert v.section().rules is not None and v.section().rules.max_cpu_share == 0.9
    with pytest.raises(ValueError):
        ValidityRules(max_cpu_share=0)


def test_client_figures_single_process():
    f = client_figures(
        {"read_lag_ms": {"p99": 0.4}, "dispatch_lag_ms": None, "cpu_share": 0.3, "wall_s": 20.0}
    )
    assert f == {"read_lag_p99_ms": 0.4, "dispatch_lag_p99_ms": None, "cpu_share_max": 0.3}
    # a window under 1 s is not judged on CPU; an old result without the figures is not either
    assert client_figures({"cpu_share": 0.99, "wall_s": 0.5})["cpu_share_max"] is None
    assert client_figures({}) == {
        "read_lag_p99_ms": None, "dispatch_lag_p99_ms": None, "cpu_share_max": None}


def test_one_overloaded_worker_is_not_averaged_away():
    client = {
        "processes": 2,
        "read_lag_ms": {"p99": 0.5},  # pooled over both workers
        "dispatch_lag_ms": {"p99": 0.2},
        "cpu_s": 20.0,
        "workers": [
            {"worker": 0, "read_lag_ms": {"p99": 0.2}, "cpu_share": 0.2, "wall_s": 10.0},
            {"worker": 1, "read_lag_ms": {"p99": 9.0}, "cpu_share": 0.98, "wall_s": 10.0},
        ],
    }
    f = client_figures(client)
    assert f == {"read_lag_p99_ms": 9.0, "dispatch_lag_p99_ms": 0.2, "cpu_share_max": 0.98}
    result = {
        "summary": {"requests_completed": 500, "duration_s": 10.0, "itl_ms": {"p50": 15.0}},
        "client": client,
    }
    v = check_result(result)
    assert [r.split(":")[0] for r in v.client_reasons] == ["read_lag", "client_cpu"]
