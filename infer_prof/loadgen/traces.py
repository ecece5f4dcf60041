"""Trace replay (``--trace FILE``): arrival times and exact lengths from a production trace.

Formats (detected from the content):

- ``azure`` CSV, the Azure LLM inference trace: a header naming ``TIMESTAMP``,
  ``ContextTokens`` and ``GeneratedTokens``; ``TIMESTAMP`` is a date-time
  (``2023-11-16 18:15:46.6805900``, fractions beyond microseconds dropped) or a number of seconds.
- ``mooncake`` JSONL: one ``{"timestamp": ms, "input_length": n, "output_length": m}`` per line,
  optionally ``"hash_ids": [h0, h1, ...]``: the request's prompt in blocks of
  :data:`MOONCAKE_BLOCK_TOKENS` tokens, block ``j`` being the content named ``h_j``. Requests
  that share hash ids share those blocks: the prompt is built as each id's fixed block (drawn
  from the seed and the id alone, so the same id is the same tokens in every request), then,
  past the blocks, fresh tokens up to ``input_length``; blocks beyond ``input_length`` are cut.
  A server's prefix cache then sees the trace's sharing.

Requests are sorted by time. ``--trace-window START:END`` keeps the requests whose time since the
trace's first request is in ``[START, END)`` seconds (either side may be left out). Send offsets
are the times since the first kept request, times ``--time-scale`` (``0.5`` replays twice as
fast, ``2`` half as fast). Input and output lengths are sent exactly as the trace gives them;
requests whose input + output exceed the model's context, or with an input or output of 0
tokens, are skipped and counted. Bad files raise :class:`TraceError`: one line naming the
file, the line and the field.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import hashlib
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from infer_prof.core.messages import OneLineError
from infer_prof.results.config_record import TraceUsed

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
#: Tokens per ``hash_ids`` block (the Mooncake trace's convention).
MOONCAKE_BLOCK_TOKENS = 512

#: A parsed request: time (s), input and output tokens, hash ids (None: none given).
_Row = tuple[float, int, int, "tuple[int, ...] | None"]


class TraceError(OneLineError):
    """A trace file or window that cannot be used; one line naming file, line and field."""


@dataclass
class Trace:
    """The requests of a trace window: send offsets (s, scaled) and exact lengths."""

    offsets: list[float]
    input_lens: list[int]
    output_lens: list[int]
    path: str
    sha256: str
    format: str
    window: tuple[float | None, float | None]
    time_scale: float
    skipped: dict[str, int] = field(default_factory=dict)
    hash_ids: list[tuple[int, ...] | None] | None = None  # Mooncake: per request, or None
    block_tokens: int = MOONCAKE_BLOCK_TOKENS

    def scheduled_rate(self) -> float | None:
        """Requests/s of the schedule: ``(n - 1) / (last offset - first offset)``."""
        span = self.offsets[-1] - self.offsets[0] if self.offsets else 0.0
        return (len(self.offsets) - 1) / span if span > 0 else None

    def longest(self) -> int:
        """The longest input + output of any request (tokens)."""
        return max(i + o for i, o in zip(self.input_lens, self.output_lens, strict=True))

    def record(self) -> TraceUsed:
        """For ``config.trace`` in a result."""
        start, end = self.window
        return TraceUsed(path=self.path, sha256=self.sha256, format=self.format,
                         window_s=[start, end], time_scale=self.time_scale,
                         requests=len(self.offsets), skipped=dict(self.skipped),
                         scheduled_rate=self.scheduled_rate(),
                         hash_ids=self.hash_ids is not None,
                         block_tokens=self.block_tokens if self.hash_ids is not None else None)

    def to_dict(self) -> dict[str, Any]:
        """:meth:`record` as JSON types."""
        return dict(msgspec.to_builtins(self.record()))


def parse_window(text: str | None) -> tuple[float | None, float | None]:
    """``"START:END"`` seconds (either side may be empty) -> ``(start, end)``; ValueError on
    anything else."""
    if not text:
        return (None, None)
    parts = text.split(":")
    if len(parts) != 2:
        raise ValueError(f"--trace-window {text!r} must be START:END seconds, e.g. 60:120 or 0:")
    try:
        start = float(parts[0]) if parts[0].strip() else None
        end = float(parts[1]) if parts[1].strip() else None
    except ValueError:
        raise ValueError(f"--trace-window {text!r} must be START:END seconds, e.g. 60:120") \
            from None
    if (start is not None and start < 0) or (start is not None and end is not None
                                             and end <= start):
        raise ValueError(f"--trace-window {text!r}: need 0 <= START < END")
    return (start, end)


def load_trace(
    path: str | Path,
    *,
    window: tuple[float | None, float | None] = (None, None),
    time_scale: float = 1.0,
    context: int | None = None,
) -> Trace:
    """Read a trace file and cut it to ``window`` (see the module docstring)."""
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise TraceError(f"--time-scale must be a positive number, got {time_scale}")
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the trace: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if text.lstrip().startswith("{"):
        fmt, rows = "mooncake", _read_mooncake(str(path), text)
    else:
        fmt, rows = "azure", _read_azure(str(path), text)
    if not rows:
        raise TraceError(f"{path}: the trace holds no requests")
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0]
    start, end = window
    kept = [r for r in rows
            if (start is None or r[0] - t0 >= start) and (end is None or r[0] - t0 < end)]
    too_long = empty = no_output = 0
    chosen: list[_Row] = []
    for t, n_in, n_out, hashes in kept:
        if n_in < 1:
            empty += 1
        elif n_out < 1:  # a server takes max_tokens >= 1: such a request cannot be replayed
            no_output += 1
        elif context is not None and n_in + n_out > context:
            too_long += 1
        else:
            chosen.append((t, n_in, n_out, hashes))
    if not chosen:
        raise TraceError(f"{path}: no usable request in the window ({len(kept)} in it, "
                         f"{too_long} longer than the context of {context} tokens, {empty} with "
                         f"no input, {no_output} with no output)")
    first = chosen[0][0]
    blocks = [c[3] for c in chosen]
    return Trace([(c[0] - first) * time_scale for c in chosen],
                 [c[1] for c in chosen], [c[2] for c in chosen], str(path),
                 hashlib.sha256(raw).hexdigest(), fmt, window, time_scale,
                 {"too_long": too_long, "no_input": empty, "no_output": no_output},
                 blocks if any(h is not None for h in blocks) else None)


def _length(value: Any, where: str, name: str) -> int:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TraceError(f"{where}: {name}: must be a whole number of tokens >= 0, got {value!r}")
    return value


def _read_mooncake(path: str, text: str) -> list[_Row]:
    rows: list[_Row] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except RecursionError:
            raise TraceError(f"{where}: not valid JSON (nested too deeply)") from None
        except ValueError as exc:
            raise TraceError(f"{where}: not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise TraceError(f"{where}: must be a JSON object with timestamp, input_length, "
                             "output_length")
        for key in ("timestamp", "input_length", "output_length"):
            if key not in obj:
                raise TraceError(f"{where}: {key}: missing")
        ts = obj["timestamp"]
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not math.isfinite(ts):
            raise TraceError(f"{where}: timestamp: must be a number of milliseconds, got {ts!r}")
        rows.append((ts / 1000.0, _length(obj["input_length"], where, "input_length"),
                     _length(obj["output_length"], where, "output_length"),
                     _hash_ids(obj.get("hash_ids"), where)))
    return rows


def _hash_ids(value: Any, where: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in value):
        raise TraceError(f"{where}: hash_ids: must be a list of whole numbers >= 0, got "
                         f"{str(value)[:60]}")
    return tuple(value)


def _read_azure(path: str, text: str) -> list[_Row]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise TraceError(f"{path}:1: not valid CSV ({exc})") from None
    if header is None:
        raise TraceError(f"{path}: the trace is empty")
    names = [h.strip() for h in header]
    missing = [c for c in AZURE_COLUMNS if c not in names]
    if missing:
        raise TraceError(f"{path}:1: {missing[0]}: missing column; an Azure trace needs a "
                         f"header with {','.join(AZURE_COLUMNS)} (or give Mooncake JSONL)")
    idx = [names.index(c) for c in AZURE_COLUMNS]
    rows: list[_Row] = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise TraceError(f"{path}:{reader.line_num}: not valid CSV ({exc})") from None
        if not row or not any(cell.strip() for cell in row):
            continue
        where = f"{path}:{reader.line_num}"
        if len(row) < len(names):
            raise TraceError(f"{where}: {len(row)} columns, the header has {len(names)}")
        ts = _azure_time(row[idx[0]].strip(), where)
        rows.append((ts, _length(row[idx[1]].strip(), where, "ContextTokens"),
                     _length(row[idx[2]].strip(), where, "GeneratedTokens"), None))
    return rows


def _azure_time(cell: str, where: str) -> float:
    try:
        seconds = float(cell)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise TraceError(f"{where}: TIMESTAMP: must be a finite number, got {cell!r}")
        return seconds
    text = cell.replace("T", " ").rstrip("Z")
    if "." in text:  # Azure writes 7 fractional digits; datetime takes at most 6
        head, frac = text.rsplit(".", 1)
        digits = "".join(ch for ch in frac if ch.isdigit())
        text = f"{head}.{digits[:6].ljust(6, '0')}"
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        raise TraceError(f"{where}: TIMESTAMP: not a date-time or seconds, got {cell!r}") \
            from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()
