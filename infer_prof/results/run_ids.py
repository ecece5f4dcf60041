"""Run identity: every run's ``run_id`` is a UUIDv7 (RFC 9562), unique across processes and
machines and ordered by creation time; the readable ``20261124-043655-tiny-llama-c2`` is the
run's ``run_name`` (its default file name), which two runs may share.

Result files of earlier releases have only the readable string, as ``run_id``: it stays their
ID (and :func:`run_name_of` gives it as their name), so they load and import as before.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

_UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
_lock = threading.Lock()
_last = [0, 0]  # (unix ms, 12-bit counter) of the last ID this process made


def new_run_id(now_ms: int | None = None) -> str:
    """A new UUIDv7 as text: 48 bits of Unix time in milliseconds, version 7, 12 bits of a
    counter that starts at a random value each millisecond (IDs made by one process are strictly
    increasing, RFC 9562 method 3), the variant, and 62 random bits from ``os.urandom``
    (two machines making IDs in the same millisecond collide with probability about 2**-62)."""
    ms = int(time.time_ns() // 1_000_000) if now_ms is None else now_ms
    with _lock:
        if ms <= _last[0]:  # same millisecond (or the clock stepped back): count on
            ms, counter = _last[0], _last[1] + 1
            if counter > 0xFFF:  # 4096 IDs in one millisecond: borrow the next one
                ms, counter = ms + 1, int.from_bytes(os.urandom(2), "big") & 0x7FF
        else:
            counter = int.from_bytes(os.urandom(2), "big") & 0x7FF  # room to count upwards
        _last[0], _last[1] = ms, counter
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | rand_b
    return str(uuid.UUID(int=value))


def is_run_uuid(text: str) -> bool:
    """Whether ``text`` is a UUIDv7 as :func:`new_run_id` writes it (lower-case, hyphens)."""
    return bool(_UUID7.match(text))


def uuid7_time_ms(run_id: str) -> int:
    """The Unix time in milliseconds a UUIDv7 was made at (its first 48 bits)."""
    return uuid.UUID(run_id).int >> 80


def run_name_of(result: Mapping[str, Any]) -> str:
    """A result's readable name: ``run_name``, or for a result of an earlier release (which has
    no ``run_name``) its ``run_id``, which was the readable name then."""
    return str(result.get("run_name") or result.get("run_id") or "")
