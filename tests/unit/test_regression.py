"""Regression statistics on fixtures with known answers.

Reference values marked "scipy" were computed once with scipy 1.17 (mannwhitneyu
method="asymptotic", ttest_ind equal_var=False, t.sf) and agree with the hand formulas shown.
"""

from __future__ import annotations

import math
import random

import pytest

from infer_prof.core.analysis import regression as r
from infer_prof.core.analysis import significance as sig


def lognormal_ms(rng: random.Random, n: int, scale: float) -> list[float]:
    """Latency-like samples: 100 ms * scale * lognormal(0, 0.25)."""
    return [scale * 100.0 * rng.lognormvariate(0.0, 0.25) for _ in range(n)]


# --- percentile / statistic --------------------------------------------------------------------


def test_percentile_linear_interpolation() -> None:
    assert r.percentile([4, 1, 3, 2], 50) == 2.5  # h = 1.5 -> 2 + 0.5 * (3 - 2)
    assert r.percentile([10, 20, 30, 40, 50], 90) == pytest.approx(46.0)  # h = 3.6
    assert r.percentile([10, 20, 30, 40, 50], 0) == 10
    assert r.percentile([10, 20, 30, 40, 50], 100) == 50
    assert r.percentile([7.0], 99) == 7.0
    # infer_prof.core.measurement.stats: no values, no percentile
    assert r.percentile([], 50) is None
    with pytest.raises(ValueError):
        r.percentile([1, 2], 101)


def test_statistic_names() -> None:
    xs = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert r.statistic(xs, "mean") == 4.0
    assert r.statistic(xs, "p50") == 3.0
    assert r.statistic(xs, "max") == 10.0
    assert r.statistic(xs, "p99") == pytest.approx(4.0 + 0.96 * 6.0)  # h = 3.96
    with pytest.raises(ValueError, match="unknown statistic"):
        r.statistic(xs, "median")


def test_percent_change() -> None:
    assert r.percent_change(200.0, 220.0) == pytest.approx(10.0)
    assert r.percent_change(-200.0, -180.0) == pytest.approx(10.0)  # relative to |baseline|
    assert r.percent_change(0.0, 0.0) == 0.0
    assert r.percent_change(0.0, 1.0) is None


# --- tests of significance ---------------------------------------------------------------------


def test_mann_whitney_no_ties() -> None:
    # U_x = 0, U_y = 9, mu = 4.5, var = 9/12 * 7 = 5.25, z = (9 - 4.5 - 0.5) / sqrt(5.25)
    u, p = sig.mann_whitney_u([1, 2, 3], [4, 5, 6])
    assert u == 0.0
    z = 4.0 / math.sqrt(5.25)
    assert p == pytest.approx(math.erfc(z / math.sqrt(2)))
    assert p == pytest.approx(0.0808555983700523)  # scipy


def test_mann_whitney_ties() -> None:
    # pooled 1,2,2,2,3,3 -> ranks 1,3,3,3,5.5,5.5; R_x = 7, U_x = 1, U_y = 8
    # tie term 3^3-3 + 2^3-2 = 30; var = 9/12 * (7 - 30/30) = 4.5
    # z = (8 - 4.5 - 0.5) / sqrt(4.5) = sqrt 2
    u, p = sig.mann_whitney_u([1, 2, 2], [2, 3, 3])
    assert u == 1.0
    assert p == pytest.approx(math.erfc(1.0))
    assert p == pytest.approx(0.15729920705028502)  # scipy


def test_mann_whitney_all_equal() -> None:
    assert sig.mann_whitney_u([5, 5], [5, 5, 5]) == (3.0, 1.0)


def test_t_distribution() -> None:
    assert sig.t_two_sided_p(2.0, 10) == pytest.approx(0.07338803477074037, rel=1e-9)  # scipy
    assert sig.t_two_sided_p(0.0, 7) == pytest.approx(1.0)
    assert sig.t_quantile(0.975, 10) == pytest.approx(2.228138851986274, rel=1e-9)  # scipy
    assert sig.t_quantile(0.025, 4.5) == pytest.approx(-2.658912347204404, rel=1e-9)  # scipy


def test_welch_t_test() -> None:
    # means 2.5 and 4.5, variances 5/3 each: se = sqrt(5/6), t = 2 / se, df = 6 exactly
    t, df, p = sig.welch_t_test([1, 2, 3, 4], [3, 4, 5, 6])
    assert t == pytest.approx(2.0 / math.sqrt(5.0 / 6.0))
    assert df == pytest.approx(6.0)
    assert p == pytest.approx(0.07098765432098758, rel=1e-9)  # scipy


