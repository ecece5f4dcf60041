"""run/frontier_run: the levels tried, each stop rule, the answer at a target or SLO, and the
bad input refused before anything starts."""

from pathlib import Path

import msgspec
import pytest

from infer_prof.core.analysis.frontier_axes import summary_with_axes
from infer_prof.core.measurement.precision import PrecisionRule
from infer_prof.core.workload.distributions import Fixed
from infer_prof.core.workload.workloads import Arrival, Workload
from infer_prof.run.config import ConfigError, RunConfig
from infer_prof.run.frontier_run import (
    answer,
    doubling,
    member_groups,
    prepare,
    run_frontier,
    suite_frontiers,
)
from infer_prof.run.record import RunOutcome
from tests.unit.typed_results import result_of


def test_doubling_levels():
    assert doubling(1, 256) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert doubling(3, 20) == [3, 6, 12]
    assert doubling(1.5, 1.0) == [1.5]


def test_prepare_default_closed_loop_with_precision():
    cfg, spec = prepare(RunConfig(frontier=True, max_concurrency=16), False)
    assert spec.loop == "closed" and spec.levels == (1, 2, 4, 8, 16)
    assert cfg.load.concurrency == [1, 2, 4, 8, 16]
    assert cfg.load.max_concurrency is None  # the ceiling, not an in-flight cap
    assert spec.precision == PrecisionRule()
    assert cfg.load.duration_s == PrecisionRule().max_seconds + 5.0  # the driver's backstop
    assert spec.ceiling_reason.startswith("max_concurrency")


def test_prepare_lists_and_fixed_counts():
    cfg, spec = prepare(RunConfig(frontier=True, concurrency=[2, 8, 32], num_requests=50), False)
    assert spec.explicit and spec.levels == (2, 8, 32) and spec.precision is None
    assert cfg.load.duration_s is None and cfg.load.num_requests == 50
    cfg, spec = prepare(RunConfig(frontier=True, concurrency=[4], max_concurrency=40), False)
    assert spec.levels == (4, 8, 16, 32) and not spec.explicit  # one value: the start
    cfg, spec = prepare(RunConfig(frontier=True, rates=[0.5]), False)
    assert spec.loop == "open" and spec.levels[:3] == (0.5, 1.0, 2.0)
    assert spec.precision is not None and not spec.precision.require_throughput
    assert cfg.load.rates == list(spec.levels) and cfg.load.concurrency is None
    _, spec = prepare(RunConfig(frontier=True), True)  # an open-loop workload file
    assert spec.loop == "open"


@pytest.mark.parametrize("cfg, words", [
    (RunConfig(frontier=True, find_max=True, slo="ttft_p99=100"), "--find-max"),
    (RunConfig(frontier=True, trace="t.csv"), "--trace"),
    (RunConfig(frontier=True, target_interactivity=0.0), "positive"),
    (RunConfig(frontier=True, suite="nightly", target_interactivity=-1.0), "positive"),
    (RunConfig(frontier=True, rates=[1.0, float("inf")]), "infinite"),
    (RunConfig(frontier=True, concurrency=[64, 128], max_concurrency=32), "above"),
])
def test_prepare_refuses_bad_combinations(cfg, words):
    with pytest.raises(ConfigError, match=words):
        prepare(cfg, False)


def _result(level, tpot_ms, out_tok_s, in_tok_s, slo_passed=None, complete=True, price=None):
    slo = None if slo_passed is None else {
        "passed": slo_passed, "failures": [] if slo_passed else ["tpot_p99 90.000 ms > 50 ms"]}
    return {
        "complete": complete, "incomplete_reason": None if complete else "server_died",
        "summary": {"tpot_ms": {"p50": tpot_ms, "p90": tpot_ms * 1.1},
                    "output_throughput": out_tok_s, "total_throughput": out_tok_s + in_tok_s,
                    "requests_completed": 40},
        "slo": slo, "gpu": {"count": 2},
        "config": {"endpoint": "http://127.0.0.1:9", "gpus": 2},  # --endpoint ... --gpus 2
        "cost": {"available": price is not None, "usd_per_gpu_hour": price},
        "precision_stop": {"stopped_by": "precision", "requests": 40},
    }


def _driver(table):
    """A run_point that answers each level from ``table`` (level -> result) and records the
    levels and rules it was asked for."""
    asked = []

    def run_point(wl, rule):
        level = wl.arrival.concurrency
        asked.append((level, rule))
        # typed as a written result file holds it: the frontier axes derived from the summary
        written = result_of(**{**table[level], "summary": summary_with_axes(table[level])})
        return RunOutcome(written, Path(f"c{level}.json"), Path(f"c{level}.jsonl"))

    return run_point, asked


def _points(levels):
    base = Workload(name="w", input_len=Fixed(8), output_len=Fixed(8), num_requests=None,
                    duration_s=65.0, arrival=Arrival.closed(1), seed=0, source="test")
    return [base.with_overrides(concurrency=int(c)) for c in levels]


def _spec(levels, **kw):
    cfg = RunConfig(frontier=True, concurrency=None, max_concurrency=max(levels), **kw)
    return prepare(cfg, False)[1]


def test_stops_when_a_doubling_gains_under_5_percent():
    levels = [1, 2, 4, 8, 16]
    table = {1: _result(1, 10, 100, 100), 2: _result(2, 11, 190, 190),
             4: _result(4, 13, 330, 330), 8: _result(8, 20, 340, 340)}
    run_point, asked = _driver(table)
    outcomes = []
    doc = run_frontier(_points(levels), _spec(levels), run_point, outcomes)
    assert [a[0] for a in asked] == [1, 2, 4, 8]  # 16 never run
    assert len(outcomes) == 4  # every point measured is kept
    assert doc.stopped_because.startswith("plateaued")
    assert doc.gpus == 2
    assert doc.points[0].output_tok_s_per_gpu == pytest.approx(50.0)
    assert doc.points[0].interactivity == pytest.approx(100.0)
    assert doc.points[0].requests == 40 and doc.points[0].precision
    assert [p.pareto for p in doc.points] == [True, True, True, True]


