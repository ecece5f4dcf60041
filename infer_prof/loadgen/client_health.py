"""The client's own health while it measures: no garbage-collector pauses (:func:`gc_paused`),
the event loop's lag (:func:`loop_lag_probe`) and how long received data waited before it
was read (:class:`ReadStats`)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage-collector pauses while timing: collect once, freeze what exists, disable the
    collector for the block, then restore it. A full collection of a large heap stalls the
    event loop for tens of milliseconds, long enough for two tokens of a stream to arrive
    together and be timed as one read."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


async def loop_lag_probe(
    samples: list[float], interval_s: float = 0.01, record: Callable[[], bool] = lambda: True
) -> None:
    """Measure the event loop's own lag, forever: how late a ``sleep(interval_s)`` wakes up,
    appended to ``samples`` in ms whenever ``record()`` is true."""
    while True:
        t0 = time.perf_counter()
        await asyncio.sleep(interval_s)
        if record():
            samples.append(max(0.0, (time.perf_counter() - t0 - interval_s) * 1000.0))


@dataclass
class ReadStats:
    """The client's own health: how long received data waited before the loop read it.

    With kernel timestamps a late read does not move a token's timestamp, as long as the next
    token of that stream has not arrived yet: the kernel merges queued segments and keeps the
    newest one's time. Read lag approaching the inter-token gap is therefore the sign that the
    client could not keep up; it is reported with every run.
    """

    read_lag_ns: list[int] = field(default_factory=list)

    @property
    def reads(self) -> int:
        """Reads (``recvmsg`` calls that returned data or end of stream) so far."""
        return len(self.read_lag_ns)
