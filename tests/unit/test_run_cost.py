"""The expected rented time and cost of a run, before it starts (core/planning/run_cost.py and
run/run_cost.py): the arithmetic by hand, the frontier's expected levels, --max-cost's verdicts,
and a run's expectation built from its plan (an endpoint: nothing is contacted)."""

from __future__ import annotations

import pytest

from infer_prof.core.analysis.frontier_levels import expected_levels
from infer_prof.core.planning.run_cost import (
    RunCost,
    describe,
    max_cost_refusal,
    rented_cost,
    sweep_cost,
)
from infer_prof.run.config import RunConfig
from infer_prof.run.frontier_run import prepare
from infer_prof.run.load_points import base_workload
from infer_prof.run.planning import plan_run
from infer_prof.run.run_cost import expected_cost


def test_rented_cost_is_hours_times_the_hourly_price() -> None:
    assert rented_cost(1800.0, 2.0) == pytest.approx(1.0)  # half an hour at $2/h
    assert rented_cost(90.0, 55.04) == pytest.approx(55.04 * 90 / 3600)
    with pytest.raises(ValueError):
        rented_cost(-1.0, 2.0)


def test_expected_levels_stop_where_the_frontier_would() -> None:
    levels = [1.0, 2.0, 4.0, 8.0, 16.0]
    # 100 -> 200 -> 400 -> 410 (+2.5 %: plateaued, the 8 is measured) -> 16 not run
    assert expected_levels(levels, [100, 200, 400, 410, 800]) == 4
    assert expected_levels(levels, [100, 200, 400, 800, 1600]) == 5  # never plateaus
    assert expected_levels(levels, [100, 200, 400, 800, 1600], max_sequences=5) == 3
    assert expected_levels(levels, [100, 200, 400, 800, 1600], max_sequences=0.5) == 0
    # an open loop's rates are no sequences; a list given runs every level
    assert expected_levels(levels, [1] * 5, max_sequences=2, closed=False, explicit=True) == 5
    assert expected_levels(levels, [1] * 5, explicit=True) == 5
    with pytest.raises(ValueError):
        expected_levels(levels, [1.0])


def test_run_cost_sums_start_up_and_points() -> None:
    c = RunCost(120.0, (35.0, 35.0, 50.0), 400.0, 8.0, 2, "--price-per-hour")
    assert c.seconds == 240.0
    assert c.usd == pytest.approx(240 / 3600 * 8.0)
    assert c.at_most_usd == pytest.approx(400 / 3600 * 8.0)
    line = describe(c)
    assert "4.0 min" in line and "$0.53" in line and "3 points" in line
    assert "at most $0.89" in line and "2 GPUs" in line
    unknown = RunCost(None, (), None, None, 1, None, "no price")
    assert unknown.usd is None and describe(unknown) == "expected cost: unknown (no price)"


def test_max_cost_refuses_above_the_limit_and_when_it_cannot_be_checked() -> None:
    c = RunCost(0.0, (1800.0,), 1800.0, 2.0, 1, "--price-per-hour")  # $1.00
    assert max_cost_refusal(c, None) is None
    assert max_cost_refusal(c, 1.0) is None  # at the limit: allowed
    refusal = max_cost_refusal(c, 0.5)
    assert refusal is not None and "$1.00" in refusal and "--max-cost 0.5" in refusal
    tiny = RunCost(0.0, (2.0,), 2.0, 2.0, 1, "--price-per-hour")  # $0.0011
    assert "$0.0011" in (max_cost_refusal(tiny, 0.0001) or "")
    unknown = RunCost(None, (), None, None, 1, None, "no price")
    said = max_cost_refusal(unknown, 100.0)
    assert said is not None and "cannot be checked" in said and "no price" in said


def _plan(**options):
    cfg = RunConfig(model="llama-2-7b", endpoint="http://127.0.0.1:9", input_len=16,
                    output_len=16, history=False, frontier=True, **options)
    cfg, spec = prepare(cfg, base_workload(cfg).arrival.mode == "open")
    return plan_run(cfg), spec


def test_an_endpoint_frontier_costs_its_points_at_the_gpus_price() -> None:
    plan, spec = _plan(gpu="H100-SXM", price_per_hour=2.0, concurrency=[1, 2], num_requests=8)
    c = expected_cost(plan, spec)
    assert c.unknown is None and c.startup_s == 0.0  # an endpoint is running already
    assert len(c.points_s) == 2 and c.gpus == 1 and c.usd_per_hour == 2.0
    assert c.usd == pytest.approx(sum(c.points_s) / 3600 * 2.0)
    # until precise: each point counts its ceiling (30 s + 5 s and one wave)
    plan, spec = _plan(gpu="H100-SXM", price_per_hour=2.0, max_concurrency=4)
    c = expected_cost(plan, spec)
    assert len(c.points_s) == 3 and all(35.0 <= s < 36.0 for s in c.points_s)


def test_no_gpu_no_price_the_cost_is_unknown_and_says_why() -> None:
    plan, spec = _plan(concurrency=[1, 2], num_requests=8)
    c = expected_cost(plan, spec)
    assert c.usd is None and c.unknown is not None and "--price-per-hour" in c.unknown
    plan, spec = _plan(price_per_hour=2.0, concurrency=[1, 2], num_requests=8)
    c = expected_cost(plan, spec)  # priced, but the endpoint's GPU (its speed) is unknown
    assert c.usd is None and c.unknown is not None and "--gpu" in c.unknown


def test_an_engine_sweep_adds_its_configurations() -> None:
    one = RunCost(100.0, (35.0,), 200.0, 2.0, 1, "--price-per-hour")  # 135 s at $2/h
    two = RunCost(100.0, (35.0, 35.0), 300.0, 4.0, 2, "--price-per-hour")  # 170 s at $4/h
    total = sweep_cost([one, two])
    assert total.seconds == pytest.approx(305.0) and len(total.points_s) == 3
    assert total.usd == pytest.approx(135 / 3600 * 2 + 170 / 3600 * 4)
    assert total.gpus == 2 and total.at_most_s == 500.0
    unknown = RunCost(None, (), None, None, 1, None, "no price")
    assert sweep_cost([one, unknown]).unknown == "no price"
