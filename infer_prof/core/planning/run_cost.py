"""What a measurement is expected to cost before it starts: rented time x the instance's price.

Pure: seconds (from :mod:`infer_prof.core.planning.duration`) and a price in, money out.

    expected wall time = engine start-up + each load point expected to run
                         (its warm-up + measurement: duration.estimate_run)
    expected cost (USD) = expected wall time (s) / 3600 x usd_per_hour

``usd_per_hour`` is what the rented GPUs cost together: the per-GPU price x the GPUs priced
(a named instance: its whole price). A frontier does not run every level it may try: it stops
when total throughput plateaus or the next level passes the planner's maximum of concurrent
sequences (:mod:`infer_prof.run.frontier_run`);
:func:`infer_prof.core.analysis.frontier_levels.expected_levels` applies the same rules
to the predicted throughput of each level, so the expected time counts the levels expected to be
measured, and :attr:`RunCost.at_most_s` every level that may be.

``--max-cost USD`` (:func:`max_cost_refusal`) refuses a run whose expected cost is above it, and
one whose cost cannot be known (no price, or no duration estimate): a limit that cannot be
checked is not passed silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SECONDS_PER_HOUR = 3600.0


def rented_cost(seconds: float, usd_per_hour: float) -> float:
    """USD for ``seconds`` of an instance at ``usd_per_hour`` (all its rented GPUs):
    ``seconds / 3600 x usd_per_hour``."""
    if seconds < 0 or usd_per_hour < 0:
        raise ValueError("seconds and the price must be 0 or more")
    return seconds / SECONDS_PER_HOUR * usd_per_hour


@dataclass(frozen=True)
class RunCost:
    """The expected rented time and cost of a measurement.

    ``startup_s``: the engine's start-up (0 for an endpoint: already running); ``points_s``:
    each load point expected to run, in order (a point measured until precise is counted at
    its ceiling of seconds); ``at_most_s``: start-up plus every level that may run (a
    frontier that does not plateau). ``usd_per_hour``: the rented GPUs together, ``gpus`` of
    them, the price from ``price_source``. ``usd`` / ``at_most_usd`` None, with
    ``unknown`` saying why, when the price or the duration cannot be known."""

    startup_s: float | None
    points_s: tuple[float, ...]
    at_most_s: float | None
    usd_per_hour: float | None
    gpus: int
    price_source: str | None
    unknown: str | None = None

    @property
    def seconds(self) -> float | None:
        """Expected wall time: ``startup_s + sum(points_s)``; None when unknown."""
        if self.startup_s is None:
            return None
        return self.startup_s + sum(self.points_s)

    @property
    def usd(self) -> float | None:
        """Expected cost: :func:`rented_cost` of :attr:`seconds`; None when unknown."""
        s = self.seconds
        if s is None or self.usd_per_hour is None:
            return None
        return rented_cost(s, self.usd_per_hour)

    @property
    def at_most_usd(self) -> float | None:
        """Cost when every level that may run does (:attr:`at_most_s`)."""
        if self.at_most_s is None or self.usd_per_hour is None:
            return None
        return rented_cost(self.at_most_s, self.usd_per_hour)


def sweep_cost(costs: Sequence[RunCost]) -> RunCost:
    """Several runs one after another (``--engine-sweep``: a launch each) as one: start-ups,
    points and the most they may take added; the hourly price the total USD over the total
    hours (configurations on different GPU counts cost differently), so ``usd`` is the sum of
    theirs; unknown when any is."""
    if not costs:
        return RunCost(None, (), None, None, 1, None, "nothing to run")
    first = costs[0]
    unknown = next((c for c in costs if c.seconds is None or c.usd is None), None)
    if unknown is not None:
        return RunCost(None, (), None, first.usd_per_hour, first.gpus, first.price_source,
                       unknown.unknown)
    seconds = sum(c.seconds or 0.0 for c in costs)
    usd = sum(c.usd or 0.0 for c in costs)
    return RunCost(
        sum(c.startup_s or 0.0 for c in costs),
        tuple(s for c in costs for s in c.points_s),
        sum(c.at_most_s or 0.0 for c in costs),
        usd / seconds * SECONDS_PER_HOUR if seconds > 0 else first.usd_per_hour,
        max(c.gpus for c in costs), first.price_source,
    )


def max_cost_refusal(cost: RunCost, max_cost: float | None) -> str | None:
    """The one line refusing the run under ``--max-cost``, None when it may start.

    Refused when the expected cost (:attr:`RunCost.usd`) is above ``max_cost``, and when it
    cannot be known (:attr:`RunCost.unknown`): a limit that cannot be checked is not passed."""
    if max_cost is None:
        return None
    usd = cost.usd
    if usd is None:
        return (
            f"--max-cost {max_cost:g} cannot be checked: the expected cost is unknown "
            f"({cost.unknown}); not started (or drop --max-cost)"
        )
    if usd > max_cost:
        return (
            f"expected cost {usd_text(usd)} ({_minutes(cost.seconds)} at "
            f"${cost.usd_per_hour:.2f}/h) is above --max-cost {max_cost:g}: not started; "
            "raise --max-cost, or measure fewer points (--max-concurrency, --concurrency LIST)"
        )
    return None


def usd_text(usd: float) -> str:
    """``$4.84``; under a cent with two significant digits (``$0.0011``), never ``$0.00``."""
    return f"${usd:.2f}" if usd >= 0.01 or usd == 0 else f"${usd:.2g}"


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "unknown time"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def describe(cost: RunCost) -> str:
    """The line said before the run starts: rented time and expected cost (or why the cost
    is unknown), and the most it may come to when more levels may run."""
    s = cost.seconds
    if s is None:
        return f"expected cost: unknown ({cost.unknown})"
    pts = len(cost.points_s)
    head = (
        f"expected rented time {_minutes(s)} (start-up {_minutes(cost.startup_s)}, "
        f"{pts} point{'s' if pts != 1 else ''})"
    )
    usd = cost.usd
    if usd is None:
        return f"{head}; expected cost: unknown ({cost.unknown})"
    text = (
        f"{head}; expected cost {usd_text(usd)} at ${cost.usd_per_hour:.2f}/h for "
        f"{cost.gpus} GPU{'s' if cost.gpus != 1 else ''} ({cost.price_source})"
    )
    most = cost.at_most_usd
    if most is not None and cost.at_most_s is not None and cost.at_most_s > s * 1.01:
        text += f"; at most {usd_text(most)} ({_minutes(cost.at_most_s)}) if it never plateaus"
    return text
