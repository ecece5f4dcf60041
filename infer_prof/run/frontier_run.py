"""``run --frontier``: the cost-interactivity frontier of one server, found by itself.

One engine launch (or one endpoint). The load doubles, 1, 2, 4, 8, ... streams (closed loop) or
requests/s (open loop: the frontier's variable is the offered rate, doubled from ``--rate``'s
value or 1/s) unless a list is given, each point warmed up and measured as a sweep point is
(by default until precise: :mod:`infer_prof.core.measurement.precision`), until

- ``plateaued``: total throughput rose less than 5 % over the previous point
  (:func:`~infer_prof.core.analysis.frontier.plateaued`);
- ``max_sequences``: the next point would pass the planner's maximum concurrent sequences;
- ``slo``: a point broke an ``--slo``;
- ``max_concurrency`` / ``max_rate`` / ``list``: the ceiling or the given list ran out;
- ``incomplete``: a point did not complete (server died, Ctrl-C).

The answer (``--target-interactivity`` and/or ``--slo``) comes from the pure
:mod:`infer_prof.core.analysis.frontier`: interpolated along the Pareto front, never extrapolated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET

from infer_prof.core.analysis import frontier as pure
from infer_prof.core.analysis.frontier import (
    FrontierPoint,
    at_slo,
    at_target,
    front,
    make_point,
    mark_pareto,
    plateaued,
)
from infer_prof.core.analysis.frontier_axes import gpus_used, point_from_result, run_price
from infer_prof.core.measurement.precision import PrecisionRule
from infer_prof.core.workload.workloads import Workload
from infer_prof.results.cost_sections import Price
from infer_prof.results.document import Result, SloOutcome
from infer_prof.results.frontier_sections import (
    AtTarget,
    Frontier,
    FrontierRow,
    FrontierTarget,
    PrecisionStop,
)
from infer_prof.run.config import ConfigError, RunConfig, validate
from infer_prof.run.record import RunOutcome

#: Highest concurrency a closed-loop frontier tries without --max-concurrency or a plan.
DEFAULT_MAX_CONCURRENCY = 256
#: Highest rate (requests/s) an open-loop frontier tries.
DEFAULT_MAX_RATE = 1024.0
#: A doubling that gains less than this share of total throughput has plateaued.
MIN_GAIN = 0.05


@dataclass(frozen=True)
class FrontierSpec:
    """What the frontier loop runs: ``loop`` closed (levels are streams) or open (requests/s);
    the ``levels`` to try in order; ``ceiling_reason`` when they run out; ``precision`` (None:
    fixed counts, ``--num-requests``/``--duration``); the ``target`` interactivity."""

    loop: str
    levels: tuple[float, ...]
    explicit: bool
    ceiling_reason: str
    precision: PrecisionRule | None
    target: float | None


def doubling(start: float, ceiling: float) -> list[float]:
    """``start, 2 start, 4 start, ...`` up to ``ceiling`` inclusive (``start`` at least)."""
    out = [start]
    while out[-1] * 2 <= ceiling:
        out.append(out[-1] * 2)
    return out


def prepare(cfg: RunConfig, open_loop_workload: bool) -> tuple[RunConfig, FrontierSpec]:
    """Check ``--frontier``'s options (ConfigError, before anything starts) and set the
    configuration's load list to the levels to try (the engine is planned for the highest) and,
    without ``--num-requests``/``--duration``, each point's ceiling in seconds."""
    validate(cfg)  # the options' rules (run/config.py): --find-max, --trace, the target
    if cfg.load.suite:  # each member's own points, one frontier per member (suite_frontiers)
        return cfg, FrontierSpec("suite", (), True, "list: every level given was run", None,
                                 cfg.load.target_interactivity)
    open_loop = bool(cfg.load.rates) or (open_loop_workload and not cfg.load.concurrency)
    given = cfg.load.rates if open_loop else cfg.load.concurrency
    if open_loop:
        ceiling, why = DEFAULT_MAX_RATE, f"max_rate: reached {DEFAULT_MAX_RATE:g} requests/s"
        if given and any(math.isinf(r) for r in given):
            raise ConfigError("--frontier --rate: an infinite rate is no point on a frontier; "
                              "give finite requests/s")
    else:
        cap = cfg.load.max_concurrency
        ceiling = float(cap or DEFAULT_MAX_CONCURRENCY)
        why = (f"max_concurrency: reached --max-concurrency {cap}" if cap else
               f"max_concurrency: reached the default ceiling of {DEFAULT_MAX_CONCURRENCY} "
               "streams")
    explicit = bool(given) and len(given or []) > 1
    if explicit:
        levels = [float(x) for x in given or [] if x <= ceiling]
        if not levels:
            raise ConfigError(f"--frontier: every level of the list is above --max-concurrency "
                              f"{cfg.load.max_concurrency}")
        why = "list: every level given was run"
    else:
        start = float((given or [1])[0])
        if start > ceiling:
            raise ConfigError(f"--frontier: the start {start:g} is above --max-concurrency "
                              f"{cfg.load.max_concurrency}")
        levels = doubling(start, ceiling)
    fixed = (
        cfg.load.num_requests is not None
        or cfg.load.duration_s is not None
        or cfg.prompts.turns is not None
    )
    # open loop: TPOT p50 must be precise; the throughput follows the offered rate
    rule = None if fixed else PrecisionRule(require_throughput=not open_loop)
    new = cfg.with_options(
        concurrency=None if open_loop else [int(x) for x in levels],
        rates=levels if open_loop else None,
        # closed loop: --max-concurrency is the frontier's ceiling, not an in-flight cap
        max_concurrency=cfg.load.max_concurrency if open_loop else None,
        duration_s=cfg.load.duration_s if rule is None else rule.max_seconds + 5.0,
    )
    spec = FrontierSpec(
        "open" if open_loop else "closed",
        tuple(levels),
        explicit,
        why,
        rule,
        cfg.load.target_interactivity,
    )
    return new, spec


