"""core/measurement/precision: batch-means and order-statistic intervals against hand-computed
values, and the tracker's floor, ceiling and stop rule on integer-ns fixtures."""

import math

import pytest

from infer_prof.core.measurement.precision import (
    PrecisionRule,
    PrecisionTracker,
    batch_means_interval,
    median_interval,
)

MS = 1_000_000
S = 1_000_000_000


def test_batch_means_interval_by_hand():
    values = [10.0, 12.0, 11.0, 9.0, 13.0]  # mean 11, s^2 = (1+1+0+4+4)/4 = 2.5
    iv = batch_means_interval(values)
    half = 2.776 * math.sqrt(2.5 / 5)
    assert iv.estimate == pytest.approx(11.0)
    assert iv.low == pytest.approx(11.0 - half)
    assert iv.high == pytest.approx(11.0 + half)
    assert iv.rel_half_width == pytest.approx(half / 11.0)
    with pytest.raises(ValueError):
        batch_means_interval([1.0, 2.0, 3.0])


def test_median_interval_ranks_by_hand():
    xs = [float(v) for v in range(1, 101)]  # n = 100: half = 1.96 x 10 / 2 = 9.8
    iv = median_interval(xs)
    assert iv.estimate == 50.5
    # l = floor(50 - 9.8) = 40, u = ceil(50 + 9.8) = 60 (1-based ranks)
    assert (iv.low, iv.high) == (40.0, 60.0)
    assert median_interval([1.0, 2.0, 3.0]).low is None  # too few for an interval
    assert median_interval([]).estimate is None


def _feed_steady(tr: PrecisionTracker, t: int, seconds: float, tok_per_s: int,
                 tpot_ms: float) -> int:
    """Tokens arriving at a perfectly steady rate from ``t``, one request of 10 tokens
    completing every 10 tokens; returns the last timestamp."""
    step = S // tok_per_s
    n = int(seconds * tok_per_s)
    for i in range(1, n + 1):
        t += step
        tr.add_tokens(t, 1)
        if i % 10 == 0:
            tr.add_request(tpot_ms)
    return t


def test_steady_load_stops_at_the_floor_not_before():
    tr = PrecisionTracker(PrecisionRule(min_requests=20, min_seconds=5.0))
    tr.start(0)
    t = _feed_steady(tr, 0, 4.0, 100, 10.0)
    assert not tr.check(t)  # 40 requests, but under 5 s
    t = _feed_steady(tr, t, 1.5, 100, 10.0)
    assert tr.check(t)
    assert tr.stopped_by == "precision"
    d = tr.to_dict()
    assert d["reached"] is True and d["requests"] == 55
    assert d["output_throughput"]["estimate"] == pytest.approx(100.0, rel=0.03)


def test_bursty_load_needs_more_than_the_floor():
    """Rates alternating 50 / 150 tokens/s per second: the batch means spread far past 2 %."""
    tr = PrecisionTracker(PrecisionRule(min_requests=1, min_seconds=1.0, max_seconds=30.0))
    tr.start(0)
    t = 0
    for sec in range(10):
        rate = 50 if sec % 2 else 150
        for _ in range(rate):
            t += S // rate
            tr.add_tokens(t, 1)
        tr.add_request(10.0)
    assert not tr.check(t)
    assert tr.throughput(t).rel_half_width > 0.02


def test_ceiling_and_tokens_before_t0():
    tr = PrecisionTracker(PrecisionRule(min_seconds=1.0, max_seconds=2.0))
    tr.add_tokens(5, 100)  # before the window: not counted
    tr.start(10 * S)
    tr.add_tokens(9 * S, 100)  # earlier than t0: not counted
    assert not tr.check(11 * S)
    assert tr.check(12 * S)
    assert tr.stopped_by == "max_seconds"
    assert tr.to_dict()["reached"] is False
    assert tr.throughput(12 * S).estimate == 0.0


def test_rule_rejects_a_floor_over_the_ceiling():
    with pytest.raises(ValueError):
        PrecisionRule(min_seconds=10, max_seconds=5)
    with pytest.raises(ValueError):
        PrecisionRule(batches=7)


def test_open_loop_rule_needs_only_tpot_precise():
    """Bursty throughput but a steady TPOT: done when the throughput is not required."""
    for required, done in ((True, False), (False, True)):
        tr = PrecisionTracker(PrecisionRule(min_requests=1, min_seconds=1.0,
                                            require_throughput=required))
        tr.start(0)
        t = 0
        for sec in range(10):
            rate = 50 if sec % 2 else 150
            for _ in range(rate):
                t += S // rate
                tr.add_tokens(t, 1)
            tr.add_request(10.0)
        assert tr.check(t) is done
