"""What a precision stop reads off a point's records while it runs: every output token at its
arrival time (each token-carrying chunk of every request in flight, warm-up and cool-down ones
included) and each completed measured request's TPOT.

A driver tells the tap of each record as it is appended (:meth:`ArrivalTap.track`, before its
request is sent) and as it ends (:meth:`ArrivalTap.ended`); :meth:`ArrivalTap.read` hands on
the chunks that arrived since the last read. The client's token-reading hot path is untouched:
the tap reads the records' ``chunk_ns`` / ``chunk_tokens`` lists when asked (every 0.1 s), not
per token. Used in one client process (:mod:`infer_prof.run.point_precision`) and in each
worker process of a pool (:mod:`infer_prof.loadgen.worker_tally`).
"""

from __future__ import annotations

from collections.abc import Callable

from infer_prof.core.measurement.metrics import RequestRecord, tpot_ns


class ArrivalTap:
    """Token arrivals and completed measured requests of the records it is told of:
    ``on_tokens(arrival_ns, tokens)`` for each token-carrying chunk (once), and
    ``on_request(tpot_ms)`` for each measured request that ended ok (TPOT in ms, None when it
    had <= 1 token)."""

    def __init__(
        self,
        on_tokens: Callable[[int, int], None],
        on_request: Callable[[float | None], None],
    ) -> None:
        self.on_tokens = on_tokens
        self.on_request = on_request
        self._open: dict[int, tuple[RequestRecord, int]] = {}  # id -> (record, chunks read)

    def track(self, rec: RequestRecord) -> None:
        """``rec`` was appended (its request is about to be sent, or ended already)."""
        self._open[id(rec)] = (rec, 0)

    def ended(self, rec: RequestRecord) -> None:
        """A request ended: its last tokens handed on, a measured one counted (its TPOT)."""
        key = id(rec)
        if key not in self._open:
            return
        self._bin(key)
        del self._open[key]
        if not rec.warmup and rec.ok:
            t = tpot_ns(rec)
            self.on_request(None if t is None else t / 1e6)

    def read(self) -> None:
        """Hand on the tokens that arrived since the last read in the requests in flight."""
        for key in list(self._open):
            self._bin(key)

    def _bin(self, key: int) -> None:
        """Hand on the chunks of the record ``key`` that arrived since they were last read."""
        rec, read = self._open[key]
        ns, toks = rec.chunk_ns, rec.chunk_tokens
        n = min(len(ns), len(toks))
        if n < read:  # the stream restarted its chunks (a retried connect)
            read = 0
        for i in range(read, n):
            self.on_tokens(ns[i], toks[i])
        self._open[key] = (rec, n)
