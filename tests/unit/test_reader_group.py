"""The C ``ReaderGroup``: many stream sockets behind one epoll set, read in one wake-up.

Real TCP connections on loopback (kernel receive timestamps included); the group is driven by
hand here, and by the event loop in tests/integration/test_stream_client.py.
"""

from __future__ import annotations

import asyncio
import select
import socket
import sys
import time

import pytest

from infer_prof.loadgen import stamped_reader

pytestmark = pytest.mark.skipif(
    stamped_reader.READER != "c", reason="the C extension was not built"
)

TOKEN = (
    b'data: {"choices":[{"index":0,"text":" hi","finish_reason":null}],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":%d}}\n\n'
)


def wire(ct: int) -> bytes:
    event = TOKEN % ct
    return b"%x\r\n%s\r\n" % (len(event), event)


class Stream:
    """One loopback TCP connection and the C reader of its client end."""

    def __init__(self, listener: socket.socket) -> None:
        self.client = socket.create_connection(listener.getsockname())
        self.client.setsockopt(socket.SOL_SOCKET, stamped_reader.SO_TIMESTAMPNS, 1)
        self.client.setblocking(False)
        self.server, _ = listener.accept()
        self.server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.chunk_ns: list[int] = []
        self.chunk_tokens: list[int] = []
        self.lags: list[int] = []
        self.general_calls: list[bytes] = []
        self.boom = False  # general() raises
        self.reader = stamped_reader.make_reader(
            self.client,
            stamped_reader.ReadSinks(self.chunk_ns, self.chunk_tokens, self.lags, self.general,
                                     self.failed, None),
            implementation="c",
        )
        self.reader.fast = 1  # at a chunk boundary: token chunks take the fast path

    def general(self, data: bytes, t_ns: int) -> bool:
        self.general_calls.append(data)
        if self.boom:
            raise RuntimeError("reader failed")
        return True

    def failed(self, errno: int) -> None:
        raise AssertionError(f"receive failed: errno {errno}")

    def close(self) -> None:
        self.client.close()
        self.server.close()


@pytest.fixture
def streams():
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    made: list[Stream] = []

    def make(n: int) -> list[Stream]:
        new = [Stream(listener) for _ in range(n)]
        made.extend(new)
        return new

    yield make
    for s in made:
        s.close()
    listener.close()


def wait_readable(socks: list[socket.socket], timeout_s: float = 5.0) -> None:
    """Until every socket has data queued (so that one epoll_wait sees them all)."""
    deadline = time.monotonic() + timeout_s
    pending = set(socks)
    while pending and time.monotonic() < deadline:
        ready, _, _ = select.select(list(pending), [], [], 0.05)
        pending -= set(ready)
    assert not pending, "data did not arrive"


def test_one_call_reads_every_ready_socket_with_kernel_times(streams):
    group = stamped_reader._CReaderGroup()
    ss = streams(8)
    for s in ss:
        group.add(s.reader)
    assert group.members == 8
    t0 = time.perf_counter_ns()
    for s in ss:
        s.server.sendall(wire(1))
    wait_readable([s.client for s in ss])
    group()
    assert (group.wakeups, group.reads) == (1, 8)
    for s in ss:
        assert s.chunk_tokens == [1]
        assert t0 <= s.chunk_ns[0] <= time.perf_counter_ns()
        assert len(s.lags) == 1 and s.lags[0] >= 0
        assert s.general_calls == []
    group()  # nothing ready: no read, no wake-up counted
    assert (group.wakeups, group.reads) == (1, 8)
    for s in ss:
        group.remove(s.reader)
    group.close()


