"""The result's sections of a frontier run and of a precision stop, as types (part of
:class:`infer_prof.results.document.Result`): ``frontier`` (``run.frontier_run``: carried by the
last point's file of a ``--frontier`` run) and ``precision_stop``
(``core.measurement.precision.PrecisionTracker.to_dict``: a point measured until its
intervals are narrow enough).

Every field has a default, so a result of an older version that lacks one still loads (None:
not recorded). Throughputs are tokens/s per GPU; interactivity tokens/s one user sees;
costs $ per 1M tokens.
"""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from infer_prof.results.cost_sections import Price
from infer_prof.results.document_base import Section


class Interval(Section):
    """An estimate and its 95 % interval (``core.measurement.precision.Interval``), and the
    larger half-width relative to the estimate."""

    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    rel_half_width: float | None = None


class PrecisionBound(Section):
    """A floor or ceiling of a precision stop: requests and seconds."""

    requests: int | None = None
    seconds: float | None = None


class PrecisionStop(Section):
    """A point measured until precise: the rule (the target relative half-width at
    ``confidence``, its floor and ceiling, the batches), why it stopped (``precision``,
    ``max_requests``, ``max_seconds``; None while running), the requests and seconds it took,
    and both intervals (output tokens/s, TPOT p50 in ms) when it stopped."""

    method: str | None = None
    target_rel_half_width: float | None = None
    confidence: float | None = None
    floor: PrecisionBound | None = None
    ceiling: PrecisionBound | None = None
    batches: int | None = None
    throughput_required: bool | None = None
    stopped_by: str | None = None
    reached: bool | None = None
    requests: int | None = None
    seconds: float | None = None
    output_throughput: Interval | None = None
    tpot_p50_ms: Interval | None = None


class FrontierRow(Section):
    """One measured point of the frontier (``core.analysis.frontier.FrontierPoint``, and the
    run's additions): its load (``concurrency``: streams of a closed loop, requests/s offered
    of an open one), interactivity from TPOT p50 / p90, throughputs and costs per GPU, whether
    it is on the Pareto front, the requests it measured, its precision stop and whether it met
    the SLOs (None without SLOs)."""

    concurrency: float | None = None
    interactivity: float | None = None
    interactivity_p90: float | None = None
    output_tok_s_per_gpu: float | None = None
    input_tok_s_per_gpu: float | None = None
    total_tok_s_per_gpu: float | None = None
    usd_per_million_output_tokens: float | None = None
    usd_per_million_input_tokens: float | None = None
    usd_per_million_total_tokens: float | None = None
    pareto: bool | None = None
    requests: int | None = None
    precision: PrecisionStop | None = None
    slo_passed: bool | None = None


class AtTarget(Section):
    """The front read at an interactivity (``core.analysis.frontier.AtTarget``): interpolated
    between two measured loads (``between``), or a measured point (``interpolated`` False)."""

    interactivity: float | None = None
    output_tok_s_per_gpu: float | None = None
    input_tok_s_per_gpu: float | None = None
    total_tok_s_per_gpu: float | None = None
    usd_per_million_output_tokens: float | None = None
    usd_per_million_input_tokens: float | None = None
    usd_per_million_total_tokens: float | None = None
    interpolated: bool | None = None
    between: list[float] | None = None


class FrontierTarget(Section):
    """What the frontier was asked: an interactivity (``--target-interactivity``, tokens/s
    per user), whether the front reaches it and the front's interactivity range (tokens/s per
    user, lowest and highest), and the SLOs (``--slo``) in words. A run asked only one of them
    leaves the other's keys out (``UNSET``: not written; None when read back)."""

    interactivity: float | None | UnsetType = None
    reached: bool | None | UnsetType = None
    front_interactivity: list[float | None] | None | UnsetType = None
    slo: str | None | UnsetType = None


class ExpectedCost(Section):
    """What the run expected the measurement to take, said before it started
    (``core.planning.run_cost.RunCost``): the rented seconds (start-up and each point expected
    to run; ``at_most_s`` every level that may run), the price for the rented GPUs together
    (USD/hour) and where it came from, the expected USD, and why it was unknown (None when
    known). In the order a frontier run has always written them: the plan's figures, then what
    follows from them (``seconds``, ``usd``, ``at_most_usd``)."""

    startup_s: float | None = None
    points_s: list[float] = []
    at_most_s: float | None = None
    usd_per_hour: float | None = None
    gpus: int | None = None
    price_source: str | None = None
    unknown: str | None = None
    seconds: float | None = None
    usd: float | None = None
    at_most_usd: float | None = None


class Frontier(Section):
    """A ``--frontier`` run (``run.frontier_run.run_frontier`` and ``answer``): the points
    measured, why it stopped, the loop and its variable, the GPUs each point used and the price
    per GPU-hour in USD (and where it came from, without the market's listing, which each
    point's result holds: ``price.catalog`` left out), the target and the answers at it and at
    the SLOs, and what could not be answered; what it expected to cost before it started
    (``run.run_cost``) and, with ``--concurrency-from-estimate``, how its levels were chosen
    (``run.frontier_estimate``). A suite member's frontier (``--frontier --suite``) names its
    ``workload`` first and leaves out the expected cost and the levels' origin (``UNSET``: not
    written); a single frontier has no ``workload``."""

    workload: str | UnsetType = UNSET
    points: list[FrontierRow] = []
    stopped_because: str | None = None
    at_target: AtTarget | None = None
    loop: str | None = None
    variable: str | None = None
    gpus: int | None = None
    usd_per_gpu_hour: float | None = None
    price: Price | None = None
    target: FrontierTarget | None = None
    at_slo: AtTarget | None = None
    problems: list[str] = []
    expected_cost: ExpectedCost | None | UnsetType = None
    levels_from_estimate: str | None | UnsetType = None
