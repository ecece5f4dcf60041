"""A worker process's side of the precision stop over a pool (the parent's side is
:mod:`infer_prof.run.pool_precision`): what the worker's requests delivered, sent to the parent
in small batches.

Each worker reads its own records with an :class:`~infer_prof.loadgen.arrival_tap.ArrivalTap`
at its 0.1 s publish (the same tick that publishes its counters; never per token), bins the
token arrivals by their own receive timestamps into :data:`BIN_NS` (1 ms) bins, and puts one
message on the pool's tally queue: ``(worker, through_ns, [(bin, tokens), ...], [tpot_ms,
...], final)``. ``through_ns`` is when it read: every chunk its event loop had read by then is
in this or an earlier message, so the parent knows the window up to the slowest worker's
``through_ns`` is complete. ``final``: the worker's last message (its load has ended; it sends
nothing more).

Binning in the worker, not at the parent's poll: the parent sees the summed token counter only
as each worker publishes it (every 0.1 s) and as it polls (every 0.1 s), so counts binned there
would be misplaced by up to ~0.2 s, against batch-means slices of 0.5 s at the 5 s floor (10
slices): far too coarse. Binned here, each token keeps its arrival time to within 1 ms, and a
message is about a hundred (bin, tokens) pairs, whatever the token rate.
"""

from __future__ import annotations

import time
from typing import Any

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen.arrival_tap import ArrivalTap

BIN_NS = 1_000_000
"""Resolution (ns) of the token arrival times a worker sends: a token's time is the start of
its 1 ms bin (the parent adds half a bin)."""


class WorkerTally:
    """One worker's token arrivals and completed measured requests, put on ``queue`` (a
    ``multiprocessing`` queue) by :meth:`publish`. :meth:`sink` wraps the worker's record list
    so each record appended is tracked; set ``LiveCounters.on_end`` to :meth:`ended`."""

    def __init__(self, worker: int, queue: Any) -> None:
        self.worker = worker
        self.queue = queue
        self._bins: dict[int, int] = {}
        self._tpots: list[float | None] = []
        self._tap = ArrivalTap(self._tokens, self._request)
        self.ended = self._tap.ended

    def _tokens(self, arrival_ns: int, tokens: int) -> None:
        b = arrival_ns // BIN_NS
        self._bins[b] = self._bins.get(b, 0) + tokens

    def _request(self, tpot_ms: float | None) -> None:
        self._tpots.append(tpot_ms)

    def sink(self, records: list[RequestRecord]) -> TalliedRecords:
        """``records`` as a record sink whose appends this tally tracks."""
        return TalliedRecords(records, self._tap)

    def publish(self, final: bool = False) -> None:
        """Read the records and put what arrived since the last message on the queue (nothing
        when nothing did, unless ``final``)."""
        through = time.perf_counter_ns()
        self._tap.read()
        if not (self._bins or self._tpots or final):
            return
        bins, tpots = sorted(self._bins.items()), self._tpots
        self._bins, self._tpots = {}, []
        self.queue.put((self.worker, through, bins, tpots, final))


class TalliedRecords:
    """A record sink over a list whose appends an :class:`ArrivalTap` is told of."""

    def __init__(self, records: list[RequestRecord], tap: ArrivalTap) -> None:
        self.records = records
        self._tap = tap

    def append(self, rec: RequestRecord, /) -> None:
        self.records.append(rec)
        self._tap.track(rec)
