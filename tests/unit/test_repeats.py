"""run --repeat N: the statistics across repeats (core/analysis/repeats.py), the result's
repeats section (run/repeats.py), compare's cells, the launch spread stored in the history,
and the option rules."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from infer_prof.cli import app
from infer_prof.core.analysis.comparison import METRIC_COLUMNS, format_cell, format_interval
from infer_prof.core.analysis.repeats import REPEAT_COLUMNS, format_spread, repeat_stats
from infer_prof.results.comparison_rows import row_for
from infer_prof.results.document import Result
from infer_prof.results.history import launch_spreads
from infer_prof.results.identity import config_fingerprint
from infer_prof.run.repeats import RepeatPlan, metric_values, record_launch_spreads

from .typed_results import result_of


def test_mean_sd_cv_and_the_t_interval_of_five_values():
    s = repeat_stats([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s.n == 5 and s.mean == 3.0
    assert s.sd == pytest.approx(math.sqrt(2.5))  # n - 1 in the denominator
    assert s.cv == pytest.approx(math.sqrt(2.5) / 3.0)
    half = 2.7764451 * math.sqrt(2.5) / math.sqrt(5)  # t_{0.975, 4}
    assert s.low == pytest.approx(3.0 - half, rel=1e-6)
    assert s.high == pytest.approx(3.0 + half, rel=1e-6)


def test_two_values_use_t_with_one_degree_of_freedom_and_90_percent_is_narrower():
    s = repeat_stats([10.0, 12.0])
    assert s.sd == pytest.approx(math.sqrt(2.0))
    assert s.half_width == pytest.approx(12.7062047 * math.sqrt(2.0) / math.sqrt(2), rel=1e-6)
    s90 = repeat_stats([10.0, 12.0], confidence=0.90)
    assert s90.half_width == pytest.approx(6.3137515 * 1.0, rel=1e-6)  # t_{0.95, 1} x s/sqrt(2)
    assert s90.confidence == 0.90


def test_one_value_has_no_spread_never_zero():
    s = repeat_stats([7.5])
    assert (s.mean, s.sd, s.cv, s.low, s.high) == (7.5, None, None, None, None)
    assert format_spread(s) == "7.50 (n=1)"


def test_identical_values_have_zero_spread_and_a_zero_mean_has_no_cv():
    s = repeat_stats([4.0, 4.0, 4.0])
    assert s.sd == 0.0 and s.cv == 0.0 and s.low == s.high == 4.0
    assert repeat_stats([-1.0, 1.0]).cv is None


@pytest.mark.parametrize("values, conf", [([], 0.95), ([1.0, math.nan], 0.95),
                                          ([1.0, math.inf], 0.95), ([1.0, 2.0], 1.0)])
def test_bad_input_is_refused(values, conf):
    with pytest.raises(ValueError):
        repeat_stats(values, conf)


def test_format_spread_names_sd_cv_interval_and_n():
    text = format_spread(repeat_stats([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert text.startswith("3.00 ± 1.58 (cv 52.7 %, 95 % CI 1.04-4.96, n=5)")


def test_repeat_metrics_are_the_gates_then_compares_named_as_the_history_names_them():
    names = [c.path for c in REPEAT_COLUMNS]
    assert names[:4] == ["summary.request_throughput", "summary.output_throughput",
                         "summary.ttft_ms.p50", "summary.ttft_ms.p99"]
    assert "cost.usd_per_hour" in names  # compare's, not the gate's
    assert len({c.key for c in REPEAT_COLUMNS}) >= len(METRIC_COLUMNS)


def _run(run_id: str, tpot: float, rate: float, complete: bool = True) -> Result:
    return result_of(run_id=run_id, complete=complete,
                     summary={"request_throughput": rate, "output_throughput": 64 * rate,
                              "tpot_ms": {"p50": tpot, "p99": 2 * tpot}},
                     config={"concurrency": 16, "model": "tiny-llama"})


def test_the_section_grows_with_the_group_and_leaves_out_incomplete_repeats():
    plan = RepeatPlan(count=4, relaunch=True)
    first = plan.section(0, 0, _run("a", 6.0, 10.0))
    assert first.repeats is not None and first.repeats.metrics is None  # nothing to spread yet
    assert (first.repeats.group, first.repeats.index, first.repeats.count) == ("a", 1, 4)
    plan.done(0, first)
    second = plan.section(0, 1, _run("b", 8.0, 12.0))
    assert second.repeats is not None and second.repeats.metrics is not None
    m = second.repeats.metrics["tpot_ms.p50"]
    assert m.values == [6.0, 8.0] and m.mean == 7.0 and m.sd == pytest.approx(math.sqrt(2))
    assert second.repeats.run_ids == ["a", "b"] and second.repeats.relaunch is True
    assert "ttft_ms.p50" not in second.repeats.metrics  # not measured: left out, never 0
    plan.done(0, second)
    cut = plan.section(0, 2, _run("c", 99.0, 1.0, complete=False))
    assert cut.repeats is not None and cut.repeats.run_ids == ["a", "b"]  # not counted
    plan.done(0, cut)
    last = plan.section(0, 3, _run("d", 7.0, 11.0))
    assert last.repeats is not None and last.repeats.metrics is not None
    assert last.repeats.metrics["tpot_ms.p50"].values == [6.0, 8.0, 7.0]
    assert last.repeats.group == "a" and last.repeats.index == 4


def test_one_run_no_repeats_section():
    plan = RepeatPlan(count=1, relaunch=False)
    assert plan.section(0, 0, _run("a", 6.0, 10.0)).repeats is None


def test_metric_values_need_every_repeat_to_have_measured_it():
    a = _run("a", 6.0, 10.0)
    b = result_of(run_id="b", summary={"request_throughput": 11.0})
    values = metric_values([a, b])
    assert values == {"request_throughput": [10.0, 11.0]}


def test_compare_shows_the_mean_with_its_sd_and_interval():
    plan = RepeatPlan(count=2, relaunch=False)
    plan.done(0, plan.section(0, 0, _run("a", 6.0, 10.0)))
    closing = plan.section(0, 1, _run("b", 8.0, 12.0))
    row = row_for(closing)
    assert row["request_throughput"] == 11.0  # the mean, not this repeat's 12
    assert row["repeats"] == 2 and row["repeats_relaunch"] is False
    col = next(c for c in METRIC_COLUMNS if c.key == "tpot_p50")
    assert format_cell(col, row) == "7.00 ±1.41"
    assert format_interval(col, row) == "-5.71-19.71 (cv 20.2 %)"
    plain = row_for(_run("x", 6.0, 10.0))
    assert format_cell(col, plain) == "6.00" and format_interval(col, plain) == ""


def test_relaunch_stores_each_metrics_launch_spread_for_the_gate(tmp_path):
    db = tmp_path / "history.sqlite"
    plan = RepeatPlan(count=3, relaunch=True)
    for i, (tpot, rate) in enumerate([(6.0, 10.0), (6.6, 10.5), (5.4, 9.5)]):
        plan.done(0, plan.section(0, i, _run(f"r{i}", tpot, rate)))
    assert record_launch_spreads(plan, db) == []
    fingerprint = config_fingerprint(_run("any", 1.0, 1.0))
    stored = launch_spreads(db, fingerprint)
    assert stored["tpot_ms.p50"].cv == pytest.approx(0.6 / 6.0)
    assert stored["tpot_ms.p50"].n_runs == 3
    assert stored["request_throughput"].cv == pytest.approx(0.5 / 10.0)
    assert "3 launches" in str(stored["tpot_ms.p50"].source)


def test_within_one_launch_or_without_history_nothing_is_stored(tmp_path):
    db = tmp_path / "history.sqlite"
    plan = RepeatPlan(count=2, relaunch=False)
    for i in range(2):
        plan.done(0, plan.section(0, i, _run(f"r{i}", 6.0 + i, 10.0)))
    assert record_launch_spreads(plan, db) == [] and not db.exists()
    relaunched = RepeatPlan(count=2, relaunch=True)
    assert record_launch_spreads(relaunched, None) == []


@pytest.mark.parametrize("args, words", [
    (("--repeat-relaunch",), "give --repeat N"),
    (("--repeat", "2", "--repeat-relaunch", "--endpoint", "http://127.0.0.1:9"),
     "cannot with --endpoint"),
    (("--repeat", "2", "--frontier"), "drop --repeat"),
    (("--repeat", "0"), "--repeat must be"),
])
def test_repeat_option_rules_are_one_line_exit_2(args, words):
    r = CliRunner().invoke(app, ["run", "--no-progress", "--model", "llama-2-7b", *args])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0], r.stderr
