"""What every server a run launches as its own child process group does the same way: start
it in a new session with its output to a log, poll it, scrape its ``/metrics``, stop or kill
the whole group. :class:`infer_prof.servers.vllm_server.VllmServer` and
:class:`infer_prof.servers.synthetic_process.SyntheticProcessServer` share it; each says only
its command line, how it becomes healthy and how it describes itself."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import ssl
import subprocess
import time
from abc import ABC, abstractmethod
from pathlib import Path

from infer_prof.servers.http_get import http_get
from infer_prof.servers.process import die_with_parent, free_port
from infer_prof.servers.process_group import stop_group

PORT_TAKEN = re.compile(r"address already in use", re.IGNORECASE)
PORT_RETRIES = 3  # launches on a newly chosen port after the first one's was taken


class ChildServer(ABC):
    """Process handling for a launched server (a mixin for dataclasses holding these fields)."""

    host: str
    port: int
    log_path: Path
    env: dict[str, str]
    cpus: tuple[int, ...] | None
    proc: subprocess.Popen[bytes] | None
    exit_code: int | None
    started_at: float | None  # time.monotonic() at launch
    port_retries: int = 0  # launches again after the chosen port was taken (see below)
    _port_chosen_here: bool = False
    _launch_log_offset: int = 0
    tls_context: ssl.SSLContext | None = None  # set when it serves HTTPS: whom to trust

    @abstractmethod
    def command(self) -> list[str]:
        """The exact command line that starts the server (each server says its own)."""

    @property
    def url(self) -> str:
        """Base URL of its OpenAI-compatible API (https when :attr:`tls_context` is set)."""
        scheme = "https" if self.tls_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def start(self) -> None:
        """Launch :meth:`command` in its own process group (a new session: it and every process
        it forks share one group), output appended to ``log_path`` after the command line,
        unbuffered, pinned to ``cpus`` when set; a free port is taken when none was given."""
        if not self.port or self._port_chosen_here:
            self._port_chosen_here = True
            self.port = free_port(self.host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._launch_log_offset = log.tell()
            log.write(f"$ {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
                start_new_session=True, preexec_fn=self._in_child,
            )
        self.started_at = time.monotonic()

    def relaunched_on_taken_port(self) -> bool:
        """Called when the server exited during start-up. A port chosen here is free when it is
        chosen, not when the server binds it a few seconds later: another process can take it
        in between. When that is why this launch died (its log says the address is in use),
        launch it again on a newly chosen port and return True (at most ``PORT_RETRIES`` times);
        otherwise False. A port the user gave is never changed."""
        if not self._port_chosen_here or self.port_retries >= PORT_RETRIES:
            return False
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._launch_log_offset)
                this_launch = f.read(1 << 20).decode("utf-8", "replace")
        except OSError:
            return False
        if not PORT_TAKEN.search(this_launch):
            return False
        taken = self.port
        self.stop(grace_s=2.0)
        self.exit_code = None
        self.port_retries += 1
        with open(self.log_path, "ab") as log:
            log.write(f"infer-prof: port {taken} was taken by another process before the "
                      "server bound it; launching again on another port\n".encode())
        self.start()
        return True

    def _in_child(self) -> None:
        die_with_parent()
        if self.cpus:
            os.sched_setaffinity(0, set(self.cpus))

    def poll(self) -> int | None:
        """Its exit code if it has exited, else None."""
        if self.proc is None:
            return self.exit_code
        code = self.proc.poll()
        if code is not None:
            self.exit_code = code
        return code

    def metrics(self) -> str:
        """One scrape of ``/metrics`` (Prometheus text; '' when it does not answer 200)."""
        with contextlib.suppress(OSError):
            status, body = http_get(f"{self.url}/metrics", timeout_s=5.0,
                                    context=self.tls_context)
            if status == 200:
                return body.decode("utf-8", "replace")
        return ""

    def kill(self) -> None:
        """SIGKILL the whole process group at once, without waiting (a second stop signal while
        stopping: nothing may be left behind holding memory)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Stop the whole process group: SIGTERM, then SIGKILL after ``grace_s``; every member
        is waited for (zombies of orphaned workers do not count, see process_group).
        Idempotent; returns the exit code."""
        proc = self.proc
        if proc is None:
            return self.exit_code
        stop_group(proc, grace_s=grace_s)
        self.poll()
        self.proc = None
        return self.exit_code
