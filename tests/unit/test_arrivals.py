"""Arrival processes: gap means and CVs over 20k seeded gaps, exact constant/inf schedules."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from infer_prof.core.workload.arrivals import ArrivalProcess, arrival_offsets

N = 20_000


def cv(values):
    return statistics.pstdev(values) / statistics.fmean(values)


def test_poisson_gaps_mean_one_over_rate_and_cv_one():
    gaps = ArrivalProcess(4.0).gaps(random.Random(42), N)
    assert statistics.fmean(gaps) == pytest.approx(0.25, rel=0.025)  # SE 0.7%
    assert cv(gaps) == pytest.approx(1.0, abs=0.03)
    assert ArrivalProcess(4.0).cv == 1.0


def test_gamma_burstiness_quarter_has_cv_two():
    p = ArrivalProcess(4.0, "gamma", 0.25)
    gaps = p.gaps(random.Random(42), N)
    assert statistics.fmean(gaps) == pytest.approx(0.25, rel=0.05)
    assert cv(gaps) == pytest.approx(2.0, abs=0.1)
    assert p.cv == 2.0


def test_gamma_burstiness_four_is_smoother():
    gaps = ArrivalProcess(10.0, "gamma", 4.0).gaps(random.Random(42), N)
    assert statistics.fmean(gaps) == pytest.approx(0.1, rel=0.02)
    assert cv(gaps) == pytest.approx(0.5, abs=0.02)


def test_constant_schedule_exact():
    assert ArrivalProcess(2.0, "constant").offsets(random.Random(0), 4) == [0.0, 0.5, 1.0, 1.5]


def test_infinite_rate_sends_everything_at_zero():
    for kind, b in (("poisson", 1.0), ("gamma", 0.25), ("constant", 1.0)):
        assert ArrivalProcess(math.inf, kind, b).offsets(random.Random(0), 5) == [0.0] * 5


def test_offsets_are_running_sums_of_gaps_starting_at_zero():
    p = ArrivalProcess(3.0)
    gaps = p.gaps(random.Random(9), 4)
    offs = p.offsets(random.Random(9), 5)
    assert offs[0] == 0.0
    assert offs[1:] == pytest.approx([sum(gaps[:i]) for i in range(1, 5)])
    assert p.offsets(random.Random(9), 0) == []
    assert p.offsets(random.Random(9), 1) == [0.0]


def test_offsets_within_duration():
    offs = ArrivalProcess(50.0).offsets_within(random.Random(3), 100.0)
    assert offs[0] == 0.0 and offs[-1] < 100.0
    assert len(offs) == pytest.approx(5000, rel=0.05)  # 50/s x 100 s, sd ~1.4%
    assert ArrivalProcess(2.0, "constant").offsets_within(random.Random(0), 2.0) == \
        [0.0, 0.5, 1.0, 1.5]
    with pytest.raises(ValueError, match="infinite rate"):
        ArrivalProcess(math.inf).offsets_within(random.Random(0), 1.0)


def test_seeds_reproduce_and_kind_defaults():
    assert arrival_offsets(50, 5.0, seed=1) == arrival_offsets(50, 5.0, seed=1)
    assert arrival_offsets(50, 5.0, seed=1) != arrival_offsets(50, 5.0, seed=2)
    bursty = arrival_offsets(50, 5.0, burstiness=0.5, seed=1)  # defaults to gamma
    assert bursty == ArrivalProcess(5.0, "gamma", 0.5).offsets(random.Random(1), 50)


@pytest.mark.parametrize("args, words", [
    ((0.0,), "rate must be"),
    ((-1.0,), "rate must be"),
    ((float("nan"),), "rate must be"),
    ((1.0, "weibull"), "unknown arrival kind 'weibull'; allowed: poisson, gamma, constant"),
    ((1.0, "gamma", 0.0), "burstiness must be"),
    ((1.0, "poisson", 0.5), "needs kind 'gamma'"),
])
def test_validation(args, words):
    with pytest.raises(ValueError, match=words):
        ArrivalProcess(*args)
