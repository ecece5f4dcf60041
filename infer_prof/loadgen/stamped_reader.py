"""Reading one stream socket with the kernel's receive timestamps (the per-read hot path).

Each received TCP segment carries the time the kernel queued it (``SO_TIMESTAMPNS``), read with
``recvmsg``. A token's arrival time is therefore when its bytes reached this machine, not when a
busy event loop got round to reading them: event-loop lag delays the reading, not the number.
Timestamps are converted onto ``time.perf_counter_ns`` by subtracting the data's age
(``time.time_ns() - kernel_realtime_ns``) from ``perf_counter_ns()`` taken at the same moment.

Each read is made by a reader object the event loop calls when the socket is readable: the C
``_stamped.StampedReader`` where the extension was built (the common case costs no Python), else
its pure-Python twin :class:`PyStampedReader`; both hand what they do not recognise to the same
general parser, and the tests check that they agree.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import struct
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Linux constants; Python's socket module does not export them.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_CMSG_SPACE = socket.CMSG_SPACE(16)
_RECV_SIZE = 256 * 1024
# One receive buffer per thread, reused by every read: allocating a fresh 256 KiB bytes object
# per read goes through mmap/munmap in glibc and cost ~80 us per read on the 2-core machines
# (page faults and TLB shootdowns), more than everything else a read does.
_RECV_BUF = threading.local()


def _recv_buffer() -> memoryview:
    buf = getattr(_RECV_BUF, "view", None)
    if buf is None:
        buf = _RECV_BUF.view = memoryview(bytearray(_RECV_SIZE))
    return buf


_TIMESPEC = struct.Struct("qq")
_SOL_SOCKET = socket.SOL_SOCKET
_REPORT_EVERY = 16  # tokens between on_token calls (progress display) on the fast path
# One whole HTTP chunk holding one SSE event that carries generated tokens and per-chunk usage,
# as vLLM streams them (compact JSON, choices before usage, no finish reason yet): the steady
# state of a stream, read without a JSON parser. Groups: chunk size (hex), the SSE data line,
# completion_tokens. A JSON string cannot hold an unescaped quote, so the quoted key patterns
# can only match keys. Anything else (first and last events, errors, other servers' layouts)
# goes through the general parser.
_TOKEN_CHUNK = re.compile(
    rb'([0-9a-fA-F]{1,8})\r\n(data: [^\n]*"finish_reason":null[^\n]*'
    rb'"completion_tokens":(\d+)[^\n]*)\n\n\r\n'
)


def match_token_chunk_py(data: bytes) -> int:
    """Completion tokens if ``data`` is exactly one vLLM token chunk (``_TOKEN_CHUNK`` with a
    chunk size that fits, its data valid UTF-8), else -1. The pure-Python twin of the C
    ``match_token_chunk``. Invalid UTF-8 goes to the general parser, which fails the request
    with ``invalid_utf8`` (a JSON parser would refuse it)."""
    m = _TOKEN_CHUNK.fullmatch(data)
    if m is None or int(m.group(1), 16) != m.end(2) - m.start(2) + 2:
        return -1
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return -1
    return int(m.group(3))


#: What a token chunk carries (:func:`chunk_kind_py`): nothing to tell (a delta with neither
#: field), the answer (content, a tool call, a completion's text), or reasoning.
KIND_NEITHER, KIND_ANSWER, KIND_REASONING = 0, 1, 2


def _skip_string(b: bytes, i: int, n: int) -> int:
    """``b[i]`` is a JSON string's opening quote: the index after its closing one, or -1."""
    i += 1
    while i < n:
        c = b[i]
        if c == 0x5C:  # a backslash escapes the next byte
            i += 2
            continue
        if c == 0x22:
            return i + 1
        i += 1
    return -1


def _skip_value(b: bytes, i: int, n: int) -> int:
    """``b[i]`` starts a JSON value: the index after it, or -1."""
    if i >= n:
        return -1
    c = b[i]
    if c == 0x22:
        return _skip_string(b, i, n)
    if c in (0x7B, 0x5B):  # an object or an array: to its closing bracket
        depth = 0
        while i < n:
            c = b[i]
            if c == 0x22:
                i = _skip_string(b, i, n)
                if i < 0:
                    return -1
                continue
            if c in (0x7B, 0x5B):
                depth += 1
            elif c in (0x7D, 0x5D):
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return -1
    while i < n and b[i] not in (0x2C, 0x7D):  # null, true, false, a number
        i += 1
    return i


