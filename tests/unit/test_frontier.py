"""The frontier's arithmetic: Steffen's interpolation held to hand-computed values and to its
promises (monotone, no overshoot, exact at knots, no extrapolation) on random data, the Pareto
front held to its brute-force definition on random point sets with ties."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from infer_prof.core.analysis.frontier import (
    AtTarget,
    FrontierPoint,
    at_slo,
    at_target,
    interactivity,
    make_point,
    mark_pareto,
    pareto_indices,
    per_gpu,
    plateaued,
    steffen,
    usd_per_million,
)

# --- the axes ----------------------------------------------------------------------------------


def test_interactivity_is_1000_over_tpot_ms() -> None:
    assert interactivity(20.0) == 50.0
    assert interactivity(6.15) == pytest.approx(162.6016, rel=1e-6)
    assert interactivity(None) is None
    assert interactivity(0.0) is None
    assert interactivity(float("nan")) is None


def test_per_gpu_and_cost() -> None:
    assert per_gpu(4258.0, 2) == 2129.0
    with pytest.raises(ValueError, match="gpus must be at least 1"):
        per_gpu(1.0, 0)
    # $2/GPU-h at 1000 tok/s/GPU: 3.6M tokens an hour -> 2 / 3.6 = $0.5556 per 1M
    assert usd_per_million(2.0, 1000.0) == pytest.approx(2.0 / 3.6)
    assert usd_per_million(None, 1000.0) is None
    assert usd_per_million(2.0, 0.0) is None


def test_make_point_divides_by_gpus_and_prices_each_kind() -> None:
    p = make_point(8, tpot_p50_ms=25.0, tpot_p90_ms=40.0, output_tok_s=2000.0,
                   input_tok_s=6000.0, gpus=2, usd_per_gpu_hour=3.6)
    assert (p.interactivity, p.interactivity_p90) == (40.0, 25.0)
    assert (p.output_tok_s_per_gpu, p.input_tok_s_per_gpu, p.total_tok_s_per_gpu) == (
        1000.0, 3000.0, 4000.0)
    # $3.6/GPU-h over 3.6M output tokens/GPU-h = $1.00 per 1M output tokens
    assert p.usd_per_million_output_tokens == pytest.approx(1.0)
    assert p.usd_per_million_input_tokens == pytest.approx(1.0 / 3)
    assert p.usd_per_million_total_tokens == pytest.approx(0.25)
    assert make_point(1, None, None, 1.0, 1.0, 1, None).usd_per_million_total_tokens is None


def test_plateaued_under_five_percent_gain() -> None:
    assert plateaued(1000.0, 1049.0)
    assert not plateaued(1000.0, 1050.0)
    assert plateaued(1000.0, 900.0)
    assert not plateaued(1000.0, 1100.0, min_gain=0.09)


# --- Steffen: hand-computed values ---------------------------------------------------------------


def test_steffen_hand_computed_parabola() -> None:
    # knots (0,0) (1,1) (2,4): h = 1, 1; s0 = 1, s1 = 3.
    # interior: p1 = (s0 h1 + s1 h0) / (h0 + h1) = (1 + 3) / 2 = 2,
    #           y'1 = (1 + 1) * min(1, 3, 2/2) = 2.
    # left end: p0 = s0 (1 + h0/(h0+h1)) - s1 h0/(h0+h1) = 1.5 - 1.5 = 0 -> p0 s0 <= 0 -> y'0 = 0.
    # right end: p2 = s1 (1 + 1/2) - s0 / 2 = 4.5 - 0.5 = 4; |4| <= 2 * 3 -> y'2 = 4.
    # [0,1]: a = (0 + 2 - 2) / 1 = 0, b = (3 - 0 - 2) / 1 = 1 -> y(0.5) = 0.25
    # [1,2]: a = (2 + 4 - 6) = 0, b = (9 - 4 - 4) = 1 -> y(1.5) = 1 + 2 * 0.5 + 0.25 = 2.25
    xs, ys = [0.0, 1.0, 2.0], [0.0, 1.0, 4.0]
    assert steffen(xs, ys, 0.5) == pytest.approx(0.25)
    assert steffen(xs, ys, 1.5) == pytest.approx(2.25)
    assert steffen(xs, ys, 1.25) == pytest.approx(1.5625)


def test_steffen_hand_computed_uneven_spacing_limits_slopes() -> None:
    # knots (1,10) (2,20) (4,25): h0 = 1, h1 = 2; s0 = 10, s1 = 2.5.
    # interior: p1 = (10 * 2 + 2.5 * 1) / 3 = 7.5; y'1 = 2 * min(10, 2.5, 3.75) = 5.
    # left end: p0 = 10 (1 + 1/3) - 2.5 / 3 = 12.5; |12.5| <= 20 -> y'0 = 12.5.
    # right end: p2 = 2.5 (1 + 2/3) - 10 * 2/3 = -2.5; p2 s1 < 0 -> y'2 = 0.
    # [1,2], t = 0.5: a = (12.5 + 5 - 20) / 1 = -2.5, b = (30 - 25 - 5) / 1 = 0
    #   y = 10 + 12.5 * 0.5 + 0 - 2.5 * 0.125 = 15.9375
    # [2,4], t = 1: a = (5 + 0 - 5) / 4 = 0, b = (7.5 - 10 - 0) / 2 = -1.25
    #   y = 20 + 5 - 1.25 = 23.75
    xs, ys = [1.0, 2.0, 4.0], [10.0, 20.0, 25.0]
    assert steffen(xs, ys, 1.5) == pytest.approx(15.9375)
    assert steffen(xs, ys, 3.0) == pytest.approx(23.75)


def test_steffen_step_is_flat_outside_and_s_shaped_inside() -> None:
    # knots (0,0) (1,0) (2,1) (3,1): s = 0, 1, 0 -> every knot slope 0 (extrema / flat ends),
    # [1,2]: a = -2, b = 3 -> y(1.25) = -2/64 + 3/16 = 0.15625, y(1.5) = 0.5; flat elsewhere.
    xs, ys = [0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 1.0, 1.0]
    assert steffen(xs, ys, 0.5) == 0.0
    assert steffen(xs, ys, 1.25) == pytest.approx(0.15625)
    assert steffen(xs, ys, 1.5) == pytest.approx(0.5)
    assert steffen(xs, ys, 2.5) == 1.0


def test_steffen_two_knots_is_the_line_and_outside_is_none() -> None:
    assert steffen([10.0, 20.0], [100.0, 50.0], 12.0) == pytest.approx(90.0)
    assert steffen([10.0, 20.0], [100.0, 50.0], 9.999) is None
    assert steffen([10.0, 20.0], [100.0, 50.0], 20.001) is None
    assert steffen([5.0], [7.0], 5.0) == 7.0
    assert steffen([5.0], [7.0], 5.1) is None
    with pytest.raises(ValueError, match="strictly increasing"):
        steffen([1.0, 1.0], [2.0, 3.0], 1.0)


# --- Steffen: properties on random data -------------------------------------------------------

_finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, allow_infinity=False)


@st.composite
def _monotone_knots(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    n = draw(st.integers(min_value=2, max_value=9))
    gaps = draw(st.lists(st.floats(min_value=1e-2, max_value=100.0), min_size=n - 1,
                         max_size=n - 1))
    steps = draw(st.lists(st.floats(min_value=0.0, max_value=1000.0), min_size=n - 1,
                          max_size=n - 1))
    x0 = draw(_finite)
    y0 = draw(_finite)
    xs, ys = [x0], [y0]
    for g, d in zip(gaps, steps, strict=True):
        xs.append(xs[-1] + g)
        ys.append(ys[-1] + d)
    if draw(st.booleans()):
        ys = [-y for y in ys]  # decreasing data too (a front's throughput falls with interactivity)
    return xs, ys


@settings(max_examples=300, deadline=None)
@given(_monotone_knots(), st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=2,
                                   max_size=20))
# x0 + 1.0 x (x_last - x0) rounds to just above x_last here: the grid is clamped into the knots
@example(([-1.0, 0.0, 1.0, 2.0, 3.0, 4.297178405566157, 5.7526444917850235, 28.178120477078796,
           127.36929715625722], [0.0] * 9), [0.0, 1.0])
def test_steffen_monotone_and_never_overshoots(
    knots: tuple[list[float], list[float]], fractions: list[float],
) -> None:
    xs, ys = knots
    # points within the knots (steffen never extrapolates: None outside [xs[0], xs[-1]]); the
    # clamp keeps float rounding of xs[0] + 1.0 x (xs[-1] - xs[0]) from stepping past xs[-1]
    grid = sorted(min(xs[-1], max(xs[0], xs[0] + f * (xs[-1] - xs[0]))) for f in fractions)
    vals = [steffen(xs, ys, x) for x in grid]
    assert all(v is not None for v in vals)
    increasing = ys[-1] >= ys[0]
    tol = 1e-9 * (1 + max(abs(y) for y in ys))
    for a, b in zip(vals, vals[1:], strict=False):
        assert a is not None and b is not None
        assert (b >= a - tol) if increasing else (b <= a + tol)
    for x, v in zip(grid, vals, strict=True):
        assert v is not None
        i = max(k for k in range(len(xs)) if xs[k] <= x)
        j = min(i + 1, len(xs) - 1)
        assert min(ys[i], ys[j]) - tol <= v <= max(ys[i], ys[j]) + tol


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=9).flatmap(
    lambda n: st.tuples(
        st.lists(st.floats(min_value=1e-2, max_value=50.0), min_size=n - 1, max_size=n - 1),
        st.lists(_finite, min_size=n, max_size=n))))
def test_steffen_exact_at_knots_none_outside_any_data(
    data: tuple[list[float], list[float]],
) -> None:
    gaps, ys = data
    xs = [0.0]
    for g in gaps:
        xs.append(xs[-1] + g)
    for x, y in zip(xs, ys, strict=True):
        assert steffen(xs, ys, x) == y
    assert steffen(xs, ys, xs[0] - 1e-6) is None
    assert steffen(xs, ys, xs[-1] + 1e-6) is None
    # between knots, even for non-monotone data, the curve stays within the interval's values
    for i in range(len(xs) - 1):
        v = steffen(xs, ys, (xs[i] + xs[i + 1]) / 2)
        assert v is not None
        assert min(ys[i], ys[i + 1]) - 1e-9 <= v <= max(ys[i], ys[i + 1]) + 1e-9


def test_steffen_curve_is_not_merely_clamped_linear() -> None:
    # A cubic, not the chord: on the parabola knots above, the chord at 0.5 would read 0.5.
    assert steffen([0.0, 1.0, 2.0], [0.0, 1.0, 4.0], 0.5) != pytest.approx(0.5)


# --- the Pareto front -------------------------------------------------------------------------


def _brute_front(xy: list[tuple[float, float]]) -> list[int]:
    """O(n^2): i is on the front iff no j dominates it."""
    def dominates(j: int, i: int) -> bool:
        (xj, yj), (xi, yi) = xy[j], xy[i]
        return xj >= xi and yj >= yi and (xj > xi or yj > yi)
    return [i for i in range(len(xy)) if not any(dominates(j, i) for j in range(len(xy)))]


# small integer grids make ties (equal x, equal y, equal points) common
_grid_points = st.lists(st.tuples(st.integers(0, 6).map(float), st.integers(0, 6).map(float)),
                        max_size=25)
_real_points = st.lists(st.tuples(st.floats(0, 1e3), st.floats(0, 1e5)), max_size=40)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_grid_points, _real_points))
def test_pareto_indices_match_brute_force(xy: list[tuple[float, float]]) -> None:
    assert pareto_indices(xy) == _brute_front(xy)


def test_pareto_hand_case_with_ties() -> None:
    xy = [(1.0, 10.0), (2.0, 8.0), (2.0, 9.0), (3.0, 5.0), (3.0, 5.0), (0.5, 10.0), (4.0, 1.0)]
    # (2,8) loses to (2,9); (0.5,10) loses to (1,10); the two (3,5) tie and both stay
    assert pareto_indices(xy) == [0, 2, 3, 4, 6]
    assert pareto_indices([]) == []


def _pt(c: float, inter: float | None, total: float, out: float | None = None) -> FrontierPoint:
    out = total / 4 if out is None else out
    return FrontierPoint(c, inter, None if inter is None else inter * 0.8, out, total - out, total,
                         None, None, None)


def test_mark_pareto_uses_interactivity_and_total_and_skips_unknown() -> None:
    pts = [_pt(1, 100.0, 100.0), _pt(2, 90.0, 180.0), _pt(4, 80.0, 170.0), _pt(8, None, 999.0),
           _pt(16, 50.0, 400.0)]
    assert [p.pareto for p in mark_pareto(pts)] == [True, True, False, False, True]


# --- reading the front at a target -------------------------------------------------------------


def test_at_target_interpolates_between_two_front_points_with_costs() -> None:
    # front by interactivity: (20, 400 c16) (90, 180 c2) (100, 100 c1); c4 is dominated.
    pts = [_pt(1, 100.0, 100.0), _pt(2, 90.0, 180.0), _pt(4, 80.0, 170.0),
           _pt(16, 20.0, 400.0)]
    at = at_target(pts, 95.0, usd_per_gpu_hour=3.6)
    assert at is not None and at.interpolated and at.between == (2, 1)
    # total: knots (20,400) (90,180) (100,100); s0 = -220/70 = -3.142857, s1 = -8.
    # interior: p1 = (s0 * 10 + s1 * 70) / 80 = (-220/7 - 560) / 80 = -7.392857,
    #   y'1 = (-1 - 1) * min(22/7, 8, 7.392857/2) = -44/7 = -6.285714
    # right end: p2 = s1 (1 + 10/80) - s0 * 10/80 = -9 + 11/28 = -241/28; |p2| <= 16 -> y'2 = p2
    # [90,100], h = 10, t = 5: a = (y'1 + y'2 - 2 s1) / 100 = (31/28) / 100 = 31/2800,
    #   b = (3 s1 - 2 y'1 - y'2) / 10 = (-24 + 88/7 + 241/28) / 10 = -79/280
    #   y = 180 - (44/7) 5 - (79/280) 25 + (31/2800) 125 = 400125/2800 = 142.9017857
    assert at.total_tok_s_per_gpu == pytest.approx(400125 / 2800, rel=1e-9)
    assert at.output_tok_s_per_gpu == pytest.approx(400125 / 2800 / 4, rel=1e-9)
    assert at.usd_per_million_total_tokens == pytest.approx(3.6 / (400125 / 2800 * 3600 / 1e6))
    assert at_target(pts, 90.0, 3.6) == AtTarget(90.0, 45.0, 135.0, 180.0,
                                                 usd_per_million(3.6, 45.0),
                                                 usd_per_million(3.6, 135.0),
                                                 usd_per_million(3.6, 180.0), False, None)
    assert at_target(pts, 101.0, 3.6) is None
    assert at_target(pts, 19.9, 3.6) is None
    assert at_target([], 50.0, 3.6) is None


def test_at_slo_takes_best_passing_measured_point() -> None:
    pts = [_pt(1, 100.0, 100.0), _pt(2, 90.0, 180.0), _pt(16, 20.0, 400.0)]
    at = at_slo(pts, [True, True, False], None)
    assert at is not None and not at.interpolated and at.total_tok_s_per_gpu == 180.0
    assert at.usd_per_million_total_tokens is None
    assert at_slo(pts, [False, False, False], 1.0) is None
    with pytest.raises(ValueError):
        at_slo(pts, [True], 1.0)