def point_of(level: float, result: dict[str, Any]) -> FrontierPoint:
    """The frontier point of one load point's result, placed by
    :func:`~infer_prof.core.analysis.frontier_axes.point_from_result` (the GPUs the engine used, the
    price the point ran with); a point without throughput sits at zero."""
    p = point_from_result(result, level)
    return p if p is not None else make_point(level, None, None, 0.0, 0.0, 1, None)


def gpus_of(result: dict[str, Any]) -> int:
    """GPUs a point's engine used (tensor x pipeline x data parallel; ``--gpus`` for an
    endpoint)."""
    return gpus_used(result)[0]


def price_of(result: dict[str, Any]) -> float | None:
    """USD per GPU-hour the point was priced at, None without a price."""
    return run_price(result)


RunPoint = Callable[[Workload, PrecisionRule | None], RunOutcome]


def run_frontier(
    points: list[Workload],
    spec: FrontierSpec,
    run_point: RunPoint,
    outcomes: list[RunOutcome],
    max_sequences: int | None = None,
    say: Callable[[str], None] = lambda _: None,
    stop_requested: Callable[[], bool] = lambda: False,
) -> Frontier:
    """Run ``points`` (one per level, in order) through ``run_point`` until a stop rule fires
    (module docstring); each outcome is appended to ``outcomes`` as it is measured, so nothing
    measured is lost. ``max_sequences``: the planner's;
    ``stop_requested``: true once a stop signal came (no further point is started).
    Returns the result's ``frontier`` less its answer (:func:`answer` adds it)."""
    fpoints: list[FrontierPoint] = []
    measured: list[tuple[Result, bool | None]] = []  # each point's document, its SLO verdict
    reason = spec.ceiling_reason
    for wl, level in zip(points, spec.levels, strict=True):
        if stop_requested():
            reason = f"interrupted: a stop signal came before the point at {level:g}"
            break
        if spec.loop == "closed" and max_sequences and level > max_sequences:
            reason = (
                f"max_sequences: {level:g} streams would pass the planner's "
                f"{max_sequences} concurrent sequences"
            )
            break
        out = run_point(wl, spec.precision)
        outcomes.append(out)
        doc = out.document
        if not doc.complete:
            why = doc.incomplete_reason
            reason = f"incomplete: the point at {level:g} did not complete ({why})"
            break
        p = point_of(level, out.result)
        fpoints.append(p)
        slo = doc.slo
        measured.append((doc, slo.passed if slo else None))
        say(_line(spec.loop, p, doc.precision_stop))
        if slo and not slo.passed:
            reason = f"slo: the point at {level:g} breaks {_broken(slo)}"
            break
        if len(fpoints) > 1 and not spec.explicit:
            prev = fpoints[-2].total_tok_s_per_gpu
            if plateaued(prev, p.total_tok_s_per_gpu, MIN_GAIN):
                gain = (p.total_tok_s_per_gpu / prev - 1) * 100 if prev > 0 else 0.0
                moved = "rose" if gain >= 0 else "fell"
                reason = (
                    f"plateaued: total throughput {moved} {abs(gain):.1f} % from "
                    f"{fpoints[-2].concurrency:g} to {level:g} (a gain < {MIN_GAIN:.0%})"
                )
                break
    rows = [frontier_row(p, doc, passed)
            for p, (doc, passed) in zip(mark_pareto(fpoints), measured, strict=True)]
    return Frontier(
        points=rows,
        stopped_because=reason,
        at_target=None,
        loop=spec.loop,
        variable="concurrency" if spec.loop == "closed" else "rate (requests/s offered)",
        gpus=gpus_of(outcomes[0].result) if outcomes else 1,
        usd_per_gpu_hour=price_of(outcomes[0].result) if outcomes else None,
        price=price_source(outcomes[0].document) if outcomes else None,
    )