def test_removed_readers_are_not_read_and_their_references_are_returned(streams):
    group = stamped_reader._CReaderGroup()
    a, b = streams(2)
    before = sys.getrefcount(a.reader)
    group.add(a.reader)
    group.add(b.reader)
    held = sys.getrefcount(a.reader)  # outside the assert: its rewriting holds temporaries
    assert held == before + 1
    with pytest.raises(RuntimeError, match="already"):
        group.add(a.reader)
    assert group.remove(a.reader) is True
    assert group.remove(a.reader) is False  # not watched any more
    held = sys.getrefcount(a.reader)
    assert held == before
    a.server.sendall(wire(1))
    b.server.sendall(wire(1))
    wait_readable([a.client, b.client])
    group()
    assert a.chunk_tokens == [] and b.chunk_tokens == [1]
    with pytest.raises(RuntimeError, match="still has readers"):
        group.close()
    group.remove(b.reader)
    group.close()
    with pytest.raises(ValueError):
        group.fileno()


def test_only_stamped_readers_join(streams):
    group = stamped_reader._CReaderGroup()
    with pytest.raises(TypeError):
        group.add(object())
    group.close()


def test_a_socket_closed_before_remove_does_not_break_the_group(streams):
    group = stamped_reader._CReaderGroup()
    (a,) = streams(1)
    group.add(a.reader)
    a.client.close()  # the kernel drops it from the epoll set
    assert group.remove(a.reader) is True
    assert group.members == 0
    group.close()


def test_a_reader_removed_by_another_in_the_same_round_is_skipped(streams):
    group = stamped_reader._CReaderGroup()
    a, b = streams(2)
    for s in (a, b):
        s.reader.fast = 0  # every read goes to general()

    def remove_the_other(s: Stream, other: Stream):
        def general(data: bytes, t_ns: int) -> bool:
            s.general_calls.append(data)
            group.remove(other.reader)
            return True
        return general

    a.reader.__init__(a.client.fileno(), a.chunk_ns, a.chunk_tokens, a.lags,
                      remove_the_other(a, b), a.failed, None)
    b.reader.__init__(b.client.fileno(), b.chunk_ns, b.chunk_tokens, b.lags,
                      remove_the_other(b, a), b.failed, None)
    group.add(a.reader)
    group.add(b.reader)
    a.server.sendall(b"x")
    b.server.sendall(b"y")
    wait_readable([a.client, b.client])
    group()
    assert group.reads == 1  # whichever came first removed the other
    assert len(a.general_calls) + len(b.general_calls) == 1
    assert group.members == 1
    first = a if a.general_calls else b
    assert group.remove(first.reader) is True
    group.close()


def test_an_exception_ends_the_round_and_the_rest_are_read_next_time(streams):
    group = stamped_reader._CReaderGroup()
    ss = streams(3)
    calls: list[int] = []

    def general_of(i: int):
        def general(data: bytes, t_ns: int) -> bool:
            calls.append(i)
            if len(calls) == 1:
                raise RuntimeError("boom")
            return True
        return general

    for i, s in enumerate(ss):
        s.reader.__init__(s.client.fileno(), s.chunk_ns, s.chunk_tokens, s.lags,
                          general_of(i), s.failed, None)
        group.add(s.reader)
        s.server.sendall(b"data")
    wait_readable([s.client for s in ss])
    with pytest.raises(RuntimeError, match="boom"):
        group()
    assert len(calls) == 1
    group()  # level-triggered: the two not reached are still ready
    assert sorted(calls[1:]) == sorted(set(range(3)) - {calls[0]})
    for s in ss:
        group.remove(s.reader)
    group.close()


async def stream_watched(ss: list[Stream], tokens: int) -> None:
    """On the running loop: watch every stream's reader, have each server send ``tokens`` token
    chunks 20 ms apart, then unwatch them."""
    loop = asyncio.get_running_loop()
    for s in ss:
        stamped_reader.watch(loop, s.client.fileno(), s.reader)
    for ct in range(1, tokens + 1):
        for s in ss:
            s.server.sendall(wire(ct))
        await asyncio.sleep(0.02)
    for s in ss:
        stamped_reader.unwatch(loop, s.client.fileno(), s.reader)