# --- bootstrap ---------------------------------------------------------------------------------


def test_bootstrap_constant_samples_give_exact_interval() -> None:
    lo, hi = r.bootstrap_change_ci([10.0] * 50, [11.0] * 40, "p99", n_boot=100)
    assert lo == pytest.approx(10.0)
    assert hi == pytest.approx(10.0)


def test_bootstrap_is_deterministic_per_seed() -> None:
    rng = random.Random(5)
    b, c = lognormal_ms(rng, 100, 1.0), lognormal_ms(rng, 100, 1.0)
    first = r.bootstrap_change_ci(b, c, "mean", n_boot=200, seed=3)
    assert first == r.bootstrap_change_ci(b, c, "mean", n_boot=200, seed=3)
    assert first != r.bootstrap_change_ci(b, c, "mean", n_boot=200, seed=4)
    assert first[0] < first[1]


# --- per-request samples: the gate -------------------------------------------------------------


@pytest.mark.parametrize("stat", ["mean", "p50"])
def test_planted_ten_percent_slowdown_is_a_regression(stat: str) -> None:
    rng = random.Random(42)
    baseline = lognormal_ms(rng, 500, 1.0)
    current = lognormal_ms(rng, 500, 1.10)
    m = r.compare_samples("ttft_ms", baseline, current, stat=stat, threshold_pct=5.0)
    assert m.direction == "lower"
    assert m.significant is True
    assert m.ci_low_pct is not None and m.ci_low_pct > 0
    assert m.p_value is not None and m.p_value < 0.05
    assert m.change_pct is not None and m.change_pct >= 5.0
    assert m.crosses_threshold and m.regression and not m.improvement


def test_slowdown_caught_and_null_not_flagged_across_seeds() -> None:
    caught = flagged = 0
    for seed in range(10):
        rng = random.Random(seed)
        base = lognormal_ms(rng, 500, 1.0)
        slow = lognormal_ms(rng, 500, 1.10)
        same = lognormal_ms(rng, 500, 1.0)
        caught += r.compare_samples(
            "e2e_ms", base, slow, stat="mean",
            significance=r.Significance(n_boot=300, seed=seed)
        ).regression
        flagged += r.compare_samples(
            "e2e_ms", base, same, stat="mean",
            significance=r.Significance(n_boot=300, seed=seed)
        ).regression
    assert caught == 10
    assert flagged == 0


def test_same_distribution_false_positive_rate_is_sane() -> None:
    # Mann-Whitney at alpha 0.05 on 200 null pairs: expect about 10 (binomial sd ~3.1)
    hits = 0
    for seed in range(200):
        rng = random.Random(1000 + seed)
        _, p = sig.mann_whitney_u(lognormal_ms(rng, 200, 1.0), lognormal_ms(rng, 200, 1.0))
        hits += p < 0.05
    assert 2 <= hits <= 20


def test_same_distribution_is_not_a_regression() -> None:
    rng = random.Random(7)
    m = r.compare_samples(
        "ttft_ms", lognormal_ms(rng, 500, 1.0), lognormal_ms(rng, 500, 1.0), stat="p50"
    )
    assert not m.regression and not m.improvement
    assert m.ci_low_pct is not None and m.ci_high_pct is not None
    assert m.ci_low_pct < 0 < m.ci_high_pct


def test_improvement_is_not_a_regression() -> None:
    rng = random.Random(42)
    m = r.compare_samples(
        "tpot_ms", lognormal_ms(rng, 500, 1.0), lognormal_ms(rng, 500, 0.9), stat="mean"
    )
    assert m.change_pct is not None and m.change_pct < -5.0
    assert m.significant and m.improvement and not m.regression and not m.crosses_threshold


def test_throughput_direction_on_samples() -> None:
    rng = random.Random(42)
    base = lognormal_ms(rng, 500, 1.0)
    lower = lognormal_ms(rng, 500, 0.9)
    higher = lognormal_ms(rng, 500, 1.1)
    down = r.compare_samples("output_throughput", base, lower, stat="mean")
    up = r.compare_samples("output_throughput", base, higher, stat="mean")
    assert down.direction == "higher"
    assert down.regression and not down.improvement
    assert up.improvement and not up.regression


def test_threshold_not_crossed_is_not_a_regression() -> None:
    rng = random.Random(42)
    base = lognormal_ms(rng, 500, 1.0)
    slow = lognormal_ms(rng, 500, 1.10)
    m = r.compare_samples("ttft_ms", base, slow, stat="mean", threshold_pct=50.0)
    assert m.significant and not m.crosses_threshold and not m.regression


