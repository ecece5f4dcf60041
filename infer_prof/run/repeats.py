"""``run --repeat N``: each load point measured N times, each repeat an ordinary result (its
own file, its own run in the history: the per-run values a gate judges), tied together by the
result's ``repeats`` section (:class:`infer_prof.results.repeat_sections.Repeats`).

Why N ordinary results and no separate summary document: the history, ``compare``, the gate
and the report already read results; a repeat that is a result needs nothing new from them,
and the group's statistics travel in the result that closes it (from the second repeat on,
each result holds the statistics across the group's repeats so far: a run cut short still
leaves them across what it measured).

The order: round by round, every point of the run once per round (a sweep ``-c 1,8`` with
``--repeat 3`` runs 1, 8, 1, 8, 1, 8). In one server launch by default; with
``--repeat-relaunch`` the runner stops the server and starts it afresh before each round
after the first (:func:`infer_prof.run.runner.execute`), so the spread is the one between
launches, and with the history on :func:`record_launch_spreads` stores each metric's CV
there (``results.history.record_launch_spread``) for ``regress`` to judge against.

The metrics: every column of the metric table's ``gate`` and ``compare`` places, named as the
history names them (``ttft_ms.p50``, ``output_throughput``); the statistics are
:func:`infer_prof.core.analysis.repeats.repeat_stats`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from infer_prof.core.analysis.comparison import finite_number
from infer_prof.core.analysis.repeats import (
    DEFAULT_CONFIDENCE,
    REPEAT_COLUMNS,
    RepeatStats,
    metric_name,
    repeat_stats,
)
from infer_prof.results.comparison_rows import value_at
from infer_prof.results.document import Result
from infer_prof.results.repeat_sections import RepeatMetric, Repeats


def metric_values(results: list[Result]) -> dict[str, list[float]]:
    """Each repeat metric's per-run values over ``results`` (in order), by history name; a
    metric that not every result measured (no price, no energy reading) is left out."""
    out: dict[str, list[float]] = {}
    for col in REPEAT_COLUMNS:
        values = [finite_number(value_at(r, col.path)) for r in results]
        if values and all(v is not None for v in values):
            out[metric_name(col.path)] = [v for v in values if v is not None]
    return out


def across(results: list[Result], confidence: float = DEFAULT_CONFIDENCE) -> dict[str, RepeatStats]:
    """:func:`repeat_stats` of each metric of :func:`metric_values` over ``results``."""
    return {name: repeat_stats(vs, confidence) for name, vs in metric_values(results).items()}


def _section_metric(s: RepeatStats) -> RepeatMetric:
    return RepeatMetric(values=list(s.values), mean=s.mean, sd=s.sd, cv=s.cv, low=s.low,
                        high=s.high)


@dataclass
class RepeatGroup:
    """One load point's repeats so far: the complete ones (counted) and the group's ID."""

    group: str | None = None
    counted: list[Result] = field(default_factory=list)


@dataclass
class RepeatPlan:
    """The repeats of a run: ``count`` rounds, ``relaunch`` or not, one :class:`RepeatGroup`
    per load point (by its position in the run's points)."""

    count: int
    relaunch: bool
    confidence: float = DEFAULT_CONFIDENCE
    groups: dict[int, RepeatGroup] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.count > 1

    def section(self, point: int, index: int, result: Result) -> Result:
        """``result`` (repeat ``index``, 0-based, of point ``point``, not yet written) with its
        ``repeats`` section: the group, and from the second repeat on the statistics across
        the group's complete repeats so far, this one included when complete. Unchanged when
        the run does not repeat."""
        if not self.active:
            return result
        group = self.groups.setdefault(point, RepeatGroup())
        if group.group is None:
            group.group = result.run_id
        counted = group.counted + ([result] if result.complete else [])
        metrics = None
        if index > 0 and counted:
            metrics = {k: _section_metric(s) for k, s in across(counted, self.confidence).items()}
        section = Repeats(group=group.group, index=index + 1, count=self.count,
                          relaunch=self.relaunch, confidence=self.confidence,
                          run_ids=[r.run_id for r in counted], metrics=metrics)
        return msgspec.structs.replace(result, repeats=section)

    def done(self, point: int, result: Result) -> None:
        """Count repeat ``result`` of ``point`` in its group (when it completed)."""
        if self.active and result.complete:
            self.groups.setdefault(point, RepeatGroup()).counted.append(result)


def record_launch_spreads(plan: RepeatPlan, db: str | Path | None) -> list[str]:
    """With ``--repeat-relaunch`` and the history at ``db`` (a location; None: the history is
    off), store each point's launch-to-launch CV of every metric measured on two or more
    complete launches (``results.history.record_launch_spread``, keyed by the configuration's
    fingerprint, replacing an earlier measurement). Returns one line per point that could not
    be stored (the result files are written regardless)."""
    if not (plan.active and plan.relaunch and db is not None):
        return []
    from infer_prof.results import history_database
    from infer_prof.results.history import record_launch_spread
    from infer_prof.results.identity import config_fingerprint

    problems: list[str] = []
    for group in plan.groups.values():
        runs = group.counted
        if len(runs) < 2:
            continue
        fingerprint = config_fingerprint(runs[-1])
        source = (f"run --repeat {plan.count} --repeat-relaunch: {len(runs)} launches, "
                  f"group {group.group}")
        try:
            for name, s in across(runs, plan.confidence).items():
                if s.cv is not None:
                    record_launch_spread(db, fingerprint, name, s.cv, s.n, source=source)
        except (OSError, ValueError, history_database.HistoryError) as exc:
            problems.append(f"launch spread not stored in the history: {exc}")
    return problems