def test_stops_at_an_slo_break_at_max_sequences_and_when_incomplete():
    table = {1: _result(1, 10, 100, 0, True), 2: _result(2, 12, 200, 0, False)}
    doc = run_frontier(_points([1, 2, 4]), _spec([1, 2, 4]), _driver(table)[0], [])
    assert doc.stopped_because.startswith("slo: the point at 2 breaks tpot_p99")
    table = {1: _result(1, 10, 100, 0), 2: _result(2, 12, 200, 0)}
    doc = run_frontier(_points([1, 2, 4]), _spec([1, 2, 4]), _driver(table)[0], [],
                       max_sequences=3)
    assert doc.stopped_because.startswith("max_sequences")
    table = {1: _result(1, 10, 100, 0), 2: _result(2, 12, 200, 0, complete=False)}
    out = []
    doc = run_frontier(_points([1, 2, 4]), _spec([1, 2, 4]), _driver(table)[0], out)
    assert doc.stopped_because.startswith("incomplete") and len(out) == 2
    assert len(doc.points) == 1


def test_answer_at_target_interpolated_and_out_of_reach():
    table = {1: _result(1, 10, 100, 0, price=2.0), 2: _result(2, 20, 180, 0, price=2.0),
             4: _result(4, 40, 200, 0, price=2.0)}
    doc = run_frontier(_points([1, 2, 4]), _spec([1, 2, 4]), _driver(table)[0], [])
    assert doc.stopped_because.startswith("max_concurrency")
    assert answer(doc, 75.0, None) == []
    a = doc.at_target
    assert a.interpolated and sorted(a.between) == [1.0, 2.0]
    assert 50.0 < a.output_tok_s_per_gpu < 90.0  # between 100 / 2 and 180 / 2 per GPU
    assert a.usd_per_million_output_tokens == pytest.approx(
        2.0 / (a.output_tok_s_per_gpu * 3600 / 1e6))
    problems = answer(doc, 500.0, None)
    assert doc.at_target is None and doc.target.reached is False
    assert "above the front" in problems[0] and "not extrapolated" in problems[0]
    assert "below the front" in answer(doc, 10.0, None)[0]


def test_answer_at_an_slo_none_met():
    table = {1: _result(1, 10, 100, 0, False)}
    doc = run_frontier(_points([1, 2]), _spec([1, 2]), _driver(table)[0], [])
    problems = answer(doc, None, "tpot_p99<=50ms")
    assert doc.at_slo is None and "no measured point meets --slo" in problems[0]


def test_suite_runs_one_frontier_per_member():
    cfg, spec = prepare(RunConfig(frontier=True, suite="nightly", scale="tiny"), False)
    assert spec.loop == "suite" and cfg.load.concurrency is None  # the suite's own points
    a = _points([1, 2])
    b = [w.with_overrides(name="other") for w in _points([1, 2])]
    assert [len(g) for g in member_groups([*a, *b])] == [2, 2]
    table = {1: _result(1, 10, 100, 0), 2: _result(2, 12, 200, 0)}
    run_point, asked = _driver(table)
    out = []
    docs = suite_frontiers([*a, *b], spec, run_point, out, None)
    assert [d.workload for d in docs] == ["w", "other"] and len(out) == 4
    assert all(d.stopped_because.startswith("list") and len(d.points) == 2 for d in docs)


def test_the_written_frontier_leaves_out_what_was_not_asked():
    """The frontier's JSON (``msgspec.to_builtins`` of the typed section, as the result and
    sweep files hold it): the target's keys only for what was asked, the price without the
    market's listing, a suite member's ``workload`` first and no expected cost of its own."""
    price = {"usd_per_hour": 2.0, "kind": "instance",
             "catalog": {"source": "skypilot", "date": "2026-11-30", "age_days": 2}}
    table = {1: {**_result(1, 10, 100, 0, price=2.0), "cost": {"available": True, "price": price}},
             2: _result(2, 20, 180, 0, price=2.0)}
    doc = run_frontier(_points([1, 2]), _spec([1, 2]), _driver(table)[0], [])
    assert doc.price is not None and doc.price.usd_per_hour == 2.0
    answer(doc, None, "tpot_p99<=50ms")
    written = msgspec.to_builtins(doc)
    assert "catalog" not in written["price"] and "workload" not in written
    assert written["target"] == {"slo": "tpot_p99<=50ms"}
    answer(doc, 75.0, None)
    assert list(msgspec.to_builtins(doc)["target"]) == [
        "interactivity", "reached", "front_interactivity"]
    answer(doc, 75.0, "tpot_p99<=50ms")
    target = msgspec.to_builtins(doc)["target"]
    assert list(target) == ["interactivity", "reached", "front_interactivity", "slo"]
    at = msgspec.to_builtins(doc)["at_target"]
    assert at["interpolated"] is True and sorted(at["between"]) == [1.0, 2.0]
    cfg, spec = prepare(RunConfig(frontier=True, suite="nightly", scale="tiny"), False)
    member = suite_frontiers(_points([1, 2]), spec, _driver(table)[0], [], None)[0]
    keys = list(msgspec.to_builtins(member))
    assert keys[0] == "workload" and keys[-1] == "problems"  # no expected cost, no levels