def test_the_event_loop_drives_the_group(streams):
    """watch()/unwatch() on a running loop: the C readers go through the loop's group."""
    ss = streams(4)

    async def main() -> int | None:
        await stream_watched(ss, 5)
        return stamped_reader.release_reader_group(asyncio.get_running_loop())

    wakeups = asyncio.run(main())
    for s in ss:
        assert s.chunk_tokens == [1] * 5
    assert wakeups is not None and 5 <= wakeups < 20  # several sockets per wake-up


def test_release_closes_the_group_and_a_new_one_follows(streams):
    (s,) = streams(1)

    async def main() -> tuple[int | None, int | None, bool]:
        loop = asyncio.get_running_loop()
        stamped_reader.watch(loop, s.client.fileno(), s.reader)
        group = stamped_reader.reader_group(loop)
        fd = group.fileno()
        stamped_reader.unwatch(loop, s.client.fileno(), s.reader)
        first = stamped_reader.release_reader_group(loop)
        closed = True
        try:
            group.fileno()
            closed = False
        except ValueError:
            pass
        again = stamped_reader.release_reader_group(loop)  # nothing left to release
        stamped_reader.watch(loop, s.client.fileno(), s.reader)  # a fresh group
        assert stamped_reader.reader_group(loop) is not group
        stamped_reader.unwatch(loop, s.client.fileno(), s.reader)
        stamped_reader.release_reader_group(loop)
        assert fd >= 0
        return first, again, closed

    first, again, closed = asyncio.run(main())
    assert first == 0 and again is None and closed


def test_read_ready_reads_without_yielding_to_the_loop(streams):
    """What the client calls before each send: the group's ready sockets are read at once,
    inside the running coroutine, so a wave of sends does not hold other streams' reads."""
    ss = streams(3)
    errors: list[dict] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
        for s in ss:
            stamped_reader.watch(loop, s.client.fileno(), s.reader)
        for s in ss:
            s.server.sendall(wire(1))
        wait_readable([s.client for s in ss])  # blocking: the loop does not run meanwhile
        assert all(s.chunk_tokens == [] for s in ss)
        stamped_reader.read_ready(loop)
        assert all(s.chunk_tokens == [1] for s in ss)
        # a reader's exception is the loop's to report, not the sender's
        ss[0].boom = True
        ss[0].server.sendall(b"x")  # not a token chunk: general() gets it
        wait_readable([ss[0].client])
        stamped_reader.read_ready(loop)
        for s in ss:
            stamped_reader.unwatch(loop, s.client.fileno(), s.reader)
        stamped_reader.read_ready(loop)  # no members: nothing to do

    asyncio.run(main())
    assert len(errors) == 1 and isinstance(errors[0]["exception"], RuntimeError)



def test_client_loop_releases_the_group_and_closes_the_loop(streams):
    """client_loop(): the loop every client measures in gives back its group's wake-ups and is
    closed on the way out, with the collector paused only while measuring."""
    import gc

    from infer_prof.loadgen.client_loop import client_loop

    ss = streams(3)

    async def main() -> bool:
        await stream_watched(ss, 3)
        return gc.isenabled()

    with client_loop(set_current=True) as measuring:
        assert asyncio.get_event_loop_policy().get_event_loop() is measuring.loop
        collecting = measuring.measure(main())
    assert collecting is False and gc.isenabled()
    assert measuring.loop.is_closed()
    assert measuring.reader_wakeups is not None and 3 <= measuring.reader_wakeups < 9
    for s in ss:
        assert s.chunk_tokens == [1] * 3
    asyncio.set_event_loop(None)


def test_client_loop_closes_after_an_error(streams):
    from infer_prof.loadgen.client_loop import client_loop

    (s,) = streams(1)

    async def fails() -> None:
        stamped_reader.watch(asyncio.get_running_loop(), s.client.fileno(), s.reader)
        raise RuntimeError("driver failed")

    with pytest.raises(RuntimeError, match="driver failed"), client_loop() as measuring:
        measuring.measure(fails())
    assert measuring.loop.is_closed()
    assert measuring.reader_wakeups == 0  # released, though a reader was still watched
