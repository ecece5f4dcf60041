"""The built-in synthetic server (:mod:`infer_prof.servers.synthetic`) as a server a run starts
(``infer-prof run --server synthetic``): a known TTFT and inter-token gap, real HTTP and SSE, no
model. What it streams is fixed by its options, not by the engine settings, which it takes
and ignores (it has no memory to plan); a request's ``max_tokens`` sets its length.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infer_prof.core.planning.plan_result import EngineSettings
from infer_prof.servers.base import LaunchSpec, PhaseChange, ServerStartError
from infer_prof.servers.child_server import ChildServer
from infer_prof.servers.cpu_split import CpuSplit
from infer_prof.servers.http_get import http_get
from infer_prof.servers.process import log_tail


@dataclass
class SyntheticProcessServer(ChildServer):
    """The synthetic server as a child process group this run owns (a
    :class:`infer_prof.servers.base.Server`). ``options`` are the synthetic server's own
    command-line options (``--ttft-ms 20 --itl-ms 5``)."""

    kind = "synthetic"
    label = "synthetic server"
    launched = True

    log_path: Path
    options: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 0
    cpus: tuple[int, ...] | None = None
    proc: subprocess.Popen[bytes] | None = None
    exit_code: int | None = None
    started_at: float | None = None
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_launch(cls, spec: LaunchSpec) -> SyntheticProcessServer:
        """The synthetic server for a run: ``--engine-arg`` values are its options; each LoRA
        adapter of the run is listed (``--lora NAME``, the base TTFT) unless they name it."""
        given = " ".join(spec.extra_args)
        lora = tuple(f"--lora={a.name}" for a in spec.lora_adapters
                     if f"--lora={a.name}=" not in given and f"--lora {a.name}=" not in given)
        return cls(log_path=spec.log_path, options=(*spec.extra_args, *lora))

    def command(self) -> list[str]:
        """The exact command line that starts it."""
        return [sys.executable, "-m", "infer_prof.servers.synthetic", "--host", self.host,
                "--port", str(self.port), *self.options]

    def use_cpus(self, split: CpuSplit) -> None:
        """Serve on ``split.engine``'s cores."""
        self.cpus = split.engine

    def wait_healthy(
        self,
        timeout_s: float,
        on_wait: Callable[[float, str, float], None] | None = None,
        on_phase: Callable[[PhaseChange], None] | None = None,
    ) -> float:
        """Poll ``/health`` (20 times a second) until it answers 200; seconds since launch.
        It has one start-up phase, ``starting``."""
        t0 = self.started_at if self.started_at is not None else time.monotonic()
        while True:
            elapsed = time.monotonic() - t0
            code = self.poll()
            if code is not None and self.relaunched_on_taken_port():
                t0 = self.started_at if self.started_at is not None else time.monotonic()
                continue
            if code is not None:
                raise ServerStartError(
                    f"synthetic server exited with code {code} during start-up "
                    f"(log: {self.log_path})\n{log_tail(self.log_path)}")
            with contextlib.suppress(OSError):
                if http_get(f"{self.url}/health", timeout_s=1.0)[0] == 200:
                    return time.monotonic() - t0
            if elapsed > timeout_s:
                raise ServerStartError(f"synthetic server not healthy after {timeout_s:.0f} s "
                                       f"(log: {self.log_path})")
            if on_wait is not None:
                on_wait(elapsed, "starting", 0.0)
            time.sleep(0.05)

    def describe(self, startup_s: float | None) -> dict[str, Any]:
        """Command, log file and start-up time (one phase)."""
        return {
            "command": self.command(),
            "log_file": str(self.log_path),
            "startup_s": startup_s,
            "startup": {"total_s": None if startup_s is None else round(startup_s, 2),
                        "phases": [], "source": "GET /health"},
            "engine": "synthetic",
        }

    def diagnosis(self) -> dict[str, Any]:
        """Exit code and the log's last lines (it writes no root cause of its own)."""
        return {"exit_code": self.exit_code, "log_tail": log_tail(self.log_path),
                "root_cause": None}

    def plan_arguments(self, settings: EngineSettings) -> dict[str, Any]:
        """{}: it takes no engine settings."""
        return {}
