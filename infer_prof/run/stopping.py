"""How a run is stopped from outside: Ctrl-C (SIGINT), SIGTERM (``kill``, a CI job's timeout,
``kubectl delete``) and SIGHUP (a closed SSH session or terminal) all mean the same, through
one handler (:class:`Stopper`) installed for the whole run:

- the first signal during the load stops sending, cancels the streams in flight, and the point
  is written as an incomplete result with everything measured (``incomplete_reason``
  ``interrupted``); between points it ends the sweep after the point being written; during the
  engine's start-up (nothing measured yet) it unwinds the run like Ctrl-C
  (:class:`RunInterrupted`, a KeyboardInterrupt), and the engine is stopped;
- a second signal while stopping ends the process at once (exit 128 + the signal's number)
  after SIGKILLing the engine's whole process group and the load's worker processes, so that
  nothing is left behind holding a GPU or a port.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class RunInterrupted(KeyboardInterrupt):
    """A stop signal arrived where the run can simply unwind (before or during start-up)."""


class Stopper:
    """The run's handler of :data:`STOP_SIGNALS` (see the module's docstring)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._on_stop: list[Callable[[], None]] = []
        self._kill_now: list[Callable[[], None]] = []
        self._shield = 0

    @property
    def requested(self) -> bool:
        """Whether a stop signal arrived."""
        return self.signum is not None

    @property
    def signal_name(self) -> str | None:
        """``SIGTERM``, ``SIGHUP``, ``SIGINT``, or None."""
        return None if self.signum is None else signal.Signals(self.signum).name

    @contextlib.contextmanager
    def on_stop(self, fn: Callable[[], None]) -> Iterator[None]:
        """While inside, the first signal calls ``fn`` (in the main thread, between two
        bytecodes: it must only set flags or schedule work) instead of unwinding; a signal
        that came before is acted on at once."""
        self._on_stop.append(fn)
        try:
            if self.requested:
                fn()
            yield
        finally:
            self._on_stop.remove(fn)

    @contextlib.contextmanager
    def kill_on_second(self, fn: Callable[[], None]) -> Iterator[None]:
        """While inside, a second signal calls ``fn`` (it must kill without waiting: SIGKILL)
        before the process exits."""
        self._kill_now.append(fn)
        try:
            yield
        finally:
            self._kill_now.remove(fn)

    @contextlib.contextmanager
    def shielded(self) -> Iterator[None]:
        """While inside (measuring, writing results, stopping the engine), the first signal
        is only recorded (and :meth:`on_stop`'s function called), never raised into the code
        that is writing what was measured."""
        self._shield += 1
        try:
            yield
        finally:
            self._shield -= 1

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler."""
        if self.signum is not None:
            self._hard_stop(signum)
        self.signum = signum
        if self._on_stop:
            self._on_stop[-1]()
        elif not self._shield:
            raise RunInterrupted(f"interrupted by {self.signal_name}")

    def _hard_stop(self, signum: int) -> None:
        for fn in reversed(self._kill_now):
            with contextlib.suppress(Exception):
                fn()
        name = signal.Signals(signum).name
        with contextlib.suppress(OSError):
            os.write(
                2,
                f"error: {name} while stopping: stopped at once; engine and client processes "
                "killed, results not yet written are lost\n".encode(),
            )
        os._exit(128 + signum)


_active: list[Stopper] = []


@contextlib.contextmanager
def stop_signals() -> Iterator[Stopper]:
    """Install a :class:`Stopper` for :data:`STOP_SIGNALS` while inside (in the main thread;
    elsewhere nothing is installed and signals keep their handlers); the previous handlers come
    back after. Nested uses share the outer one."""
    if _active:
        yield _active[-1]
        return
    stopper = Stopper()
    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, stopper.handle)
    except ValueError:  # not the main thread: signals cannot be handled here
        pass
    _active.append(stopper)
    try:
        yield stopper
    finally:
        _active.remove(stopper)
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def during_load(
    on_stop: Callable[[], None], kill_now: Callable[[], None] | None = None
) -> Iterator[Stopper]:
    """The load's part: the run's :class:`Stopper` (one installed for this load alone when the
    load is driven outside a run) calls ``on_stop`` on the first signal, ``kill_now`` on a
    second."""
    with stop_signals() as stopper, stopper.shielded(), stopper.on_stop(on_stop):
        if kill_now is None:
            yield stopper
        else:
            with stopper.kill_on_second(kill_now):
                yield stopper
