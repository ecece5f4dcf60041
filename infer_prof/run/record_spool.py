"""A load point's request records in bounded memory: each record stays in memory while its
request is in flight, and goes to a spool file on disk when it has ended; the records are read
back, complete and in the order they were sent, once the load is over.

Without it a client keeps every record (a timestamp and a token count per streamed chunk: about
12 KB for a 128-token request) until the run ends, and its memory grows with every request: an
hour at 256 streams is about 470,000 requests and 5.6 GB. With it, what the client holds while
it measures is the requests in flight, whatever the run's length.

The drivers append a record before its request is sent (as to a list) and call
:meth:`RecordSpool.ended` once it has ended and nothing more is written into it
(:meth:`~infer_prof.loadgen.closed_loop.LiveCounters.ended`). Whoever watches the records while
the load runs (:class:`~infer_prof.run.point_precision.PrecisionStop`) subscribes to both events
(:meth:`RecordSpool.subscribe`) instead of reading a list.

A spool file that cannot be written (a full disk) is not a lost measurement: the records from
then on stay in memory, and the run says so (``spool_error``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import fields
from pathlib import Path

import orjson

from infer_prof.core.measurement.metrics import RequestRecord

_FIELDS = tuple(f.name for f in fields(RequestRecord))
_SEQ = "_seq"  # the order the record was appended in (its line's key in the spool)

Listener = Callable[[RequestRecord], None]


class RecordSpool:
    """The records of one load point: in memory while in flight, on disk once ended (see the
    module docstring). ``folder``: where the spool file goes (the results folder: a temporary
    folder may be memory); None, or a folder that cannot take it, keeps them in memory."""

    def __init__(self, folder: Path | None = None) -> None:
        self._live: dict[int, tuple[int, RequestRecord]] = {}  # id(record) -> (seq, record)
        self._kept: list[tuple[int, RequestRecord]] = []  # ended, not spooled (no file)
        self._seq = 0
        self.spooled = 0
        self.error: str | None = None
        self.path: Path | None = None
        self._fd: int | None = None
        self._offset = 0  # bytes of whole lines in the file
        self._on_append: list[Listener] = []
        self._on_end: list[Listener] = []
        self._warmup_ok = 0  # ended warm-up (not cool-down) requests that completed
        self._warmup_sent = 0
        if folder is not None:
            try:
                fd, name = tempfile.mkstemp(prefix=".infer-prof-records.", suffix=".jsonl",
                                            dir=folder)
                self._fd, self.path = fd, Path(name)
            except OSError as exc:
                self.error = f"cannot spool records in {folder}: {exc.strerror or exc}"

    def subscribe(self, on_append: Listener | None = None, on_end: Listener | None = None,
                  ) -> None:
        """Call ``on_append(record)`` as each record is appended and ``on_end(record)`` as each
        ends (before it leaves memory)."""
        if on_append is not None:
            self._on_append.append(on_append)
        if on_end is not None:
            self._on_end.append(on_end)

    def append(self, rec: RequestRecord) -> None:
        """A request's record, appended before its request is sent (it is filled in place)."""
        self._live[id(rec)] = (self._seq, rec)
        self._seq += 1
        if rec.warmup and not rec.cooldown:
            self._warmup_sent += 1
        for fn in self._on_append:
            fn(rec)

    def extend(self, recs: Iterable[RequestRecord]) -> None:
        """Append records that have all ended (another process's)."""
        for r in recs:
            self.append(r)
            self.ended(r)

    def ended(self, rec: RequestRecord) -> None:
        """``rec``'s request has ended and nothing more is written into it: it leaves memory
        for the spool file. A record not appended here (or already ended) is ignored."""
        entry = self._live.pop(id(rec), None)
        if entry is None:
            return
        for fn in self._on_end:
            fn(rec)
        if rec.warmup and not rec.cooldown and rec.ok:
            self._warmup_ok += 1
        self._write(entry)

    def _write(self, entry: tuple[int, RequestRecord]) -> None:
        seq, rec = entry
        if self._fd is not None:
            # one unbuffered write a record: nothing waits in a buffer that a full disk could
            # lose; a short or failed write is cut off the file and the record kept in memory
            d = {k: getattr(rec, k) for k in _FIELDS}
            d[_SEQ] = seq
            try:
                line = orjson.dumps(d) + b"\n"
                n = os.write(self._fd, line)
                if n == len(line):
                    self._offset += n
                    self.spooled += 1
                    return
                raise OSError(f"short write ({n} of {len(line)} bytes)")
            except (OSError, TypeError) as exc:
                self.error = f"cannot spool records to {self.path}: {exc}; kept in memory"
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._offset)
                self._close()
        self._kept.append(entry)

    def __len__(self) -> int:
        """Records appended so far."""
        return self._seq

    @property
    def held(self) -> int:
        """Records in memory now (in flight, or kept because the file failed)."""
        return len(self._live) + len(self._kept)

    def warmup_all_failed(self) -> bool:
        """:func:`~infer_prof.core.measurement.warmup.warmup_all_failed` over every record so far:
        warm-up requests were sent and none of them completed."""
        if self._warmup_ok:
            return False
        live = [r for _, r in self._live.values() if r.warmup and not r.cooldown]
        return bool(self._warmup_sent) and not any(r.ok for r in live)

    def _close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def read_back(self) -> list[RequestRecord]:
        """Every record, in the order appended, the spool file removed: the ones still in
        memory (in flight when the load ended: cancelled or cut) as they are."""
        rest = sorted([*self._live.values(), *self._kept], key=lambda e: e[0])
        self._live.clear()
        self._kept = []
        out: list[tuple[int, RequestRecord]] = []
        if self.path is not None:
            self._close()
            with open(self.path, "rb") as f:
                for line in f:
                    d = orjson.loads(line)
                    out.append((d.pop(_SEQ), RequestRecord(**d)))
            self.discard()
        out.extend(rest)
        out.sort(key=lambda e: e[0])
        return [r for _, r in out]

    def discard(self) -> None:
        """Remove the spool file (read back or not)."""
        self._close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
