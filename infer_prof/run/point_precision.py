"""Measuring a load point until it is precise: the stop predicate the drivers ask before each
measured request, feeding the running records (told of each as it is sent and as it ends) into
a pure :class:`~infer_prof.core.measurement.precision.PrecisionTracker`.

The client's hot path (reading tokens) is untouched: the predicate runs where a driver takes
its next measured request (closed loop) or makes its next send (open loop), and does its work
at most every :data:`POLL_S` seconds; in between it only reads the clock. One client process;
over several, :mod:`infer_prof.run.pool_precision` applies the same rule.
"""

from __future__ import annotations

import time

import msgspec

from infer_prof.core.measurement.precision import PrecisionRule, PrecisionTracker
from infer_prof.loadgen.arrival_tap import ArrivalTap
from infer_prof.results.frontier_sections import PrecisionStop as StopSection
from infer_prof.run.record_spool import RecordSpool

POLL_S = 0.1
"""The predicate reads the records at most this often (seconds)."""


class PrecisionStop:
    """Callable stop predicate over the driver's records (a
    :class:`~infer_prof.run.record_spool.RecordSpool`, whose appends and ends it is told of):
    True once the point's output throughput and TPOT p50 are known to the rule's precision, or
    its ceiling is reached. The window starts at the first call (the driver asks first when it
    takes its first measured request)."""

    def __init__(self, rule: PrecisionRule, records: RecordSpool) -> None:
        self.tracker = PrecisionTracker(rule)
        self._tap = ArrivalTap(self.tracker.add_tokens, self.tracker.add_request)
        self._next_ns = 0
        self._done = False
        records.subscribe(on_append=self._tap.track, on_end=self._tap.ended)

    def __call__(self) -> bool:
        if self._done:
            return True
        now = time.perf_counter_ns()
        if now < self._next_ns:
            return False
        self._next_ns = now + int(POLL_S * 1e9)
        self.tracker.start(now)
        self._tap.read()
        self._done = self.tracker.check(now)
        return self._done

    def section(self) -> StopSection:
        """The result's ``precision_stop`` section (:meth:`PrecisionTracker.to_dict` as its
        declared type), as of now."""
        self._tap.read()
        block = self.tracker.to_dict(time.perf_counter_ns() if not self._done else None)
        return msgspec.convert(block, StopSection)
