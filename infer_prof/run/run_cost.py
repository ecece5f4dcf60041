"""The rented time and cost a run is expected to take, said before it starts, and ``--max-cost``.

Joins the duration planner (:mod:`infer_prof.core.planning.duration`, through
:mod:`infer_prof.run.preflight`) with the price the run's points will be costed at
(:func:`infer_prof.run.economics.choose_price`: ``--price-per-hour``, ``--instance``, the
market's cheapest instance of the GPU, the seed rows); the arithmetic is
:mod:`infer_prof.core.planning.run_cost`.

- The device: the GPU the run is planned and priced for (``--gpu`` / ``--instance`` or the one
  detected) at the catalog's figures; vLLM-CPU on this machine's cores when vLLM is started
  without a GPU. An ``--endpoint`` is already running: no start-up is counted.
- A frontier counts the levels it is expected to measure
  (:func:`~infer_prof.core.planning.run_cost.expected_levels`: the planner's maximum of
  concurrent sequences, and the plateau of the predicted throughput); a point measured until
  precise counts its ceiling of seconds (30 s + 5 s), so the figure leans high, not low.
- Unknown, and said so: no price (a CPU run, an ``--endpoint`` without ``--gpu``/``--instance``/
  ``--price-per-hour``), a device or model the estimate cannot model (a GPU missing from the
  catalog, the synthetic server, a model without an architecture), ``--find-max`` (its points are
  searched, their number not known before).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from infer_prof.catalog.prices import PriceError, PriceQuote
from infer_prof.core.analysis.frontier_levels import expected_levels
from infer_prof.core.catalog.market import InstanceQuote
from infer_prof.core.planning.duration import DeviceSpeed, PointLoad, gpu_speed
from infer_prof.core.planning.run_cost import (
    RunCost,
    describe,
    max_cost_refusal,
    sweep_cost,
)
from infer_prof.core.workload.workloads import Workload
from infer_prof.results.frontier_sections import ExpectedCost
from infer_prof.run.config import ConfigError, RunConfig
from infer_prof.run.economics import CostOptions, choose_price
from infer_prof.run.frontier_run import MIN_GAIN, FrontierSpec
from infer_prof.run.planning import RunPlan, plan_run
from infer_prof.run.preflight import device_speed, estimate, estimate_loads, say

#: Batch at which an open-loop frontier's capacity is predicted without a planned KV limit.
_OPEN_LOOP_BATCH = 256


def priced_gpus(plan: RunPlan) -> int:
    """The GPUs the run's points are costed for: ``--gpus`` (default 1) for an endpoint, else
    the planned tensor parallel size (else the GPU count the run resolved)."""
    if plan.cfg.engine.endpoint:
        return plan.cfg.engine.gpus or 1
    return plan.plan.gpu_count if plan.plan else plan.gpu_count


def hourly_price(plan: RunPlan) -> tuple[float | None, int, str | None, str | None]:
    """(USD per hour for the rented GPUs together, GPUs priced, where the price comes from,
    why there is none)."""
    cfg = plan.cfg
    gpus = priced_gpus(plan)
    opts = CostOptions(
        cfg.cost.price_per_hour, cfg.cost.provider, cfg.cost.prices_file, cfg.cost.spot,
        instance=cfg.cost.instance, prices_from=cfg.cost.prices_from,
    )
    try:
        quote, count, _ = choose_price(plan.gpu, gpus, opts)
    except (PriceError, ValueError) as exc:
        if plan.gpu or cfg.cost.price_per_hour is not None or cfg.cost.instance:
            return None, gpus, None, str(exc)
        return None, gpus, None, ("no price: no GPU named or detected (give --gpu NAME, "
                                  "--instance CLOUD:TYPE or --price-per-hour USD)")
    return quote.usd_per_hour * count, count, price_words(quote), None


def price_words(quote: PriceQuote | InstanceQuote) -> str:
    """Where a price comes from, short: ``--price-per-hour``, ``aws p5.48xlarge us-east-1
    on-demand``, ``lambda on-demand (seed catalog)``."""
    if isinstance(quote, InstanceQuote):
        return f"{quote.provider} {quote.instance_type} {quote.region} {quote.kind}"
    if quote.kind == "user":
        return "--price-per-hour"
    return f"{quote.provider} {quote.kind}, {quote.source}"


def _device(plan: RunPlan) -> tuple[DeviceSpeed | None, str | None]:
    """The device the estimate models, and why there is none."""
    cfg = plan.cfg
    precision = plan.plan.precision if plan.plan else None
    if cfg.engine.endpoint:
        gpu = plan.gpu
        if gpu is None:
            return None, "the endpoint's GPU is not known (give --gpu NAME)"
        peak = gpu.fp8_tflops if precision == "fp8" and gpu.fp8_tflops else None
        speed = gpu_speed(gpu.key, priced_gpus(plan), gpu.memory_bandwidth_gbps,
                          peak or gpu.bf16_tflops or gpu.fp16_tflops)
        return replace(speed, startup_base_s=0.0, startup_s_per_gb=0.0), None  # running already
    if cfg.engine.server != "vllm":
        return None, f"the {cfg.engine.server} server's speed is not modelled"
    device = device_speed(plan.on_gpu, plan.gpu, plan.gpu_count, precision)
    if device is None:
        return None, "the GPU is not in the catalog (no bandwidth or FLOP/s to estimate with)"
    return device, None


def _point_s(plan: RunPlan, device: DeviceSpeed, w: Workload) -> tuple[float, float] | None:
    """(start-up s, the point's s: warm-up + measurement) of one load point."""
    est = estimate(plan.model, [w], plan.plan, device, plan.cfg.load.timeout_s)
    return None if est is None else (est.startup_s, est.points_s[0])


def _wave_tok_s(plan: RunPlan, device: DeviceSpeed, w: Workload, batch: int) -> float:
    """Predicted total tokens/s of ``batch`` streams: one wave of ``batch`` requests, prompt
    and output tokens over the wave's prefill + decode time."""
    per_request = w.input_len.mean() + w.output_len.mean()
    one = PointLoad(batch, w.input_len.mean(), w.output_len.mean(), concurrency=batch)
    est = estimate_loads(plan.model, [one], plan.plan, device)
    if est is None or est.points_s[0] <= 0:
        return 0.0
    return batch * per_request / est.points_s[0]


def _predicted_tok_s(plan: RunPlan, device: DeviceSpeed, spec: FrontierSpec) -> list[float]:
    """Predicted total tokens/s at each level of the frontier: a closed loop's ``level``
    streams as one wave; an open loop's offered rate x (prompt + output) tokens, capped by the
    capacity at the KV limit (the planner's maximum of sequences, else 256 streams)."""
    w = plan.points[0]
    if spec.loop == "closed":
        return [_wave_tok_s(plan, device, w, max(1, int(level))) for level in spec.levels]
    mem = plan.plan.memory if plan.plan else None
    cap = _wave_tok_s(plan, device, w, mem.max_sequences if mem and mem.max_sequences > 0
                      else _OPEN_LOOP_BATCH)
    per_request = w.input_len.mean() + w.output_len.mean()
    return [min(level * per_request, cap) for level in spec.levels]


def expected_cost(plan: RunPlan, spec: FrontierSpec | None) -> RunCost:
    """The run's expected rented time and cost (module docstring), before it starts."""
    usd_per_hour, gpus, source, no_price = hourly_price(plan)
    cfg = plan.cfg

    def unknown(why: str) -> RunCost:
        return RunCost(None, (), None, usd_per_hour, gpus, source, why)

    if no_price:
        return unknown(no_price)
    if cfg.load.find_max:
        return unknown("--find-max searches its points: how many is not known before")
    device, no_device = _device(plan)
    if device is None:
        return unknown(no_device or "no device")
    timed = [_point_s(plan, device, w) for w in plan.points]
    if any(t is None for t in timed) or not timed:
        return unknown(f"{plan.model.name}: no architecture to estimate the duration with")
    startup = timed[0][0] if timed[0] else 0.0
    all_s = [t[1] for t in timed if t is not None]
    rounds = cfg.load.repeat
    measured = all_s * rounds
    if cfg.load.repeat_relaunch:  # a start-up per round
        startup *= rounds
    if spec is not None and spec.loop in ("closed", "open"):
        mem = plan.plan.memory if plan.plan else None
        n = expected_levels(
            spec.levels, _predicted_tok_s(plan, device, spec),
            mem.max_sequences if mem and mem.max_sequences > 0 else None, MIN_GAIN,
            closed=spec.loop == "closed", explicit=spec.explicit,
        )
        measured = all_s[:n]
        most = expected_levels(  # every level up to the KV limit: no plateau
            spec.levels, [0.0] * len(spec.levels),
            mem.max_sequences if mem and mem.max_sequences > 0 else None,
            closed=spec.loop == "closed", explicit=True,
        )
        all_s = all_s[:most]
    at_most = startup + sum(all_s * rounds)
    return RunCost(startup, tuple(measured), at_most, usd_per_hour, gpus, source)


def expected_section(cost: RunCost) -> ExpectedCost:
    """The expectation as a frontier's ``expected_cost`` section: the plan's seconds (start-up,
    each point, at most), USD/hour for the rented GPUs and its source, why unknown, then the
    expected seconds and USD (:class:`~infer_prof.core.planning.run_cost.RunCost`)."""
    return ExpectedCost(
        startup_s=cost.startup_s,
        points_s=list(cost.points_s),
        at_most_s=cost.at_most_s,
        usd_per_hour=cost.usd_per_hour,
        gpus=cost.gpus,
        price_source=cost.price_source,
        unknown=cost.unknown,
        seconds=cost.seconds,
        usd=cost.usd,
        at_most_usd=cost.at_most_usd,
    )


def check_cost(plan: RunPlan, spec: FrontierSpec | None) -> RunCost | None:
    """Before anything starts: say the expected rented time and cost (``--frontier``, always,
    unknown too; any other run when its cost is known) and refuse the run above
    ``--max-cost`` or with a cost that cannot be known (ConfigError: one line, exit 2).
    Returns the expectation (None when nothing was estimated: no frontier, no limit, and a
    run that is not priced)."""
    cfg = plan.cfg
    limit = cfg.cost.max_cost
    cost = expected_cost(plan, spec)
    if spec is None and limit is None and cost.usd is None:
        return None  # an unpriced plain run: nothing to say
    say(describe(cost))
    refusal = max_cost_refusal(cost, limit)
    if refusal:
        raise ConfigError(refusal)
    return cost


def check_total_cost(runs: Sequence[tuple[str, RunConfig]], max_cost: float | None,
                     what: str) -> RunCost:
    """Several runs made one after another by one command (``--engine-sweep``'s
    configurations, several ``--endpoint``), each planned as it will run (its frontier's levels
    too): their expected costs added (:func:`~infer_prof.core.planning.run_cost.sweep_cost`),
    said, and held to ``max_cost`` before the first starts (ConfigError naming the run a
    planning error came from, or the refusal)."""
    from infer_prof.run.frontier_estimate import frontier_levels  # (it imports frontier_run)

    costs = []
    for name, cfg in runs:
        try:
            spec = None
            if cfg.load.frontier:
                cfg, spec, _ = frontier_levels(cfg)
            costs.append(expected_cost(plan_run(cfg), spec))
        except ConfigError as exc:
            raise ConfigError(f"{name}: {exc}") from None
    total = sweep_cost(costs)
    say(f"{len(costs)} {what}: {describe(total)}")
    refusal = max_cost_refusal(total, max_cost)
    if refusal:
        raise ConfigError(refusal)
    return total
