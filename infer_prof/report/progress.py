"""Live progress on stderr: a one-line status a person can watch, never on stdout."""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from infer_prof.loadgen.closed_loop import LiveCounters


@dataclass
class ProgressLine:
    """Renders :class:`LiveCounters` as a status line; redraws in place on a terminal, and
    prints a plain line every ``plain_every_s`` seconds otherwise (CI logs)."""

    total: int | None
    duration_s: float | None = None
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    enabled: bool = True
    plain_every_s: float = 5.0
    _last_tokens: int = 0
    _last_t: float = field(default_factory=time.monotonic)
    _last_plain: float = 0.0
    _t0: float = field(default_factory=time.monotonic)
    _rate: float = 0.0

    def status(self, message: str) -> None:
        """A one-off status message (server start-up and the like)."""
        if self.enabled:
            self._write(message, force_plain=True)

    def update(self, c: LiveCounters) -> None:
        """Redraw from the counters: requests done, failed, current output tokens/s."""
        if not self.enabled:
            return
        now = time.monotonic()
        dt = now - self._last_t
        if dt >= 0.5:
            inst = (c.output_tokens - self._last_tokens) / dt
            self._rate = inst if self._rate == 0 else 0.5 * self._rate + 0.5 * inst
            self._last_tokens, self._last_t = c.output_tokens, now
        if c.phase == "warm-up":  # warm-up requests are not the measured ones counted below
            self._write(f"[warm-up] {c.warmup_done} requests  {self._rate:,.0f} tok/s  "
                        f"{now - self._t0:,.1f}s")
            return
        done = c.completed + c.failed
        of = f"/{self.total}" if self.total else ""
        extra = f" of {self.duration_s:g}s" if self.duration_s else ""
        fails = f"  failed {c.failed}" if c.failed else ""
        line = (
            f"[{c.phase}] {done}{of} requests{fails}  {self._rate:,.0f} tok/s  "
            f"{now - self._t0:,.1f}s{extra}"
        )
        self._write(line)

    def finish(self) -> None:
        if self.enabled and self.stream.isatty():
            self.stream.write("\n")
            self.stream.flush()

    def _write(self, line: str, force_plain: bool = False) -> None:
        # a terminal that is gone (an SSH session closed: EIO) must not end the measuring
        with contextlib.suppress(OSError, ValueError):
            self._write_line(line, force_plain)

    def _write_line(self, line: str, force_plain: bool) -> None:
        if self.stream.isatty() and not force_plain:
            self.stream.write("\r\x1b[2K" + line)
        else:
            now = time.monotonic()
            if not force_plain and now - self._last_plain < self.plain_every_s:
                return
            self._last_plain = now
            if self.stream.isatty():
                self.stream.write("\r\x1b[2K")
            self.stream.write(line + "\n")
        self.stream.flush()


@dataclass
class StartupLine:
    """The server's start-up on stderr, so that the terminal is never silent while vLLM starts
    (a minute or more): on a terminal with progress on, a live line redrawn in place (seconds
    since launch, the phase, seconds in it); otherwise (no terminal, or ``--no-progress``) one
    line per phase change."""

    stream: TextIO = field(default_factory=lambda: sys.stderr)
    live: bool = True
    name: str = "vLLM"  # the server starting (its ``label``)
    _drawn: bool = False

    def __post_init__(self) -> None:
        self.live = self.live and self.stream.isatty()

    def phase(self, phase: str, at_s: float) -> None:
        """The start-up entered ``phase`` ``at_s`` seconds after launch."""
        if not self.live:
            self.stream.write(f"{self.name} start-up: {phase} (at {at_s:.1f} s)\n")
            self.stream.flush()

    def tick(self, elapsed_s: float, phase: str, since_s: float) -> None:
        """Redraw the live line (nothing without a terminal)."""
        if self.live:
            self.stream.write(
                f"\r\x1b[2Kstarting {self.name}  {elapsed_s:5.1f} s  {phase} "
                f"({elapsed_s - since_s:.1f} s)"
            )
            self.stream.flush()
            self._drawn = True

    def finish(self) -> None:
        """End the live line (before any other output)."""
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False
