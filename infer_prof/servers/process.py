"""What every server this process launches shares, whatever its engine: a free port, a log file
read from its end or followed as it grows, and the Linux parent-death signal that stops the
server if infer-prof itself dies. The launchers (:mod:`infer_prof.servers.vllm_server`,
:mod:`infer_prof.servers.synthetic_process`) and the calibration and matrix runners use them.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import socket
from dataclasses import dataclass, field
from pathlib import Path


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


def die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGTERM the server if infer-prof itself dies
    (even by SIGKILL), so that no server is left behind holding memory. The server's own SIGTERM
    handling then stops its workers."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
