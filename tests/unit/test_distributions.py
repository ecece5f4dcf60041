"""Length distributions: asked moments over 20k seeded draws, exact means, seeds, validation."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from infer_prof.core.workload.distributions import (
    DistributionError,
    Empirical,
    Fixed,
    LogNormal,
    Normal,
    Uniform,
    distribution_from_dict,
)

N = 20_000
SEED = 1234


def draw(dist, n=N, seed=SEED):
    return dist.sample(random.Random(seed), n)


def test_fixed_draws_value_and_consumes_no_randomness():
    rng = random.Random(0)
    assert Fixed(512).sample(rng, 3) == [512, 512, 512]
    assert rng.random() == random.Random(0).random()
    assert Fixed(512).mean() == 512.0
    assert Fixed(512).support() == (512, 512)


def test_uniform_moments_and_range():
    x = draw(Uniform(1, 6))
    assert set(x) == {1, 2, 3, 4, 5, 6}
    assert statistics.fmean(x) == pytest.approx(3.5, abs=0.05)
    # discrete uniform on 1..6: variance (6^2 - 1) / 12
    assert statistics.pstdev(x) == pytest.approx(math.sqrt(35 / 12), abs=0.03)
    assert Uniform(1, 6).mean() == 3.5


def test_normal_has_asked_mean_and_std():
    d = Normal(500, 50, 1, 10_000)
    x = draw(d)
    assert statistics.fmean(x) == pytest.approx(500, abs=1.5)  # SE 0.35
    assert statistics.pstdev(x) == pytest.approx(50, abs=1.5)
    assert d.mean() == pytest.approx(500, abs=1e-6)  # clipping 10 sigma away changes nothing


def test_normal_clipped_mean_hand_computed():
    # E[max(X, 100)] for X ~ N(100, 10) = 100 + 10 * phi(0) = 100 + 10 / sqrt(2 pi)
    assert Normal(100, 10, 100, 200).mean() == pytest.approx(100 + 10 / math.sqrt(2 * math.pi))
    d = Normal(100, 50, 80, 120)  # symmetric clip: mean stays 100, most mass on the bounds
    x = draw(d)
    assert min(x) == 80 and max(x) == 120
    assert statistics.fmean(x) == pytest.approx(d.mean(), abs=0.3)


def test_lognormal_median_sigma_and_mean():
    d = LogNormal(256, 1.0, 1, 10**7)
    x = draw(d)
    logs = [math.log(v) for v in x]
    assert statistics.median(x) == pytest.approx(256, rel=0.03)
    assert statistics.fmean(logs) == pytest.approx(math.log(256), abs=0.03)
    assert statistics.pstdev(logs) == pytest.approx(1.0, abs=0.02)
    assert d.mean() == pytest.approx(256 * math.exp(0.5), rel=1e-6)
    assert statistics.fmean(x) == pytest.approx(256 * math.exp(0.5), rel=0.04)


def test_lognormal_clipped_mean_hand_computed_and_sampled():
    # E[max(X, 100)], ln X ~ N(ln 100, 1): 100 * 0.5 + 100 * e^0.5 * Phi(1)
    phi_1 = 0.8413447460685429
    assert LogNormal(100, 1.0, 100, 10**9).mean() == pytest.approx(
        50 + 100 * math.exp(0.5) * phi_1, rel=1e-9)
    d = LogNormal(256, 1.0, 100, 400)
    x = draw(d)
    assert min(x) == 100 and max(x) == 400
    assert statistics.fmean(x) == pytest.approx(d.mean(), rel=0.01)


def test_empirical_weights_and_exact_mean():
    d = Empirical(((10, 10, 1.0), (20, 29, 3.0)))
    assert d.mean() == pytest.approx((10 * 1 + 24.5 * 3) / 4)
    x = draw(d)
    assert x.count(10) / N == pytest.approx(0.25, abs=0.01)
    assert set(x) - {10} == set(range(20, 30))
    assert statistics.fmean(x) == pytest.approx(20.875, abs=0.15)
    assert d.support() == (10, 29)


@pytest.mark.parametrize("dist", [
    Uniform(1, 1000), Normal(300, 80, 1, 2000), LogNormal(200, 0.8, 1, 4000),
    Empirical(((1, 50, 1.0), (51, 500, 2.0))),
])
def test_seed_reproduces_and_differs(dist):
    assert draw(dist, 500, seed=7) == draw(dist, 500, seed=7)
    assert draw(dist, 500, seed=7) != draw(dist, 500, seed=8)


def test_rounding_is_half_up_then_clip():
    assert all(v >= 1 for v in draw(Normal(1, 5, 1, 3)))
    assert set(draw(Normal(2, 0.01, 1, 10), 100)) == {2}


def test_scaled_keeps_shape_and_floor_of_one():
    assert Fixed(512).scaled(0.0625) == Fixed(32)
    assert Uniform(4, 100).scaled(0.1) == Uniform(1, 10)
    assert LogNormal(256, 1.0, 4, 4096).scaled(0.0625) == LogNormal(16.0, 1.0, 1, 256)
    assert Normal(3072, 512, 2048, 4096).scaled(0.0625) == Normal(192.0, 32.0, 128, 256)
    assert Empirical(((64, 255, 0.2),)).scaled(0.0625) == Empirical(((4, 16, 0.2),))
    with pytest.raises(ValueError, match="scale factor"):
        Fixed(5).scaled(0)


@pytest.mark.parametrize("dist", [
    Fixed(7), Uniform(2, 9), Normal(10.5, 2.0, 3, 30), LogNormal(64, 0.5, 2, 999),
    Empirical(((1, 4, 0.5), (9, 9, 2.0))),
])
def test_to_dict_round_trip(dist):
    assert distribution_from_dict(dist.to_dict()) == dist


def test_from_dict_shorthand_and_defaults():
    assert distribution_from_dict(128) == Fixed(128)
    assert distribution_from_dict({"kind": "lognormal", "median": 200, "sigma": 0.8,
                                   "max": 2048}) == LogNormal(200, 0.8, 1, 2048)
    assert distribution_from_dict({"kind": "empirical", "bins": [[5, 1], [6, 9, 3]]}) == \
        Empirical(((5, 5, 1), (6, 9, 3)))


@pytest.mark.parametrize("spec, field, words", [
    ({"kind": "zipf"}, "kind", "unknown distribution 'zipf'; allowed: fixed, uniform"),
    ({"min": 1}, "kind", "unknown distribution missing"),
    ({"kind": "uniform", "min": 100, "max": 50}, "max", "must be >= min (100), got 50"),
    ({"kind": "uniform", "min": -5, "max": 50}, "min", "must be >= 1, got -5"),
    ({"kind": "fixed", "value": "512"}, "value", "whole number of tokens, got string '512'"),
    ({"kind": "fixed", "value": 1.5}, "value", "got number 1.5"),
    ({"kind": "fixed", "value": True}, "value", "got boolean True"),
    ({"kind": "normal", "mean": 10, "std": 0, "max": 20}, "std", "must be > 0"),
    ({"kind": "normal", "mean": 10, "std": 1}, "max", "missing; kind 'normal' needs"),
    ({"kind": "lognormal", "median": 10, "sigma": 1, "max": 9, "mean": 3}, "mean",
     "unknown field for kind 'lognormal'; allowed: kind, median, sigma, max, min"),
    ({"kind": "empirical", "bins": []}, "bins", "non-empty list"),
    ({"kind": "empirical", "bins": [[1, 2, 3, 4]]}, "bins[0]", "[lo, hi, weight]"),
    ({"kind": "empirical", "bins": [[1, 0.0]]}, "bins", "add up to more than 0"),
    ({"kind": "empirical", "bins": [[9, 3, 1.0]]}, "bins[0].hi", "must be >= its lo (9)"),
    (0, "value", "must be >= 1 token"),
    ("long", "kind", "got string 'long'"),
])
def test_from_dict_errors_name_field(spec, field, words):
    with pytest.raises(DistributionError) as info:
        distribution_from_dict(spec)
    assert info.value.field == field
    assert words in info.value.problem
