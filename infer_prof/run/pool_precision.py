"""The precision stop of a point driven over worker processes: the parent's side.

The same rule and statistics as in one client process (:class:`~infer_prof.run.point_precision.
PrecisionStop`, :class:`~infer_prof.core.measurement.precision.PrecisionTracker`), fed from the
workers' tallies (:mod:`infer_prof.loadgen.worker_tally`): each worker bins its token arrivals by
their own receive timestamps into 1 ms bins and sends them, with the TPOT of each measured request
that ended ok, every 0.1 s. The parent, at its own ~0.1 s poll (:meth:`WorkerPool.join`),

- starts the window at the measured phase's shared start (``t0`` of the start gate, or a
  continuous warm-up's opening): the moment the one-process stop's first call stands for;
- adds every bin (at its middle: each token's time is known to ±0.5 ms) and every TPOT;
- checks the rule as of the slowest worker's ``through_ns`` (every token read before it is in),
  so the newest slice is never short of a worker's tokens that are still on their way;
- once precise (or at the rule's ceiling) sets the pool's precise flag: every worker takes no
  more measured requests, exactly as the one-process driver does when its predicate turns
  True (requests in flight finish; a continuous warm-up's cool-down keeps the load on until
  the last measured one ends).

The verdict reaches the workers ~0.1-0.2 s after the data that settles it arrived (a worker's
publish, then the parent's poll), as the one-process stop looks every 0.1 s.
"""

from __future__ import annotations

import queue as queue_mod
import time

import msgspec

from infer_prof.core.measurement.precision import PrecisionRule, PrecisionTracker
from infer_prof.loadgen.worker_tally import BIN_NS
from infer_prof.loadgen.workers import WorkerPool
from infer_prof.results.frontier_sections import PrecisionStop as StopSection

FINAL_WAIT_S = 2.0
"""How long :meth:`PoolPrecision.finish` waits for the workers' last tallies (seconds)."""


class PoolPrecision:
    """The precision stop over a :class:`WorkerPool` whose job has ``precision`` set: call
    :meth:`poll` from the pool's watcher, :meth:`finish` once it has joined."""

    def __init__(self, rule: PrecisionRule, pool: WorkerPool) -> None:
        self.tracker = PrecisionTracker(rule)
        self.pool = pool
        self._through: dict[int, int] = {}  # worker -> its last through_ns
        self._final: set[int] = set()
        self._pending: list[tuple[int, int]] = []  # (arrival ns, tokens) before t0 was known
        self._done = False

    def _t0(self) -> int | None:
        """The measured window's start, from shared memory (None until the workers set it)."""
        sh = self.pool.shared
        t0 = int(sh.warm_open_ns.value if self.pool.job.continuous_warmup else sh.start_ns.value)
        return t0 or None

    def _take(self, msg: tuple[int, int, list[tuple[int, int]], list[float | None], bool]) -> None:
        w, through, bins, tpots, final = msg
        self._through[w] = max(through, self._through.get(w, 0))
        if final:
            self._final.add(w)
        for b, tokens in bins:
            at = b * BIN_NS + BIN_NS // 2
            if self.tracker.t0_ns is None:
                self._pending.append((at, tokens))
            else:
                self.tracker.add_tokens(at, tokens)
        for t in tpots:
            self.tracker.add_request(t)

    def _drain(self, wait_s: float = 0.0) -> None:
        """Take every tally on the queue (waiting up to ``wait_s`` for the first)."""
        q = self.pool.shared.tally
        if q is None:
            return
        while True:
            try:
                msg = q.get(timeout=wait_s) if wait_s > 0 else q.get_nowait()
            except queue_mod.Empty:
                return
            wait_s = 0.0
            self._take(msg)

    def _start(self) -> bool:
        """Start the window once ``t0`` is known (the tokens held back till then added)."""
        if self.tracker.t0_ns is None:
            t0 = self._t0()
            if t0 is None:
                return False
            self.tracker.start(t0)
            for at, tokens in self._pending:
                self.tracker.add_tokens(at, tokens)
            self._pending.clear()
        return True

    def _watermark(self) -> int | None:
        """The time up to which every worker's tokens are in: the slowest live worker's last
        ``through_ns`` (a worker that has sent its last tally holds nothing back)."""
        live = [t for w, t in self._through.items() if w not in self._final]
        if len(self._through) < self.pool.n:
            return None
        return min(live) if live else max(self._through.values(), default=None)

    def poll(self) -> bool:
        """Take the tallies that came, check the rule, and once it is met tell the workers.
        True once the point has measured enough."""
        self._drain()
        if self._done or not self._start():
            return self._done
        at = self._watermark()
        assert self.tracker.t0_ns is not None
        if at is None or at < self.tracker.t0_ns:
            return False
        self._done = self.tracker.check(at)
        if self._done:
            self.pool.measured_enough()
        return self._done

    def finish(self) -> StopSection:
        """The result's ``precision_stop`` section once the pool has joined (its workers' last
        tallies taken, up to :data:`FINAL_WAIT_S`), as :meth:`PrecisionStop.section` gives it."""
        deadline = time.monotonic() + FINAL_WAIT_S
        while len(self._final) < self.pool.n and time.monotonic() < deadline:
            self._drain(wait_s=0.1)
        self._start()
        if self._done:
            return msgspec.convert(self.tracker.to_dict(None), StopSection)
        at = self._watermark()
        block = self.tracker.to_dict(at if at is not None else time.perf_counter_ns())
        return msgspec.convert(block, StopSection)
