import math

import pytest

from infer_prof.core.measurement.stats import percentile, summarize


def test_percentile_linear_interpolation_matches_hand_computation():
    xs = [10, 20, 30, 40]
    # h = (4 - 1) * q / 100
    assert percentile(xs, 0) == 10
    assert percentile(xs, 100) == 40
    assert percentile(xs, 50) == pytest.approx(25.0)  # h = 1.5 -> 20 + 0.5 * 10
    assert percentile(xs, 90) == pytest.approx(37.0)  # h = 2.7 -> 30 + 0.7 * 10
    assert percentile(xs, 99) == pytest.approx(39.7)  # h = 2.97


def test_percentile_agrees_with_numpy_linear():
    np = pytest.importorskip("numpy")
    xs = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0]
    for q in (1, 25, 50, 75, 90, 99):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))


def test_empty_is_none_not_zero():
    assert percentile([], 50) is None
    assert summarize([]) is None


def test_percentile_rejects_out_of_range():
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summarize_fields():
    d = summarize([1.0, 2.0, 3.0, 4.0])
    assert d is not None
    assert (d.count, d.mean, d.min, d.max) == (4, 2.5, 1.0, 4.0)
    assert d.p50 == pytest.approx(2.5)
    assert d.std == pytest.approx(math.sqrt(1.25))
    assert d.scaled(1000).p50 == pytest.approx(2500)
