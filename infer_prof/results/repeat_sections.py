"""The result's ``repeats`` section, as types (part of
:class:`infer_prof.results.document.Result`): a point of ``run --repeat N`` measured N times,
each repeat an ordinary result (and an ordinary run in the history), which says which repeat it
is and, from the second on, each metric's statistics across the group's repeats so far (the
last repeat's file holds them across all N). Made by :mod:`infer_prof.run.repeats`; the
arithmetic is :mod:`infer_prof.core.analysis.repeats`.

Every field has a default, so an older result without the section still loads (None: not
recorded).
"""

from __future__ import annotations

import math

from infer_prof.core.analysis.repeats import RepeatStats
from infer_prof.results.document_base import Section


class RepeatMetric(Section):
    """One metric across the repeats counted: the per-run ``values`` in run order (in the
    metric's unit: ms for a latency statistic, per second for a rate, $ or J), their ``mean``,
    sample standard deviation ``sd`` (n - 1), coefficient of variation ``cv`` (sd / |mean|, a
    fraction) and the Student-t interval of the mean ``[low, high]`` (n - 1 degrees of
    freedom, at the section's ``confidence``). One value: ``sd``, ``cv``, ``low``, ``high``
    are None."""

    values: list[float] = []
    mean: float | None = None
    sd: float | None = None
    cv: float | None = None
    low: float | None = None
    high: float | None = None

    def stats(self, confidence: float) -> RepeatStats:
        """These figures as :class:`~infer_prof.core.analysis.repeats.RepeatStats` (for
        printing)."""
        mean = self.mean if self.mean is not None else math.nan
        return RepeatStats(tuple(self.values), mean, self.sd, self.cv, self.low, self.high,
                           confidence)


class Repeats(Section):
    """Which repeat of its point this result is, and the group's statistics so far.

    ``group``: the run ID of the group's first repeat (shared by every repeat of the point);
    ``index``: this repeat, 1-based, of ``count`` asked for (``--repeat``); ``relaunch``: the
    server was started afresh for each repeat (``--repeat-relaunch``: the spread is between
    launches) or all ran in one launch (within a launch); ``run_ids``: the repeats counted in
    ``metrics`` (complete ones, so far, in run order, this one last when it is complete);
    ``metrics``: by the metric's history name (``ttft_ms.p50``, ``output_throughput``: the
    gate's and compare's metrics), None on the first repeat; ``confidence``: the intervals'
    level (0.95)."""

    group: str | None = None
    index: int | None = None
    count: int | None = None
    relaunch: bool | None = None
    confidence: float | None = None
    run_ids: list[str] = []
    metrics: dict[str, RepeatMetric] | None = None
