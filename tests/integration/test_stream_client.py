"""The streaming client against a real local HTTP server that sends scripted bytes.

Checks, for the C reader and its pure-Python twin, that the fast path (one vLLM-style token
event per chunk, read without a JSON parser) and the general parser agree, and what happens when
several events share a read or a stream is cut off.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time

import pytest

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen import stamped_reader
from infer_prof.loadgen.client import stream_request
from infer_prof.loadgen.client_health import ReadStats
from infer_prof.loadgen.endpoint import Endpoint, StreamConnection, resolve
from infer_prof.loadgen.openai_requests import build_completion_request
from infer_prof.loadgen.pacing import SendPacer


@pytest.fixture(autouse=True, params=["c", "c-direct", "python"])
def reader(request, monkeypatch):
    """Every test here runs with the compiled reader (behind the loop's ReaderGroup, and
    watched on its own with ``loop.add_reader``) and with its pure-Python twin."""
    if request.param.startswith("c"):
        assert stamped_reader.READER == "c", (
            "the C reader was not built (infer_prof/loadgen/_stamped.c)")
    monkeypatch.setenv("INFER_PROF_READER", "python" if request.param == "python" else "c")
    monkeypatch.setenv("INFER_PROF_READER_GROUP", "0" if request.param == "c-direct" else "1")
    return request.param


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def token_event(n: int, *, compact: bool = True, finish: str | None = None) -> bytes:
    obj = {
        "id": "cmpl-1",
        "object": "text_completion",
        "model": "m",
        "choices": [{"index": 0, "text": " t", "logprobs": None, "finish_reason": finish}],
        "usage": {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": 7 + n},
    }
    sep = (",", ":") if compact else (", ", ": ")
    return b"data: " + json.dumps(obj, separators=sep).encode() + b"\n\n"


def full_stream(n: int, *, compact: bool) -> list[bytes]:
    """One write per token event, then the final one with usage-only event and [DONE]."""
    writes = [HEAD] + [chunk(token_event(i, compact=compact)) for i in range(1, n)]
    last = token_event(n, compact=compact, finish="length")
    writes.append(chunk(last) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    return writes


async def serve_script(writes: list[bytes], gap_s: float = 0.003):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
        )
        await reader.readexactly(length)
        for w in writes:
            writer.write(w)
            await writer.drain()
            await asyncio.sleep(gap_s)
        await asyncio.sleep(0.05)
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def one_request(
    writes: list[bytes], timeout_s: float = 5.0, pacer: SendPacer | None = None
) -> tuple[RequestRecord, int]:
    server = await serve_script(writes)
    port = server.sockets[0].getsockname()[1]
    endpoint = Endpoint.from_url(f"http://127.0.0.1:{port}")
    family, addr = await resolve(endpoint)
    conn = StreamConnection(addr, family)
    record = RequestRecord(index=0, input_len=7, max_tokens=8)
    seen: list[int] = []
    stats = ReadStats()
    request = build_completion_request(endpoint, "m", [1] * 7, 8)
    try:
        await stream_request(conn, request, record, timeout_s, seen.append, stats, pacer)
    finally:
        conn.close()
        server.close()
        await server.wait_closed()
    return record, sum(seen)


@pytest.mark.parametrize("compact", [True, False])
def test_fast_path_and_json_parser_give_the_same_record(compact):
    record, reported = asyncio.run(one_request(full_stream(8, compact=compact)))
    assert record.ok, record.error_detail
    assert record.chunk_tokens == [1] * 8
    assert len(record.chunk_ns) == 8 and record.chunk_ns == sorted(record.chunk_ns)
    assert record.output_tokens == 8 and record.prompt_tokens == 7
    assert record.token_count_source == "usage"
    assert record.finish_reason == "length"
    assert reported == 8  # progress saw every token


def test_two_events_in_one_read_are_two_chunks_with_one_time():
    writes = full_stream(6, compact=True)
    # tokens 2 and 3 leave in one write, so they arrive in one segment
    writes[2:4] = [writes[2] + writes[3]]
    record, _ = asyncio.run(one_request(writes))
    assert record.ok
    assert record.chunk_tokens == [1] * 6
    assert record.chunk_ns[1] == record.chunk_ns[2]
    assert record.output_tokens == 6


def test_a_chunk_carrying_two_tokens_counts_two():
    writes = [HEAD, chunk(token_event(1)), chunk(token_event(3))]
    writes.append(chunk(token_event(4, finish="length")) + b"0\r\n\r\n")
    record, reported = asyncio.run(one_request(writes))
    assert record.ok
    assert record.chunk_tokens == [1, 2, 1]
    assert record.output_tokens == 4 and reported == 4


def test_stream_cut_off_keeps_the_tokens_seen():
    writes = full_stream(8, compact=True)[:5]  # head + 4 tokens, then the server closes
    record, reported = asyncio.run(one_request(writes))
    assert not record.ok
    assert record.error == "connection_closed"
    assert record.chunk_tokens == [1] * 4
    assert record.output_tokens == 4 and reported == 4


class SlowPacer(SendPacer):
    """A pacer whose every deferred call waits 50 ms: the parse happens long after the read."""

    def __init__(self) -> None:
        super().__init__()
        self.deferred_at_ns: list[int] = []

    def run(self, fn):
        def later():
            self.deferred_at_ns.append(time.perf_counter_ns())
            fn()

        asyncio.get_running_loop().call_later(0.05, later)


def test_a_final_read_parsed_later_keeps_its_arrival_time_and_gives_the_same_record():
    writes = full_stream(6, compact=True)
    plain, plain_seen = asyncio.run(one_request(writes))

    async def paced():
        pacer = SlowPacer()
        rec, seen = await one_request(writes, pacer=pacer)
        return rec, seen, pacer.deferred_at_ns

    rec, seen, parsed_at = asyncio.run(paced())
    assert len(parsed_at) == 1  # the final read went through the pacer
    assert rec.ok and rec.finish_reason == plain.finish_reason == "length"
    assert rec.chunk_tokens == plain.chunk_tokens and rec.output_tokens == plain.output_tokens == 6
    assert seen == plain_seen == 6
    # the end is when the final bytes arrived, not when they were parsed 50 ms later
    assert rec.done_ns == rec.chunk_ns[-1]
    assert parsed_at[0] - rec.done_ns >= 45_000_000
    assert rec.done_ns - rec.send_ns < plain.done_ns - plain.send_ns + 20_000_000


def test_finished_requests_leave_no_reference_cycles(synthetic):
    """Runs pause the garbage collector while timing, so a request must be freed by reference
    counting alone: a cycle per request (reader <-> its callbacks) would grow the client's
    memory by every request of a long run."""
    server = synthetic(ttft_ms=1.0, itl_ms=0.2, tokens=8)

    async def requests(n: int) -> None:
        endpoint = Endpoint.from_url(server.url)
        family, addr = await resolve(endpoint)
        conn = StreamConnection(addr, family)
        pacer = SendPacer()
        request = build_completion_request(endpoint, "synthetic", [1] * 4, 8)
        for i in range(n):
            rec = RequestRecord(index=i, input_len=4, max_tokens=8)
            await stream_request(conn, request, rec, 5.0, None, ReadStats(), pacer)
            assert rec.ok and rec.output_tokens == 8, rec.error_detail
        conn.close()

    asyncio.run(requests(3))  # imports and first-use caches
    gc.collect()
    gc.disable()
    try:
        asyncio.run(requests(50))
        unreachable = gc.collect()
    finally:
        gc.enable()
    assert unreachable <= 5  # 50 requests; one cycle each would leave 1,700 objects here
