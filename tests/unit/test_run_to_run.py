"""The gate over runs (issue 36): its statistics on recorded per-run values, its false-alarm rate
by simulation under its model, and the gate's verdicts (spread, what it can see, confirm)."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from infer_prof.core.analysis.run_to_run import (
    Spread,
    cv_of_sigma,
    detectable_pct,
    format_pct,
    judge,
    normal_quantile,
    pooled_log_spread,
    sensitivity_note,
    sigma_of_cv,
)
from infer_prof.results.gate import LaunchSpread, RunData, distinct_tests, evaluate, verdict

#: Issue 36: five runs of one command, one fresh vLLM-CPU launch each, on this 2-core machine
#: (tiny-llama, 16 streams, 400 requests, 128 in / 64 out): TPOT p50 in ms.
ISSUE_TPOT_P50 = [6.61, 6.57, 5.58, 7.36, 5.65]


def test_cv_and_log_spread_convert_both_ways() -> None:
    for cv in (0.0, 0.01, 0.12, 0.5):
        assert cv_of_sigma(sigma_of_cv(cv)) == pytest.approx(cv, abs=1e-12)
    assert sigma_of_cv(0.1) == pytest.approx(0.09975, abs=1e-5)
    with pytest.raises(ValueError):
        sigma_of_cv(-0.1)


def test_normal_quantile_matches_tables() -> None:
    assert normal_quantile(0.975) == pytest.approx(1.959963985, abs=1e-9)
    assert normal_quantile(0.999) == pytest.approx(3.090232306, abs=1e-9)
    assert normal_quantile(0.5) == pytest.approx(0.0, abs=1e-12)
    assert normal_quantile(0.01) == pytest.approx(-2.326347874, abs=1e-9)


def test_pooled_log_spread_hand_computed() -> None:
    logs = [math.log(v) for v in ISSUE_TPOT_P50]
    s, df = pooled_log_spread([ISSUE_TPOT_P50, [7.0]])  # a single run adds nothing
    assert df == 4 and s == pytest.approx(statistics.stdev(logs))
    s2, df2 = pooled_log_spread([[1.0, math.e], [2.0, 2.0 * math.e]])  # deviations +-1/2 each
    assert df2 == 2 and s2 == pytest.approx(math.sqrt(4 * 0.25 / 2))
    assert pooled_log_spread([[3.0], [4.0]]) == (0.0, 0)


def test_identical_runs_of_the_issue_pass_against_the_others() -> None:
    # each run against the other four (leave one out), at the gate's per-metric rate for
    # 10 metrics: none flagged, and the gate says it cannot see 10 %
    for i, cur in enumerate(ISSUE_TPOT_P50):
        base = ISSUE_TPOT_P50[:i] + ISSUE_TPOT_P50[i + 1:]
        j = judge(base, [cur], direction="lower", alpha_m=0.001)
        assert not (j.significant and j.worse), (i, j)
        assert j.detectable_pct > 10.0
        assert j.spread.df == 3 and "measured between 4 runs" in j.spread.basis


def test_a_change_beyond_what_it_can_see_is_flagged_and_below_is_not() -> None:
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8]  # a quiet history: CV ~0.7 %
    j = judge(base, [100.0], direction="lower", alpha_m=0.001)
    limit = j.detectable_pct
    assert 2.0 < limit < 6.0
    mean = math.exp(statistics.fmean(math.log(v) for v in base))
    above = judge(base, [mean * (1 + (limit + 0.5) / 100)], direction="lower", alpha_m=0.001)
    below = judge(base, [mean * (1 + (limit - 0.5) / 100)], direction="lower", alpha_m=0.001)
    assert above.significant and above.worse and not below.significant
    # throughput: a drop is worse; a rise is an improvement, never a regression
    down = judge(base, [90.0], direction="higher", alpha_m=0.001)
    up = judge(base, [110.0], direction="higher", alpha_m=0.001)
    assert down.worse and down.significant and up.significant and not up.worse
    assert detectable_pct(math.log(1.1), "lower") == pytest.approx(10.0)
    assert detectable_pct(math.log(1.1), "higher") == pytest.approx(100 / 11)


def test_false_alarm_rate_is_alpha_by_design() -> None:
    # log-normal runs (the model), 7 baseline runs and 1 current, CV 12 % as on vLLM-CPU:
    # the share flagged worse at alpha_m = 5 % is 5 % (binomial sd 0.3 % at 4000 draws)
    rng = random.Random(36)
    sigma = sigma_of_cv(0.12)
    flagged = 0
    draws = 4000
    for _ in range(draws):
        runs = [6.0 * math.exp(rng.gauss(0.0, sigma)) for _ in range(8)]
        j = judge(runs[:7], runs[7:], direction="lower", alpha_m=0.05)
        flagged += j.significant and j.worse
    assert abs(flagged / draws - 0.05) < 0.012


def test_single_runs_use_the_launch_spread_else_an_assumed_one() -> None:
    assumed = judge([10.0], [10.8], direction="lower", assumed_cv=0.02, alpha_m=0.01)
    assert assumed.spread.assumed and assumed.spread.cv_pct == pytest.approx(2.0)
    # z(0.99) * 2 % * sqrt(2) = 6.6 %: an 8 % rise is flagged
    assert assumed.detectable_pct == pytest.approx(
        math.expm1(2.326348 * sigma_of_cv(0.02) * math.sqrt(2)) * 100, rel=1e-4)
    assert assumed.significant and assumed.worse
    measured = Spread(sigma_of_cv(0.12), 7.0, "launch spread measured on 8 launches")
    j = judge([10.0], [10.8], direction="lower", prior=measured, alpha_m=0.01)
    assert j.spread is measured and not j.significant and j.detectable_pct > 40
    pooled = judge([10.0, 10.2, 9.9], [10.8], direction="lower", prior=measured, alpha_m=0.01)
    assert pooled.spread.df == 9.0 and "pooled with launch spread" in pooled.spread.basis


def test_sensitivity_note_says_what_it_cannot_see() -> None:
    s = Spread(sigma_of_cv(0.12), 6.0, "measured between 8 runs here")
    note = sensitivity_note("TPOT p50", s, 41.3, 5.0, "this history")
    assert note == ("TPOT p50: ±12.0 % between runs (measured between 8 runs here); changes "
                    "below 41 % are below what this history can detect")
    ok = sensitivity_note("TPOT p50", s, 3.0, 5.0, "this history")
    assert ok.endswith("this history can detect changes of 5 % (the threshold) and more")


def _run(i: int, tpot: float, tput: float, ttft_p99: float) -> RunData:
    return RunData(f"r{i}", f"r{i}", {"output_throughput": tput, "tpot_ms.p50": tpot,
                                      "ttft_ms.p99": ttft_p99})


def test_gate_over_runs_passes_identical_runs_and_catches_a_planted_slowdown() -> None:
    # noisy history (the issue's TPOT): gate the last against the others: passes, says it is
    # blind below some size
    runs = [_run(i, t, 1000.0 * 6.3 / t, 90.0 + 7 * (i % 3)) for i, t in
            enumerate(ISSUE_TPOT_P50)]
    out = {c.name: c for c in evaluate(runs[:4], runs[4:])}
    assert set(out) == {"output_throughput", "tpot_ms.p50", "ttft_ms.p99"}
    assert not any(c.regression for c in out.values())
    tpot = out["tpot_ms.p50"]
    assert tpot.detectable_pct is not None and tpot.detectable_pct > 10
    assert "below what this history can detect" in tpot.note and verdict(tpot) == "ok"
    assert "3 distinct metrics" in tpot.method  # alpha 1 % shared by the 3 metrics judged
    # a quiet history (synthetic server: speed set exactly) sees a 10 % slowdown
    quiet = [_run(i, 20.0 * (1 + 0.003 * (i % 3 - 1)), 800.0, 95.0 + i) for i in range(7)]
    slow = [_run(9, 22.0, 730.0, 96.0)]
    out = {c.name: c for c in evaluate(quiet, slow)}
    assert out["tpot_ms.p50"].regression and out["output_throughput"].regression
    assert not out["ttft_ms.p99"].regression
    assert verdict(out["tpot_ms.p50"]) == "REGRESSION"


def test_one_run_a_side_is_judged_with_a_stated_assumed_spread() -> None:
    base, cur = [_run(0, 20.0, 800.0, 95.0)], [_run(1, 22.0, 728.0, 120.0)]
    out = {c.name: c for c in evaluate(base, cur, against="this baseline")}
    assert out["tpot_ms.p50"].spread_basis == "assumed 2.0 %, not measured"
    assert out["tpot_ms.p50"].regression  # 10 % against an assumed 2 % spread
    assert out["ttft_ms.p99"].spread_pct == pytest.approx(25.0)
    assert not out["ttft_ms.p99"].regression
    # the user's assumption, or a launch spread measured on this configuration, replaces it
    wide = {c.name: c for c in evaluate(base, cur, assumed_spread={"*": 10.0})}
    assert not wide["tpot_ms.p50"].regression
    measured = {c.name: c for c in evaluate(
        base, cur, launch_spread=LaunchSpread({"tpot_ms.p50": (0.12, 8)}))}
    assert not measured["tpot_ms.p50"].regression
    assert "launch spread measured on 8 launches" in measured["tpot_ms.p50"].spread_basis


def test_proportional_metrics_are_one_test() -> None:
    # output tokens/s and output tokens/s per GPU on one GPU: one test, not two
    assert distinct_tests([[300.0, 330.0, 310.0], [300.0, 330.0, 310.0], [6.0, 5.5, 5.9]]) == 2
    assert distinct_tests([[5.0, 5.5], [320.0, 352.0], [6.0, 5.5]]) == 2


def test_a_history_of_two_runs_says_it_cannot_see_anything() -> None:
    j = judge([5.0, 5.3], [5.2], direction="lower", alpha_m=0.001)  # 1 degree of freedom
    assert j.detectable_pct > 1000 and format_pct(j.ci_high_pct, signed=True) == "> +1000 %"
    note = sensitivity_note("TPOT p50", j.spread, j.detectable_pct, 5.0, "this history")
    assert note.endswith("this history cannot detect any change (too few runs or too much spread)")
    assert "measured between 2 runs here" in note
    up = judge([300.0, 330.0], [310.0], direction="higher", alpha_m=0.001)
    assert 99.0 < up.detectable_pct < 100.0  # a drop cannot exceed 100 %
    assert "cannot detect any change" in sensitivity_note(
        "output_throughput", up.spread, up.detectable_pct, 5.0, "this history", "higher")
    assert format_pct(41.26) == "41 %" and format_pct(-3.14, signed=True) == "-3.1 %"


#: Six identical runs on vLLM-CPU, each a fresh launch, on this shared 2-core machine (tiny-llama,
#: -c 16 -n 400 --input-len 128 --output-len 64 --seed 1; benchmarks/gate_false_alarms.py
#: collect, 2026-11-27): the machine's load moved every metric together, by up to 2.7x.
VLLM_CPU_RUNS = {
    "output_throughput": [337.54, 188.26, 200.64, 185.92, 125.82, 248.53],
    "ttft_ms.p50": [119.3, 212.83, 196.84, 214.33, 292.32, 164.7],
    "ttft_ms.p99": [199.92, 294.14, 447.47, 375.66, 911.72, 241.93],
    "tpot_ms.p50": [46.53, 82.49, 77.7, 82.05, 113.2, 62.76],
    "tpot_ms.p99": [64.23, 95.84, 110.38, 117.71, 231.0, 72.75],
    "itl_ms.p50": [38.69, 69.05, 64.58, 71.01, 102.06, 52.92],
    "itl_ms.p99": [118.95, 194.16, 202.66, 211.46, 363.79, 150.68],
    "e2e_ms.p50": [3061.67, 5407.43, 5077.93, 5406.12, 7441.35, 4120.69],
    "e2e_ms.p99": [4197.61, 6308.85, 7198.82, 7682.02, 15125.47, 4763.58],
}


def test_recorded_vllm_cpu_runs_pass_against_the_others_and_say_they_are_blind() -> None:
    runs = [RunData(f"r{i}", f"r{i}", {k: v[i] for k, v in VLLM_CPU_RUNS.items()})
            for i in range(6)]
    for i, run in enumerate(runs):
        out = evaluate(runs[:i] + runs[i + 1:], [run])
        assert len(out) == len(VLLM_CPU_RUNS)
        assert [c.name for c in out if c.regression] == [], i
        tpot = next(c for c in out if c.name == "tpot_ms.p50")
        assert tpot.spread_pct is not None and tpot.spread_pct > 20  # the machine, not the code
        assert tpot.detectable_pct is not None and tpot.detectable_pct > 10
        assert "below what this history can detect" in tpot.note or "cannot detect" in tpot.note


def _tail_run(i: int, itl_p99: float, tpot: float, requests: int) -> RunData:
    return RunData(f"r{i}", f"r{i}", {"itl_ms.p99": itl_p99, "tpot_ms.p50": tpot,
                                      "itl_ms.count": 15.0 * requests,
                                      "requests_completed": float(requests)})


def test_a_tail_percentile_of_few_values_is_reported_not_called() -> None:
    # the e2e repeat test's case (vLLM-CPU, 12 requests of 16 tokens a run): the other two
    # runs' ITL p99 agreed to 0.04 %, this run's was 2.2x theirs: one or two gaps a run decide a
    # p99, so two runs agreeing is chance, not a measured spread
    base = [_tail_run(0, 6.6113, 3.45, 12), _tail_run(1, 6.6138, 3.46, 12)]
    cur = [_tail_run(2, 14.403, 3.50, 12)]
    itl = {c.name: c for c in evaluate(base, cur)}["itl_ms.p99"]
    assert itl.change_pct == pytest.approx(117.8, abs=0.1) and itl.p_value < 0.001
    assert not itl.significant and not itl.regression and verdict(itl) != "REGRESSION"
    assert "too few values beyond p99 in a run (< 20: 12 a run)" in itl.note  # ITL: requests
    # 2,000 requests a run put 20 values beyond p99: the same change is called
    many = [_tail_run(i, r.values["itl_ms.p99"], 3.45, 2000) for i, r in enumerate(base + cur)]
    called = {c.name: c for c in evaluate(many[:2], many[2:])}["itl_ms.p99"]
    assert called.significant and called.regression
    # without counts (a history row that does not say) the percentile is judged as before
    bare = [RunData(r.run_id, r.source, {"itl_ms.p99": r.values["itl_ms.p99"]})
            for r in base + cur]
    assert {c.name: c for c in evaluate(bare[:2], bare[2:])}["itl_ms.p99"].regression
