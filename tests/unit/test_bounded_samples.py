"""BoundedSamples: exact (the same figures as a list) up to its cap, a histogram of stated
relative error past it, in bounded memory; ReadStats folds the readers' samples into it."""

import random

import pytest

from infer_prof.core.measurement.bounded_samples import BoundedSamples
from infer_prof.core.measurement.stats import summarize
from infer_prof.loadgen.client_health import SETTLE_EVERY, ReadStats


def _values(n: int, seed: int = 1) -> list[int]:
    rng = random.Random(seed)
    # read lags in ns: mostly tens of us, a long tail to tens of ms, some zeros
    return [0 if rng.random() < 0.01 else int(rng.lognormvariate(10.5, 1.2)) for _ in range(n)]


def test_exact_under_the_cap_is_summarize_of_the_list():
    xs = _values(5000)
    b = BoundedSamples(exact_cap=5000)
    for i in range(0, len(xs), 700):
        b.add_many(xs[i:i + 700])
    assert b.exact and b.count == 5000
    assert b.summary(1e-6) == summarize([x * 1e-6 for x in xs])
    assert b.method() == {"exact": True}


def test_past_the_cap_percentiles_within_the_stated_relative_error():
    xs = _values(200_000, seed=2)
    b = BoundedSamples(exact_cap=10_000, relative_error=0.001)
    for i in range(0, len(xs), 1024):
        b.add_many(xs[i:i + 1024])
    assert not b.exact
    assert b.method() == {"exact": False, "relative_error": 0.001, "exact_cap": 10_000}
    got, want = b.summary(), summarize([float(x) for x in xs])
    assert got is not None and want is not None
    assert (got.count, got.min, got.max) == (want.count, want.min, want.max)  # exact
    for q in ("p50", "p90", "p99"):
        assert abs(getattr(got, q) - getattr(want, q)) <= 0.001 * getattr(want, q), q
    assert got.mean == pytest.approx(want.mean, rel=1e-9)
    assert got.std == pytest.approx(want.std, rel=1e-6)
    # bounded: one bucket per 0.2 % of the value range, however many samples
    assert len(b._pos) < 10_000 and b._values is None


def test_negative_values_and_merge_of_workers():
    a, b = BoundedSamples(exact_cap=10), BoundedSamples(exact_cap=10)
    a.add_many([-5.0, 0.0, 3.0])
    b.add_many([7.0, -1.0])
    a.merge(b)
    assert a.exact and a.summary() == summarize([-5.0, 0.0, 3.0, 7.0, -1.0])
    c = BoundedSamples(exact_cap=10)
    c.add_many([float(v) for v in range(-20, 20)])  # past the cap
    a.merge(c)
    s = a.summary()
    assert not a.exact and s is not None and s.count == 45 and (s.min, s.max) == (-20.0, 19.0)
    want = summarize([-5.0, 0.0, 3.0, 7.0, -1.0, *[float(v) for v in range(-20, 20)]])
    assert want is not None and s.p50 == pytest.approx(want.p50, abs=0.01)
    assert s.p90 == pytest.approx(want.p90, rel=0.001)


def test_nothing_is_summarized_from_nothing():
    assert BoundedSamples().summary() is None
    assert ReadStats().summary_ms() is None


def test_read_stats_fold_the_pending_samples_in_place():
    st = ReadStats()
    pending = st.read_lag_ns  # the list the readers hold
    pending.extend(range(1, SETTLE_EVERY))
    st.settle()
    assert len(pending) == SETTLE_EVERY - 1  # not yet
    pending.append(SETTLE_EVERY)
    st.settle()
    assert pending == [] and st.read_lag_ns is pending and st.lag.count == SETTLE_EVERY
    pending.extend([5, 6])
    assert st.reads == SETTLE_EVERY + 2
    s = st.summary_ms()
    assert s is not None and s["count"] == SETTLE_EVERY + 2 and st.exact
    assert s == summarize([x * 1e-6 for x in [*range(1, SETTLE_EVERY + 1), 5, 6]]).to_dict()
