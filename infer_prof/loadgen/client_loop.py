"""The event loop a client measures in: made, run and released the same way everywhere.

``run`` (one process), each client worker process and ``calibrate`` all drive their streams in
a fresh event loop (uvloop where installed), run their load with the garbage collector paused
(:func:`~infer_prof.loadgen.client_health.gc_paused`), and before closing the loop release its
reader group (:func:`~infer_prof.loadgen.stamped_reader.release_reader_group`: the epoll fd is
closed now, not whenever the collector gets to the loop, and its wake-ups are counted).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from infer_prof.loadgen.client_health import gc_paused
from infer_prof.loadgen.stamped_reader import release_reader_group

T = TypeVar("T")


@dataclass
class ClientLoop:
    """A client's event loop, and after it closed, its reader group's wake-ups (None where no
    group was used: the pure-Python reader, or no stream ran)."""

    loop: asyncio.AbstractEventLoop
    reader_wakeups: int | None = None

    def measure(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` to completion with the garbage collector paused; its result."""
        with gc_paused():
            return self.loop.run_until_complete(coro)


@contextlib.contextmanager
def client_loop(set_current: bool = False) -> Iterator[ClientLoop]:
    """A fresh event loop for a client (uvloop where installed, else asyncio's), released and
    closed on exit, also after an error; ``set_current`` makes it the thread's current loop
    (``asyncio.set_event_loop``), as a worker process needs."""
    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        loop = asyncio.new_event_loop()
    if set_current:
        asyncio.set_event_loop(loop)
    handle = ClientLoop(loop)
    try:
        yield handle
    finally:
        handle.reader_wakeups = release_reader_group(loop)
        loop.close()