def frontier_row(p: FrontierPoint, doc: Result, slo_passed: bool | None) -> FrontierRow:
    """One measured point of the frontier: ``p``'s axes (tokens/s per user and per GPU, $ per
    1M tokens, Pareto), the requests its result ``doc`` completed, its precision stop, and
    whether it met the SLOs (None without SLOs)."""
    return FrontierRow(
        concurrency=p.concurrency,
        interactivity=p.interactivity,
        interactivity_p90=p.interactivity_p90,
        output_tok_s_per_gpu=p.output_tok_s_per_gpu,
        input_tok_s_per_gpu=p.input_tok_s_per_gpu,
        total_tok_s_per_gpu=p.total_tok_s_per_gpu,
        usd_per_million_output_tokens=p.usd_per_million_output_tokens,
        usd_per_million_input_tokens=p.usd_per_million_input_tokens,
        usd_per_million_total_tokens=p.usd_per_million_total_tokens,
        pareto=p.pareto,
        requests=doc.summary.requests_completed,
        precision=doc.precision_stop,
        slo_passed=slo_passed,
    )


def price_source(doc: Result) -> Price | None:
    """Where the frontier's price came from (the first point's ``cost.price``: cloud, instance
    type, region, tier, source, date, or the seed row / ``--price-per-hour``), None unpriced.
    Every point of one frontier runs with the same price options, so one source holds for all.
    The market's listing (``catalog``) is in each point's result, not repeated: left out."""
    cost = doc.cost
    if cost is None or not cost.available or cost.price is None:
        return None
    return msgspec.structs.replace(cost.price, catalog=UNSET)


def at_section(a: pure.AtTarget) -> AtTarget:
    """The front read at an interactivity (:class:`infer_prof.core.analysis.frontier.AtTarget`)
    as the result's section (``between``: the two loads it lies between, or None)."""
    return AtTarget(
        interactivity=a.interactivity,
        output_tok_s_per_gpu=a.output_tok_s_per_gpu,
        input_tok_s_per_gpu=a.input_tok_s_per_gpu,
        total_tok_s_per_gpu=a.total_tok_s_per_gpu,
        usd_per_million_output_tokens=a.usd_per_million_output_tokens,
        usd_per_million_input_tokens=a.usd_per_million_input_tokens,
        usd_per_million_total_tokens=a.usd_per_million_total_tokens,
        interpolated=a.interpolated,
        between=list(a.between) if a.between is not None else None,
    )


def answer(doc: Frontier, target: float | None, slo_text: str | None) -> list[str]:
    """Set ``target``, ``at_target`` and ``at_slo`` of the frontier ``doc``; return the plain
    lines to say when the target or the SLOs are out of the front's reach."""
    points = [
        FrontierPoint(**{k: getattr(p, k) for k in FrontierPoint.__dataclass_fields__})
        for p in doc.points
    ]
    price = doc.usd_per_gpu_hour
    problems: list[str] = []
    hit: pure.AtTarget | None = None
    doc.target = None
    if target is not None:
        hit = at_target(points, target, price)
        f = front(points)
        lo = f[0].interactivity if f else None
        hi = f[-1].interactivity if f else None
        doc.target = FrontierTarget(
            interactivity=target, reached=hit is not None, front_interactivity=[lo, hi],
            slo=UNSET,
        )
        if hit is None:
            problems.append(_out_of_reach(target, f))
    slo_hit = None
    if slo_text:
        passes = [p.slo_passed is not False for p in doc.points]
        slo_hit = at_slo(points, passes, price)
        if doc.target is None:  # only the SLOs were asked
            doc.target = FrontierTarget(
                interactivity=UNSET, reached=UNSET, front_interactivity=UNSET, slo=slo_text)
        else:
            doc.target.slo = slo_text
        if slo_hit is None:
            problems.append(
                f"no measured point meets --slo {slo_text}: no answer at the SLO "
                "(every point measured is in the result)"
            )
    answered = hit if hit else (slo_hit if slo_hit and target is None else None)
    doc.at_target = at_section(answered) if answered else None
    doc.at_slo = at_section(slo_hit) if slo_hit else None
    return problems


