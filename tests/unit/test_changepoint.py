"""Change-point detection on planted steps and flat noise."""

from __future__ import annotations

import math
import random

import pytest

from infer_prof.core.analysis.changepoint import detect_changepoints, noise_sigma, segment


def noisy(seed: int, n: int, level: float = 100.0, sd: float = 2.0) -> list[float]:
    rng = random.Random(seed)
    return [level + rng.gauss(0.0, sd) for _ in range(n)]


def brute_force_segment(values: list[float], penalty: float, min_size: int) -> list[int]:
    """Optimal partitioning without pruning, straight from the definition."""
    n = len(values)

    def cost(s: int, t: int) -> float:
        seg = values[s:t]
        m = sum(seg) / len(seg)
        return sum((v - m) ** 2 for v in seg)

    best = [math.inf] * (n + 1)
    last = [0] * (n + 1)
    best[0] = -penalty
    for t in range(1, n + 1):
        for s in range(0, t - min_size + 1):
            if best[s] < math.inf and best[s] + cost(s, t) + penalty < best[t]:
                best[t], last[t] = best[s] + cost(s, t) + penalty, s
    starts, t = [], n
    while t > 0:
        starts.append(last[t])
        t = last[t]
    return sorted(starts)


def test_exact_step_without_noise() -> None:
    values = [10.0] * 5 + [12.0] * 5
    [cp] = detect_changepoints(values)
    assert cp.index == 5
    assert cp.before_mean == 10.0 and cp.after_mean == 12.0
    assert cp.change_pct == pytest.approx(20.0)


def test_constant_series_has_none() -> None:
    assert detect_changepoints([7.0] * 30) == []
    assert detect_changepoints([]) == []
    assert detect_changepoints([1.0, 2.0, 3.0]) == []  # too short for two segments of 2


@pytest.mark.parametrize("seed", range(10))
def test_planted_ten_percent_step_after_index_20(seed: int) -> None:
    values = noisy(seed, 40)
    values = [v * 1.10 if i >= 20 else v for i, v in enumerate(values)]
    [cp] = detect_changepoints(values)
    assert abs(cp.index - 20) <= 1
    assert cp.change_pct is not None and 7.0 < cp.change_pct < 13.0


@pytest.mark.parametrize("seed", range(10))
def test_flat_noisy_series_has_none(seed: int) -> None:
    assert detect_changepoints(noisy(100 + seed, 60)) == []


def test_two_steps_up_and_down() -> None:
    values = noisy(3, 60)
    values = [v + (10.0 if 20 <= i < 40 else 0.0) for i, v in enumerate(values)]
    cps = detect_changepoints(values)
    assert [c.index for c in cps] == [20, 40]
    assert cps[0].change_pct is not None and cps[0].change_pct > 7
    assert cps[1].change_pct is not None and cps[1].change_pct < -7


def test_min_change_pct_drops_small_shifts() -> None:
    values = [100.0] * 10 + [100.5] * 10 + [120.0] * 10
    assert [c.index for c in detect_changepoints(values)] == [10, 20]
    [cp] = detect_changepoints(values, min_change_pct=1.0)
    assert cp.index == 20
    assert cp.before_mean == pytest.approx(100.25)  # merged segment 0..19
    assert cp.after_mean == 120.0


def test_pelt_matches_brute_force() -> None:
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randint(4, 25)
        values = [rng.choice([0.0, 5.0, 9.0]) + rng.gauss(0.0, 1.0) for _ in range(n)]
        penalty = rng.uniform(0.5, 20.0)
        min_size = rng.randint(1, 4)
        assert segment(values, penalty=penalty, min_size=min_size) == brute_force_segment(
            values, penalty, min_size
        )


def test_noise_sigma_ignores_a_step() -> None:
    # 21 values alternating +-1: 20 diffs, ten -2 and ten +2 -> median 0, MAD 2.
    # With a +50 step at 11 one diff becomes 48: median (2+2)/2 = 2, |d - 2| has ten 0s,
    # nine 4s and one 46 -> MAD (0+4)/2 = 2 again.
    values = [1.0, -1.0] * 10 + [1.0]
    stepped = values[:11] + [v + 50.0 for v in values[11:]]
    expected = 2.0 / 0.6745 / math.sqrt(2.0)
    assert noise_sigma(values) == pytest.approx(expected)
    assert noise_sigma(stepped) == pytest.approx(expected)
    assert noise_sigma([1.0, 2.0]) == 0.0
