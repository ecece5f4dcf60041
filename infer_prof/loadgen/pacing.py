"""Keep bursts of new requests from starving the reads of streams already running.

A token's time comes from the kernel, so a read that is late does not move it, unless the read
is so late that the stream's next token has arrived too: the kernel then merges the two and keeps
the later time, and a gap of one inter-token interval is lost. Reads therefore must not wait
longer than about one inter-token gap.

In a closed loop with equal output lengths the streams finish together: at concurrency 512 about
500 requests end within a few tens of ms, and each costs the client ~100 us to finish, build and
send its successor. Sent back to back, that is 50 ms in which no stream is read. :class:`SendPacer`
lets at most ``per_turn`` sends through per turn of the event loop; the loop polls the sockets
between turns. The wait is part of the request's queue time (send - scheduled), which is
reported; TTFT starts at the send and is not affected.

The end of a request costs as much again (parsing the final events, waking the stream's task),
and the streams end together too: at 1024 streams the client measured a 33 ms stall there, long
enough to merge the first two tokens of the requests just sent. The stream client therefore also
passes a response's final read through :meth:`SendPacer.run` (its time was taken when it
arrived; only the parsing waits).

A count alone binds too early where sends are cheap and too late where they are dear: at 256
streams on a 2-core machine shared with other work, 8 per turn held requests for 100-300 ms at
every wave's end. The closed loop's pacer therefore also has a time budget: it measures what a
paced caller costs (wall time between turns over the callers that passed, an upper bound since
the reads in between count too; a moving average) and lets ``turn_budget_s / cost`` callers
through per turn when that is more than ``per_turn`` (:data:`TURN_BUDGET_S`, 2 ms: a read delayed
that long keeps its kernel time, and merges with the next token only where tokens come less than
2 ms apart).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

#: Sends (or request endings) per event-loop turn: at ~100 us each, 8 keep a turn under ~1 ms.
SENDS_PER_TURN = 8
#: Wall time a turn's paced work may take before later callers wait for the next turn (s).
TURN_BUDGET_S = 0.002
#: The most callers one turn lets through however cheap they measure.
MAX_PER_TURN = 64


class SendPacer:
    """At most ``per_turn`` callers of :meth:`turn` pass per event-loop turn, or more while the
    turn's paced work has taken less than ``turn_budget_s`` (0: no time budget, the count
    alone); the rest wait, in arrival order, for later turns (between which the loop reads
    every ready socket)."""

    def __init__(self, per_turn: int = SENDS_PER_TURN, turn_budget_s: float = 0.0) -> None:
        if per_turn < 1:
            raise ValueError(f"per_turn must be >= 1, got {per_turn}")
        if turn_budget_s < 0:
            raise ValueError(f"turn_budget_s must be >= 0, got {turn_budget_s}")
        self.per_turn = per_turn
        self.budget_ns = int(turn_budget_s * 1e9)
        self.cost_ns = 0  # moving average of one paced caller's cost (0: not measured yet)
        self.allowance = per_turn  # callers per turn now
        self._last_turn_ns = 0  # when the previous turn's releases were done (0: none running)
        self.used = 0
        self.waiters: deque[asyncio.Future[None] | Callable[[], None]] = deque()
        self._turn_scheduled = False
        self.waited = 0  # callers that had to wait at least one turn (for health reports)

    def _take(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Take one unit of this turn's budget if there is room and nobody is queued; else
        count the caller as one that waits. Either way, make sure turns keep coming."""
        if not self._turn_scheduled:
            self._turn_scheduled = True
            loop.call_soon(self._next_turn, loop)
        if not self.waiters and self._room():
            self.used += 1
            return True
        self.waited += 1
        return False

    def _room(self) -> bool:
        """Whether one more caller may pass in this turn (``used`` already passed)."""
        return self.used < self.allowance

    def _measure(self, now_ns: int) -> None:
        """Update the cost per caller from the turn that just ended: its wall time (from the
        start of the previous turn's releases, whose deferred calls run inline, to now) over
        the callers that passed in it; allow ``budget / cost`` callers per turn, at least
        ``per_turn`` and at most :data:`MAX_PER_TURN`."""
        if not self.budget_ns:
            return
        if self._last_turn_ns and self.used:
            c = (now_ns - self._last_turn_ns) // self.used
            self.cost_ns = c if not self.cost_ns else (3 * self.cost_ns + c) // 4
        if self.cost_ns:
            fit = self.budget_ns // max(1, self.cost_ns)
            self.allowance = max(self.per_turn, min(MAX_PER_TURN, fit))

    async def turn(self) -> None:
        """Return when this caller may send."""
        loop = asyncio.get_running_loop()
        if self._take(loop):
            return
        fut: asyncio.Future[None] = loop.create_future()
        self.waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut in self.waiters:
                self.waiters.remove(fut)
            raise

    def run(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` now if this turn has room, else in a later turn (in arrival order,
        sharing the per-turn budget with :meth:`turn`)."""
        if self._take(asyncio.get_running_loop()):
            fn()
        else:
            self.waiters.append(fn)

    def _next_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        # runs once per loop turn, after the loop has polled the sockets
        now = time.perf_counter_ns() if self.budget_ns else 0
        self._measure(now)
        self._last_turn_ns = now
        self.used = 0
        while self.waiters and self._room():
            w = self.waiters.popleft()
            if isinstance(w, asyncio.Future):
                if not w.done():
                    w.set_result(None)
                    self.used += 1
            else:
                self.used += 1
                try:
                    w()
                except Exception as exc:  # one bad callback must not stop every later send
                    loop.call_exception_handler(
                        {"message": "paced callback failed", "exception": exc}
                    )
        if self.waiters or self.used:
            loop.call_soon(self._next_turn, loop)
        else:
            self._last_turn_ns = 0  # idle: the next turn's wall time is not the callers' cost
            self._turn_scheduled = False
