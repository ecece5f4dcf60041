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

Below that scale pacing costs more than it saves: each turn is a loop iteration, and at 128 and
256 streams on the 2-core machine 8 per turn held every wave's sends for 12-40 ms (queue p99),
where letting them all through at once kept the reads' lag p99 at 0.8-5.5 ms and the queue under
0.5 ms. The closed loop therefore paces only a process with more than :data:`PACE_ABOVE_STREAMS`
streams (at 1024 unpaced, read lag p99 reached 17-40 ms).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

#: Sends (or request endings) per event-loop turn: at ~100 us each, 8 keep a turn under ~1 ms.
SENDS_PER_TURN = 8
#: A closed loop of at most this many streams (per client process) is not paced.
PACE_ABOVE_STREAMS = 256


def per_turn_for(streams: int) -> int:
    """Sends (and request endings) per turn for a closed loop of ``streams`` streams:
    :data:`SENDS_PER_TURN` above :data:`PACE_ABOVE_STREAMS`, else ``2 x streams`` (every stream
    ending and sending in one turn: nobody ever waits)."""
    return SENDS_PER_TURN if streams > PACE_ABOVE_STREAMS else max(1, 2 * streams)


class SendPacer:
    """At most ``per_turn`` callers of :meth:`turn` pass per event-loop turn; the rest wait, in
    arrival order, for later turns (between which the loop reads every ready socket)."""

    def __init__(self, per_turn: int = SENDS_PER_TURN) -> None:
        if per_turn < 1:
            raise ValueError(f"per_turn must be >= 1, got {per_turn}")
        self.per_turn = per_turn
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
        if self.used < self.per_turn and not self.waiters:
            self.used += 1
            return True
        self.waited += 1
        return False

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
        self.used = 0
        while self.waiters and self.used < self.per_turn:
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
            self._turn_scheduled = False
