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

from infer_prof.core.measurement.bounded_samples import BoundedSamples


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


LOOP_LAG_EXACT_CAP = 1 << 16
"""Event-loop lag samples kept exactly (one per ``interval_s``: 11 minutes at 10 ms), then the
bounded histogram (:class:`~infer_prof.core.measurement.bounded_samples.BoundedSamples`)."""


def loop_lag_samples() -> BoundedSamples:
    """The bounded store :func:`loop_lag_probe` fills (exact for the first
    :data:`LOOP_LAG_EXACT_CAP` samples)."""
    return BoundedSamples(exact_cap=LOOP_LAG_EXACT_CAP)


async def loop_lag_probe(
    samples: BoundedSamples, interval_s: float = 0.01, record: Callable[[], bool] = lambda: True
) -> None:
    """Measure the event loop's own lag, until cancelled: how late a ``sleep(interval_s)``
    wakes up, in ms, added to ``samples`` whenever ``record()`` is true (in batches of 256;
    the rest when cancelled)."""
    batch: list[float] = []
    try:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(interval_s)
            if record():
                batch.append(max(0.0, (time.perf_counter() - t0 - interval_s) * 1000.0))
                if len(batch) >= 256:
                    samples.add_many(batch)
                    batch.clear()
    finally:
        samples.add_many(batch)


#: Read-lag samples the readers append before they are folded into the bounded summary.
SETTLE_EVERY = 1024


@dataclass
class ReadStats:
    """The client's own health: how long received data waited before the loop read it.

    With kernel timestamps a late read does not move a token's timestamp, as long as the next
    token of that stream has not arrived yet: the kernel merges queued segments and keeps the
    newest one's time. Read lag approaching the inter-token gap is therefore the sign that the
    client could not keep up; it is reported with every run.

    The readers append each read's lag (ns) to ``read_lag_ns``; :meth:`settle` (after each
    request, off the read path) folds them into ``lag``, a
    :class:`~infer_prof.core.measurement.bounded_samples.BoundedSamples`: exact up to its cap, a
    histogram of stated relative error past it, so a long run holds bounded memory.
    """

    read_lag_ns: list[int] = field(default_factory=list)
    lag: BoundedSamples = field(default_factory=BoundedSamples)

    def settle(self, at_least: int = SETTLE_EVERY) -> None:
        """Fold the pending samples into :attr:`lag` once there are ``at_least`` of them
        (0: all of them, now). The list is emptied in place: the readers hold it."""
        pending = self.read_lag_ns
        if pending and len(pending) >= at_least:
            self.lag.add_many(pending)
            del pending[:]

    @property
    def reads(self) -> int:
        """Reads (``recvmsg`` calls that returned data or end of stream) so far."""
        return self.lag.count + len(self.read_lag_ns)

    def summary_ms(self) -> dict[str, object] | None:
        """Every read's lag so far, summarized in ms (exact while :attr:`exact`)."""
        self.settle(0)
        return self.lag.summary_dict(1e-6)

    @property
    def exact(self) -> bool:
        """Whether the read-lag summary is exact (see :class:`BoundedSamples`)."""
        return self.lag.exact