def chunk_kind_py(data: bytes) -> int:
    """What the token chunk ``data`` carries, read from the keys of its ``delta`` object
    (walked without a JSON parser, values skipped, strings with their escapes: the cost is the
    delta's length, one token's text): :data:`KIND_ANSWER` when ``content`` is a non-empty
    string or ``tool_calls`` a non-empty array; else :data:`KIND_REASONING` when ``reasoning``
    (vLLM 0.10 and later) or ``reasoning_content`` is a string; else :data:`KIND_ANSWER` when
    ``content`` is an empty string (a partial UTF-8 sequence); else :data:`KIND_NEITHER` (also
    for a delta that cannot be walked). A chunk without ``delta`` (the completions API's
    ``text``) is an answer. The pure-Python twin of the C ``chunk_kind``;
    ``client.chunk_kind_of`` applies the same rule to a parsed chunk. (A JSON string cannot
    hold an unescaped quote, so the first ``"delta":{`` found is the key.)"""
    d = data.find(b'"delta":{')
    if d < 0:
        return KIND_ANSWER
    i, n = d + 9, len(data)
    reasoning = empty_content = False
    while i < n and data[i] == 0x22:
        after = _skip_string(data, i, n)
        if after < 0 or after + 1 >= n or data[after] != 0x3A:
            return KIND_NEITHER
        key, v = data[i + 1:after - 1], after + 1
        nxt = _skip_value(data, v, n)
        if nxt < 0:
            return KIND_NEITHER
        if key == b"content" and data[v] == 0x22:
            if data[v + 1] != 0x22:
                return KIND_ANSWER
            empty_content = True
        elif key == b"tool_calls" and data[v] == 0x5B and v + 1 < n and data[v + 1] != 0x5D:
            return KIND_ANSWER
        elif key in (b"reasoning", b"reasoning_content") and data[v] == 0x22:
            reasoning = True
        i = nxt
        if i < n and data[i] == 0x2C:
            i += 1
    if i >= n or data[i] != 0x7D:
        return KIND_NEITHER
    return KIND_REASONING if reasoning else KIND_ANSWER if empty_content else KIND_NEITHER


@dataclass(frozen=True)
class ReadSinks:
    """Where a stream socket's reader puts what it reads, and whom it tells.

    ``chunk_ns``/``chunk_tokens``: each token chunk's arrival time (``perf_counter_ns``) and its
    tokens, appended by the fast path; ``lags``: each read's ``now - arrival`` (ns);
    ``general(data, t_ns) -> bool``: the parser of what the fast path does not take (``data``
    is ``b""`` at end of stream; the result is whether the next read may take the fast path);
    ``failed(errno)``: a receive error; ``on_token(n)``: progress, ``n`` more tokens (None: no
    progress display)."""

    chunk_ns: list[int]
    chunk_tokens: list[int]
    lags: list[int]
    general: Callable[[bytes, int], bool]
    failed: Callable[[int], None]
    on_token: Callable[[int], None] | None

    def as_tuple(self) -> tuple[Any, ...]:
        """The six in the order the readers take them (the C reader's positional arguments)."""
        return (self.chunk_ns, self.chunk_tokens, self.lags, self.general, self.failed,
                self.on_token)