def member_groups(points: list[Workload]) -> list[list[Workload]]:
    """A suite's points split into its members' frontiers: consecutive points of the same
    workload and loop (closed or open) form one."""
    groups: list[list[Workload]] = []
    for w in points:
        if groups and (groups[-1][0].name, groups[-1][0].arrival.mode) == (w.name, w.arrival.mode):
            groups[-1].append(w)
        else:
            groups.append([w])
    return groups


def suite_frontiers(
    points: list[Workload],
    spec: FrontierSpec,
    run_point: RunPoint,
    outcomes: list[RunOutcome],
    slo_text: str | None,
    say: Callable[[str], None] = lambda _: None,
    stop_requested: Callable[[], bool] = lambda: False,
) -> list[Frontier]:
    """``--frontier --suite``: each member's points (as the suite lists them, its counts) run
    as one frontier (the stop rules as for a list); a point that did not complete ends them
    all. Each frontier names its ``workload``; its problems are prefixed with it (no expected
    cost or levels' origin: the run's, not a member's)."""
    docs: list[Frontier] = []
    for group in member_groups(points):
        mode = group[0].arrival.mode
        levels = tuple(
            float(w.arrival.concurrency or 1) if mode == "closed" else float(w.arrival.rate or 0.0)
            for w in group
        )
        member = FrontierSpec(mode, levels, True, spec.ceiling_reason, None, spec.target)
        if stop_requested():
            break
        doc = run_frontier(
            group, member, run_point, outcomes, say=say, stop_requested=stop_requested
        )
        doc.problems = [f"{group[0].name}: {p}" for p in answer(doc, spec.target, slo_text)]
        doc.workload = group[0].name
        doc.expected_cost = doc.levels_from_estimate = UNSET
        docs.append(doc)
        if outcomes and not outcomes[-1].document.complete:
            break
    return docs


def _out_of_reach(target: float, f: list[FrontierPoint]) -> str:
    if not f:
        return (
            f"target {target:g} tokens/s/user: no point has a TPOT (outputs of one token?), "
            "so there is no front to read it from"
        )
    lo, hi = f[0], f[-1]
    if target > float(hi.interactivity or 0):
        return (
            f"target {target:g} tokens/s/user is above the front: even at "
            f"{hi.concurrency:g} the users see {hi.interactivity:.1f}; not extrapolated "
            "(every point measured is in the result)"
        )
    return (
        f"target {target:g} tokens/s/user is below the front's slowest point "
        f"({lo.interactivity:.1f} at {lo.concurrency:g}); it stopped before the load got "
        "that slow; raise --max-concurrency to measure further (not extrapolated)"
    )


def _broken(slo: SloOutcome) -> str:
    return "; ".join(slo.failures or []) or "its SLOs"


def _line(loop: str, p: FrontierPoint, precision: PrecisionStop | None) -> str:
    unit = "streams" if loop == "closed" else "req/s"
    inter = f"{p.interactivity:.1f}" if p.interactivity is not None else "-"
    text = (
        f"frontier: {p.concurrency:g} {unit}: {p.total_tok_s_per_gpu:,.0f} total tok/s/GPU, "
        f"{p.output_tok_s_per_gpu:,.0f} output, {inter} tok/s/user"
    )
    if precision:
        tp = precision.output_throughput.rel_half_width if precision.output_throughput else None
        tq = precision.tpot_p50_ms.rel_half_width if precision.tpot_p50_ms else None
        text += (
            f" (±{(tp or 0) * 100:.1f} % / ±{(tq or 0) * 100:.1f} % after "
            f"{precision.requests} requests, {precision.stopped_by})"
        )
    return text
