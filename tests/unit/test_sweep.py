"""Sweep lists, knee detection and find-max search with fake monotone pass functions."""

import math

import pytest

from infer_prof.core.analysis.sweep import (
    SweepError,
    find_knee,
    find_max_float,
    find_max_int,
    parse_concurrency_list,
    parse_rate_list,
)


def test_parse_lists_sorted_unique():
    assert parse_concurrency_list("32, 1,8,128,8") == [1, 8, 32, 128]
    assert parse_rate_list("4,1,2,inf,0.5") == [0.5, 1.0, 2.0, 4.0, math.inf]


@pytest.mark.parametrize("text", ["", "1,x", "0,4", "-2", "1.5"])
def test_parse_concurrency_errors(text):
    with pytest.raises(SweepError, match="--concurrency"):
        parse_concurrency_list(text)


@pytest.mark.parametrize("text", ["", "fast", "0", "-1,2", "nan", "-inf"])
def test_parse_rate_errors(text):
    with pytest.raises(SweepError, match="--rate"):
        parse_rate_list(text)


def test_knee_is_first_point_above_one_and_a_half_times_lowest_load():
    # baseline 10 ms at load 1; threshold 15; 14.9 does not pass, 15.1 does
    points = [(1, 10.0), (8, 12.0), (32, 14.9), (64, 15.1), (128, 40.0)]
    knee = find_knee(points)
    assert knee is not None and knee.index == 3 and knee.load == 64
    assert knee.baseline_ms == 10.0 and knee.threshold_ms == 15.0


def test_knee_reads_load_order_skips_missing_and_may_be_absent():
    points = [(128, 31.0), (1, None), (8, 20.0), (32, 29.0)]
    knee = find_knee(points)  # baseline at load 8 (load 1 unmeasured): 20 -> threshold 30
    assert knee is not None and knee.index == 0 and knee.baseline_ms == 20.0
    assert find_knee([(1, 10.0), (2, 15.0)]) is None  # exactly 1.5x does not pass
    assert find_knee([(1, 10.0)]) is None
    with pytest.raises(SweepError):
        find_knee(points, factor=1.0)


@pytest.mark.parametrize("boundary", [1, 2, 3, 7, 64, 65, 100, 777, 4095])
def test_find_max_int_finds_exact_boundary(boundary):
    calls = []

    def passes(c):
        calls.append(c)
        return c <= boundary

    res = find_max_int(passes, start=1, ceiling=4096)
    assert res.best == boundary and res.first_fail == boundary + 1
    assert len(calls) == len(set(calls))  # each load run once
    assert [x for x, _ in res.probes] == calls
    assert len(calls) <= 2 * math.ceil(math.log2(4096)) + 1


def test_find_max_int_edges_and_resolution():
    assert find_max_int(lambda c: False, start=4).best is None
    top = find_max_int(lambda c: True, start=1, ceiling=100)
    assert top.best == 100 and top.first_fail is None and "ceiling" in top.reason
    res = find_max_int(lambda c: c <= 300, start=1, ceiling=4096, resolution=16)
    assert res.best is not None and res.first_fail is not None
    assert res.best <= 300 < res.first_fail and res.first_fail - res.best <= 16
    capped = find_max_int(lambda c: c <= 300, max_probes=3)
    assert capped.best == 4 and len(capped.probes) == 3 and "3 probes" in capped.reason


def test_find_max_float_relative_resolution():
    res = find_max_float(lambda r: r <= 13.7, start=1.0, ceiling=1000.0, resolution=0.02)
    assert res.best is not None and res.first_fail is not None
    assert res.best <= 13.7 < res.first_fail
    assert res.first_fail / res.best - 1 <= 0.02
    assert find_max_float(lambda r: False, start=0.5).best is None
    assert find_max_float(lambda r: True, ceiling=64.0).best == 64.0
    with pytest.raises(SweepError):
        find_max_float(lambda r: True, start=0.0)