class PyStampedReader:
    """One stream socket's reader, called by the event loop whenever the socket is readable.

    Each call reads once; the data's time is the kernel's receive time (``SO_TIMESTAMPNS``) on
    the perf_counter clock: ``now - (wall_now - kernel_wall)``, never later than ``now``, and
    ``sinks.lags`` gets ``now - t`` (ns). While ``fast`` (the HTTP parser is at a chunk
    boundary) a read that is exactly one vLLM token chunk is counted here; anything else goes
    to ``sinks.general(data, t_ns) -> bool`` (``data`` is ``b""`` at end of stream), whose
    result is the new ``fast``. A receive error calls ``sinks.failed(errno)``
    (see :class:`ReadSinks`). Each counted chunk's kind (:func:`chunk_kind_py`) is kept as two
    numbers: ``reasoning_ct``, the tokens of reasoning chunks, and ``first_answer``, the index
    in ``chunk_ns`` of the first answer chunk (-1 before it); a stream that answered before any
    reasoning is not classified further (a plain model's stream pays for its first chunk only).

    With ``decrypt`` (TLS, see :mod:`infer_prof.loadgen.tls`) the bytes read are ciphertext:
    ``decrypt(data)`` gives the plaintext they complete, which is then handled as above with the
    read's kernel time (the time of the segment that completed the TLS record); a read that
    completes no application data (``b""``) ends there.

    The pure-Python twin of the C ``_stamped.StampedReader`` (used where that was not built).
    """

    def __init__(
        self,
        sock: socket.socket,
        sinks: ReadSinks,
        report_every: int = 16,
        decrypt: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self.fast = 0
        self.last_ct = 0
        self.reported = 0
        self.reasoning_ct = 0
        self.first_answer = -1
        self._recv = sock.recvmsg_into
        self._decrypt = decrypt
        self._args = (*sinks.as_tuple(), report_every)

    def close(self) -> None:
        """Forget the callbacks (the request is over): they are closures that refer back to
        this reader, a reference cycle per request that only the (paused) garbage collector
        could free."""
        self._args = None  # type: ignore[assignment]
        self._decrypt = None

    def __call__(self) -> None:
        # The hot path: one call per received segment, 68k/s at 1024 streams on a machine
        # where a Python-level call costs ~0.3 us, so it is kept flat on purpose.
        chunk_ns, chunk_tokens, lags, general, failed, on_token, report_every = self._args
        rbuf = _recv_buffer()
        try:
            nbytes, anc, _flags, _addr = self._recv((rbuf,), _CMSG_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            failed(exc.errno or 0)
            return
        now = time.perf_counter_ns()
        t_ns = now
        if anc:  # only SO_TIMESTAMPNS is switched on, so this is the kernel's receive time
            try:
                sec, nsec = _TIMESPEC.unpack_from(anc[0][2])
            except struct.error:
                pass
            else:
                t_ns = now - (time.time_ns() - (sec * 1_000_000_000 + nsec))
                if t_ns > now:  # the two clocks were read a few ns apart
                    t_ns = now
        lags.append(now - t_ns)
        data = rbuf[:nbytes].tobytes()
        if nbytes and self._decrypt is not None:
            data = self._decrypt(data)
            if not data:
                return
        if nbytes and self.fast:
            ct = match_token_chunk_py(data)
            if ct >= 0:
                if ct > self.last_ct:
                    if self.first_answer < 0 or self.reasoning_ct > 0:  # see the C reader
                        kind = chunk_kind_py(data)
                        if kind == KIND_REASONING:
                            self.reasoning_ct += ct - self.last_ct
                        elif kind == KIND_ANSWER and self.first_answer < 0:
                            self.first_answer = len(chunk_ns)
                    chunk_ns.append(t_ns)
                    chunk_tokens.append(ct - self.last_ct)
                    self.last_ct = ct
                    if ct - self.reported >= report_every and on_token is not None:
                        on_token(ct - self.reported)
                        self.reported = ct
                return
        self.fast = general(data, t_ns)


try:
    from infer_prof.loadgen._stamped import ReaderGroup as _CReaderGroup
    from infer_prof.loadgen._stamped import StampedReader as _CStampedReader
    from infer_prof.loadgen._stamped import chunk_kind, match_token_chunk
except ImportError:  # not built (no C compiler, not Linux): the Python twin, same numbers
    _CStampedReader = None
    _CReaderGroup = None
    match_token_chunk = match_token_chunk_py
    chunk_kind = chunk_kind_py

#: Which reader the client uses: "c" (compiled hot path) or "python".
READER = "c" if _CStampedReader is not None else "python"


def reader_in_use() -> str:
    """The reader streams get: ``c`` where the extension was built, else ``python``;
    ``INFER_PROF_READER=python`` forces the pure-Python one (for comparisons)."""
    if os.environ.get("INFER_PROF_READER") == "python" or _CStampedReader is None:
        return "python"
    return "c"


def make_reader(
    sock: socket.socket,
    sinks: ReadSinks,
    implementation: str | None = None,
    decrypt: Callable[[bytes], bytes] | None = None,
) -> Any:
    """A reader for one stream socket (see ``PyStampedReader``) that fills ``sinks``: the C one
    where it was built, unless ``implementation`` (or ``INFER_PROF_READER``) says ``python``.
    ``decrypt``: the TLS session's decrypter for an https stream (None for plain HTTP)."""
    which = implementation or reader_in_use()
    if which == "c" and _CStampedReader is not None:
        args = (*sinks.as_tuple(), _REPORT_EVERY)
        if decrypt is None:
            return _CStampedReader(sock.fileno(), *args)
        return _CStampedReader(sock.fileno(), *args, decrypt=decrypt)
    return PyStampedReader(sock, sinks, _REPORT_EVERY, decrypt=decrypt)


def kernel_arrival_ns(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    """The kernel's receive time of the data, on the perf_counter clock; None if absent."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = _TIMESPEC.unpack_from(data)
            age = time.time_ns() - (sec * 1_000_000_000 + nsec)
            return time.perf_counter_ns() - max(age, 0)
    return None


# One ReaderGroup per event loop (C readers only): the loop wakes once for all the sockets that
# are readable together and the reads run in C, instead of one asyncio handle per read.
_GROUPS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def grouping_in_use() -> bool:
    """Whether C readers are watched through one epoll set per loop (``ReaderGroup``);
    ``INFER_PROF_READER_GROUP=0`` watches each socket with ``loop.add_reader`` instead (for
    comparisons). Same reads, same timestamps either way: only the dispatch differs."""
    return _CReaderGroup is not None and os.environ.get("INFER_PROF_READER_GROUP") != "0"


def reader_group(loop: asyncio.AbstractEventLoop) -> Any:
    """The loop's ``ReaderGroup`` (made and watched by the loop on first use); None where the
    extension was not built."""
    if _CReaderGroup is None:
        return None
    group = _GROUPS.get(loop)
    if group is None:
        group = _CReaderGroup()
        loop.add_reader(group.fileno(), group)
        _GROUPS[loop] = group
    return group


def watch(loop: asyncio.AbstractEventLoop, fd: int, reader: Any) -> None:
    """Have ``reader`` called whenever socket ``fd`` is readable: through the loop's
    ``ReaderGroup`` for a C reader (see :func:`grouping_in_use`), else ``loop.add_reader``."""
    if grouping_in_use() and isinstance(reader, _CStampedReader):
        reader_group(loop).add(reader)
    else:
        loop.add_reader(fd, reader)


def unwatch(loop: asyncio.AbstractEventLoop, fd: int, reader: Any) -> None:
    """Undo :func:`watch` (before the socket is closed)."""
    group = _GROUPS.get(loop)  # a group exists only where the C extension was built
    if group is not None and isinstance(reader, _CStampedReader) and group.remove(reader):
        return
    loop.remove_reader(fd)


def read_ready(loop: asyncio.AbstractEventLoop) -> None:
    """Read, now, every stream socket of the loop's ``ReaderGroup`` that is readable (one
    ``epoll_wait`` with no timeout, ~1 us when none is).

    Called before each send: when many streams end together (a wave), the loop runs every
    ended stream's next send in one turn, and without this the reads waited for the whole turn;
    a read later than one inter-token gap merges two tokens into one timestamp. A reader's
    exception goes to the loop's exception handler, as it would from the loop itself."""
    group = _GROUPS.get(loop)
    if group is None or not group.members:
        return
    try:
        group()
    except Exception as exc:  # noqa: BLE001 - reported like a callback's, not the caller's
        loop.call_exception_handler(
            {"message": "stream reader failed", "exception": exc, "handle": group}
        )


def release_reader_group(loop: asyncio.AbstractEventLoop) -> int | None:
    """Stop the loop watching its ``ReaderGroup`` and close the group's epoll fd (call before
    ``loop.close()``, when no stream is left); return the group's wake-ups, i.e. the times it
    found at least one readable socket (``reads / wakeups`` = reads per wake-up). None where no
    group was used. A group that still has readers is left for the garbage collector."""
    group = _GROUPS.pop(loop, None)
    if group is None:
        return None
    wakeups = int(group.wakeups)
    if not loop.is_closed():
        loop.remove_reader(group.fileno())
    if not group.members:
        group.close()
    return wakeups