def test_tail_only_change_rules() -> None:
    # Only the top 2% of requests got twice as slow: p99 doubles, the bulk is unchanged.
    base = [float(i) for i in range(1, 1001)]
    cur = [v * 2 if v > 980 else v for v in base]
    got = {
        rule: r.compare_samples("e2e_ms", base, cur, stat="p99",
                                   significance=r.Significance(rule=rule, n_boot=300))
        for rule in ("ci", "mwu", "both", "either")
    }
    assert got["ci"].change_pct == pytest.approx(100.0)
    assert got["ci"].p_value is not None and got["ci"].p_value > 0.5  # U cannot see it
    assert got["ci"].regression and got["either"].regression
    assert not got["mwu"].regression and not got["both"].regression


def test_empty_and_bad_inputs() -> None:
    with pytest.raises(ValueError):
        r.compare_samples("ttft_ms", [], [1.0])
    with pytest.raises(ValueError):
        r.compare_samples("ttft_ms", [1.0, 2.0], [1.0], stat="p101")


# --- aggregates, one value per run -------------------------------------------------------------


def test_one_run_each_side_decides_on_threshold_alone() -> None:
    worse = r.compare_runs("output_throughput", [1000.0], [930.0])
    assert worse.significant is None and worse.p_value is None and worse.ci_low_pct is None
    assert worse.change_pct == pytest.approx(-7.0)
    assert worse.regression and "threshold alone" in worse.note
    within = r.compare_runs("output_throughput", [1000.0], [970.0])
    assert not within.regression and not within.improvement
    cheaper = r.compare_runs("cost.usd_per_1m_output_tokens", [2.00], [1.80])
    assert cheaper.direction == "lower" and cheaper.improvement and not cheaper.regression


def test_repeated_runs_welch() -> None:
    # diff 10 on 100; se = sqrt(1/3 + 1/3); df = 4; t_{0.975,4} = 2.776445 (scipy)
    m = r.compare_runs("e2e_ms.p99", [100.0, 101.0, 99.0], [110.0, 111.0, 109.0])
    assert m.change_pct == pytest.approx(10.0)
    half = 2.7764451051977987 * math.sqrt(2.0 / 3.0)
    assert m.ci_low_pct == pytest.approx(10.0 - half, rel=1e-7)
    assert m.ci_high_pct == pytest.approx(10.0 + half, rel=1e-7)
    assert m.significant and m.regression


def test_one_current_run_against_history() -> None:
    steady = [1000.0, 1010.0, 990.0, 1005.0, 995.0]  # mean 1000, s = sqrt(62.5)
    m = r.compare_runs("output_throughput", steady, [930.0])
    t = -70.0 / (math.sqrt(62.5) * math.sqrt(1.2))
    assert m.p_value == pytest.approx(sig.t_two_sided_p(t, 4))
    assert m.significant and m.regression
    noisy = r.compare_runs("output_throughput", [1000.0, 1100.0, 900.0], [940.0])
    assert noisy.crosses_threshold and noisy.significant is False and not noisy.regression


# --- direction and thresholds ------------------------------------------------------------------


def test_direction_for() -> None:
    higher = (
        "output_throughput",
        "goodput",
        "tokens_per_dollar",
        "requests_per_s",
        "tok_per_sec.x",
    )
    for name in higher:
        assert r.direction_for(name) == "higher"
    lower = ("ttft_ms.p99", "cost.usd_per_1m_output_tokens", "joules_per_token", "ms_per_step")
    for name in lower:
        assert r.direction_for(name) == "lower"


def test_threshold_for() -> None:
    table = {"ttft_ms.p99": 10.0, "ttft_ms.*": 8.0, "*_ms.*": 7.0, "*": 5.0}
    assert r.threshold_for("ttft_ms.p99", table) == 10.0
    assert r.threshold_for("ttft_ms.p50", table) == 8.0  # longest matching pattern wins
    assert r.threshold_for("e2e_ms.p50", table) == 7.0
    assert r.threshold_for("output_throughput", table) == 5.0
    assert r.threshold_for("output_throughput", {"ttft_p99": 10.0}) == 5.0
    assert r.threshold_for("x", None, default=3.0) == 3.0


def test_a_baseline_of_zeros_is_reported_not_fatal():
    """ITL p50 can be 0 when a server sends tokens in bursts: no percent change exists, and the
    gate must still judge every other metric."""
    from infer_prof.core.analysis.regression import compare_samples

    c = compare_samples("itl_ms", [0.0] * 50, [1.0] * 50, stat="p50")
    assert c.change_pct is None
    assert c.ci_low_pct is None and c.ci_high_pct is None
    assert c.regression is False
    assert "undefined" in c.note
