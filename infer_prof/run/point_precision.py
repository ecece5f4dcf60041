"""Measuring a load point until it is precise: the stop predicate the drivers ask before each
measured request, feeding the running records (told of each as it is sent and as it ends) into
a pure :class:`~infer_prof.core.precision.PrecisionTracker`.

The client's hot path (reading tokens) is untouched: the predicate runs where a driver takes
its next measured request (closed loop) or makes its next send (open loop), and does its work
at most every :data:`POLL_S` seconds; in between it only reads the clock.
"""

from __future__ import annotations

import time
from typing import Any

from infer_prof.core.metrics import RequestRecord, tpot_ns
from infer_prof.core.precision import PrecisionRule, PrecisionTracker
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
        self._open: dict[int, tuple[RequestRecord, int]] = {}  # id -> (record, chunks read)
        self._next_ns = 0
        self._done = False
        records.subscribe(on_append=self._track, on_end=self._ended)

    def __call__(self) -> bool:
        if self._done:
            return True
        now = time.perf_counter_ns()
        if now < self._next_ns:
            return False
        self._next_ns = now + int(POLL_S * 1e9)
        self.tracker.start(now)
        self._read()
        self._done = self.tracker.check(now)
        return self._done

    def _track(self, rec: RequestRecord) -> None:
        self._open[id(rec)] = (rec, 0)

    def _bin(self, key: int) -> RequestRecord:
        """Bin the tokens of the record ``key`` that arrived since they were last read."""
        rec, read = self._open[key]
        ns, toks = rec.chunk_ns, rec.chunk_tokens
        n = min(len(ns), len(toks))
        if n < read:  # the stream restarted its chunks (a retried connect)
            read = 0
        for i in range(read, n):
            self.tracker.add_tokens(ns[i], toks[i])
        self._open[key] = (rec, n)
        return rec

    def _ended(self, rec: RequestRecord) -> None:
        """A request ended: its last tokens binned, a measured one counted (its TPOT)."""
        key = id(rec)
        if key not in self._open:
            return
        self._bin(key)
        del self._open[key]
        if not rec.warmup and rec.ok:
            t = tpot_ns(rec)
            self.tracker.add_request(None if t is None else t / 1e6)

    def _read(self) -> None:
        """Bin the tokens that arrived since the last read in the requests in flight."""
        for key in list(self._open):
            self._bin(key)

    def to_dict(self) -> dict[str, Any]:
        """The point's ``precision`` block (see :meth:`PrecisionTracker.to_dict`), as of now."""
        self._read()
        return self.tracker.to_dict(time.perf_counter_ns() if not self._done else None)
