"""vLLM's start-up phases, read from its server log. Pure (no I/O): lines in, phases out.

A phase starts when the first line that announces it appears in the log (vLLM 0.26 on GPU and
0.32 on CPU write the same messages; the source of each marker is named below). Phases only move
forward: a later line of an earlier phase (a compile log during CUDA-graph capture) does not
move the start-up back. The phases, in order:

``starting``               the launch: Python imports, argument parsing, the API server's setup
``initializing engine``    the engine process is up ("Initializing a V1 LLM engine", core.py):
                           spawning workers, distributed set-up
``loading weights``        "Starting to load model" (gpu_model_runner.py / cpu_model_runner.py)
``compiling``              torch.compile and the memory-profiling run: "Model loading took"
                           (GPU), "Warming up model for the compilation" (CPU), or a compile line
                           ("Starting torch.compile", "Dynamo bytecode transform time", ...)
``allocating KV cache``    "Available KV cache memory" (gpu_worker.py), "... GiB for KV cache on
                           node" (cpu_worker.py), "KV cache size: N tokens" (kv_cache_utils.py)
``capturing CUDA graphs``  the "Capturing CUDA graphs" progress bar (gpu_model_runner.py)
``starting API server``    "init engine (profile, create kv cache, warmup model) took"
                           (core.py), "Starting vLLM (API) server" (the API server's entry point)
``ready``                  "Application startup complete." (uvicorn)

Durations are differences of phase starts, in seconds; the last phase lasts until the server
answered ``/health`` (``total_s``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from infer_prof.servers.base import PhaseChange
from infer_prof.servers.vllm_log import parse_line, split_lines

__all__ = ["PHASES", "PhaseChange", "StartupPhases", "phase_marker", "phases_from_log",
           "startup_dict"]

PHASES: tuple[str, ...] = (
    "starting",
    "initializing engine",
    "loading weights",
    "compiling",
    "allocating KV cache",
    "capturing CUDA graphs",
    "starting API server",
    "ready",
)

_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("initializing engine", re.compile(r"Initializing a V1 LLM engine")),
    ("loading weights", re.compile(r"Starting to load model")),
    (
        "compiling",
        re.compile(
            r"Model loading took|Warming up model for the compilation|Starting torch\.compile"
            r"|Dynamo bytecode transform time|for vLLM's torch\.compile|Compiling a graph for"
            r"|Directly load the compiled graph"
        ),
    ),
    (
        "allocating KV cache",
        re.compile(r"Available KV cache memory|GiB for KV cache on node|KV cache size: [\d,]+ tok"),
    ),
    ("capturing CUDA graphs", re.compile(r"Capturing CUDA graphs")),
    (
        "starting API server",
        re.compile(r"init engine \(profile, create kv cache|Starting vLLM (?:API )?server"),
    ),
    ("ready", re.compile(r"Application startup complete")),
)
_RANK = {name: i for i, name in enumerate(PHASES)}


def phase_marker(line: str) -> str | None:
    """The phase a log line announces, or None."""
    text = parse_line(line).text
    for name, pattern in _MARKERS:
        if pattern.search(text):
            return name
    return None


@dataclass
class StartupPhases:
    """Follows a server log as it grows: :meth:`feed` it each new chunk of text with the
    seconds since launch at which it was read; it returns the phase changes that chunk made."""

    changes: list[PhaseChange] = field(default_factory=lambda: [PhaseChange("starting", 0.0)])
    _partial: str = ""

    @property
    def current(self) -> str:
        return self.changes[-1].phase

    @property
    def current_since_s(self) -> float:
        return self.changes[-1].at_s

    def feed(self, at_s: float, chunk: str) -> list[PhaseChange]:
        """Take new log text read at ``at_s``; a line not yet ended waits for the next chunk
        (a progress bar's carriage return ends a line)."""
        text = self._partial + chunk
        parts = re.split(r"[\r\n]", text)
        self._partial = parts.pop()
        return self.feed_lines(at_s, parts)

    def feed_lines(self, at_s: float, lines: Iterable[str]) -> list[PhaseChange]:
        """Take complete lines seen at ``at_s``."""
        new: list[PhaseChange] = []
        for line in lines:
            phase = phase_marker(line)
            if phase is not None and _RANK[phase] > _RANK[self.current]:
                change = PhaseChange(phase, max(at_s, self.current_since_s))
                self.changes.append(change)
                new.append(change)
        return new

    def to_dict(self, total_s: float | None) -> dict[str, Any]:
        """``{"total_s", "phases": [{"name", "start_s", "duration_s"}], "source"}``; phases
        before ``ready``, the last one lasting until ``total_s`` (None when the start-up did not
        finish: then the last phase's duration is null)."""
        return startup_dict(self.changes, total_s)


LIVE_SOURCE = "server log lines, timed when infer-prof read them (every 0.25 s)"


def startup_dict(
    changes: Sequence[PhaseChange], total_s: float | None, source: str = LIVE_SOURCE
) -> dict[str, Any]:
    """The result file's ``server.startup`` block from a list of phase changes (``source``
    says how they were timed)."""
    steps = [c for c in changes if c.phase != "ready"]
    phases = []
    for k, c in enumerate(steps):
        end = steps[k + 1].at_s if k + 1 < len(steps) else total_s
        phases.append(
            {
                "name": c.phase,
                "start_s": round(c.at_s, 2),
                "duration_s": None if end is None else round(max(0.0, end - c.at_s), 2),
            }
        )
    return {
        "total_s": None if total_s is None else round(total_s, 2),
        "phases": phases,
        "source": source,
    }


def phases_from_log(text: str, year: int = 2000) -> list[PhaseChange]:
    """Phase changes of a whole recorded log, timed by vLLM's own line timestamps (whole
    seconds, ``MM-DD HH:MM:SS``) relative to the first one; a line without a timestamp (progress
    bars, uvicorn) takes the last one seen. ``starting`` is at 0."""
    tracker = StartupPhases()
    t0: dt.datetime | None = None
    now = 0.0
    for raw in split_lines(text):
        ts = parse_line(raw).ts
        if ts is not None:
            stamp = dt.datetime.strptime(f"{year}-{ts}", "%Y-%m-%d %H:%M:%S")
            if t0 is None:
                t0 = stamp
            now = (stamp - t0).total_seconds()
        tracker.feed_lines(now, [raw])
    return tracker.changes
