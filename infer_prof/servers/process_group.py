"""Stopping a child that leads its own process group (``start_new_session=True``), children
included, and knowing when every one of them has really exited.

A browser or an inference server forks helpers that can outlive the process we started: they
still write into the folders we are about to delete, and hold ports and memory. Stopping only
the leader (``Popen.terminate``) and waiting for it is not enough. :func:`stop_group` signals
the whole group and waits until no process of it is still running.

Zombies do not count as running: where PID 1 does not reap orphans (many containers), an
orphaned helper that has exited stays a zombie for good, and ``killpg(pgid, 0)`` keeps
succeeding on it; :func:`group_running` reads ``/proc`` instead (Linux), falling back to
``killpg(pgid, 0)`` where there is no ``/proc``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

PROC = Path("/proc")


def _stat_fields(stat: str) -> list[str]:
    """The fields of a ``/proc/PID/stat`` line after the command name (which may hold spaces
    and parentheses): index 0 is the state, 2 the process group."""
    return stat[stat.rfind(")") + 2 :].split()


def group_members(pgid: int, proc_root: Path = PROC) -> list[int] | None:
    """PIDs of the processes of group ``pgid`` that have not exited (zombies left out), read
    from ``/proc``; None where ``/proc`` cannot be read."""
    try:
        entries = list(proc_root.iterdir())
    except OSError:
        return None
    members = []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat_fields((entry / "stat").read_text())
        except (OSError, IndexError):
            continue  # exited while we looked
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def group_running(pgid: int) -> bool:
    """True while any process of group ``pgid`` has not exited (zombies do not count)."""
    members = group_members(pgid)
    if members is not None:
        return bool(members)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def wait_group(proc: subprocess.Popen, timeout_s: float, poll_s: float = 0.02) -> bool:
    """Wait up to ``timeout_s`` seconds until the leader ``proc`` has exited (and is reaped)
    and no other process of its group is running; True if they all did."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None and not group_running(proc.pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def stop_group(proc: subprocess.Popen, grace_s: float = 10.0, sig: int = signal.SIGTERM) -> bool:
    """Stop the process group that ``proc`` leads (started with ``start_new_session=True``):
    ``sig`` to every member, SIGKILL to the group after ``grace_s`` seconds, then wait (10 s at
    most) until every member has exited and the leader is reaped. Returns True when the group
    is gone, False if something survived even SIGKILL (a process stuck in the kernel)."""
    pgid = proc.pid
    _signal_group(pgid, sig)
    if wait_group(proc, grace_s):
        return True
    _signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    return wait_group(proc, 10.0)
