"""Other servers' streams, replayed byte for byte to both readers through a real TCP server.

Each golden transcript in tests/fixtures/streams/ (see its README) is served by a local socket
server that stamps (perf_counter_ns, the client's clock) every write, once with one write per
HTTP chunk (or per SSE event without chunking) and once with every write split again at awkward
offsets (inside the chunk-size line, mid-JSON, between a CR and its LF). The first token's time
must be the arrival of the write that completed the first content or reasoning chunk: after that
write started and before the next one.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen import stamped_reader
from infer_prof.loadgen.client import stream_request
from infer_prof.loadgen.endpoint import Endpoint, StreamConnection, resolve
from infer_prof.loadgen.openai_requests import build_chat_request, chat_messages

STREAMS = Path(__file__).parent.parent / "fixtures" / "streams"
EXPECTED = {
    k: v for k, v in json.loads((STREAMS / "expected.json").read_text()).items() if k != "_about"
}
GAP_S = 0.01  # between writes: far longer than a loopback delivery
SLACK_NS = 300_000  # clock-conversion jitter allowed before a write's start


@pytest.fixture(autouse=True, params=["c", "python"])
def reader(request, monkeypatch):
    if request.param == "c":
        assert stamped_reader.READER == "c", (
            "the C reader was not built (infer_prof/loadgen/_stamped.c)")
    monkeypatch.setenv("INFER_PROF_READER", request.param)
    return request.param


def writes_of(raw: bytes) -> list[bytes]:
    """The head, then one write per HTTP chunk (a chunked body) or per SSE event (otherwise)."""
    end = raw.index(b"\r\n\r\n") + 4
    head, body = raw[:end], raw[end:]
    out = [head]
    if b"transfer-encoding: chunked" in head.lower():
        pos = 0
        while pos < len(body):
            eol = body.index(b"\r\n", pos)
            size = int(body[pos:eol], 16)
            stop = eol + 2 + size + 2 if size else len(body)
            out.append(body[pos:stop])
            pos = stop
    else:
        sep = b"\r\n\r\n" if b"\r\n" in body else b"\n\n"
        out += [p + sep for p in body.split(sep) if p]
    assert b"".join(out) == raw
    return out


def awkward(write: bytes) -> list[bytes]:
    """A write cut after its first byte, in its middle and before its last byte."""
    cuts = sorted({c for c in (1, len(write) // 2, len(write) - 1) if 0 < c < len(write)})
    return [write[a:b] for a, b in zip([0, *cuts], [*cuts, len(write)], strict=True)]


async def replay(groups: list[list[bytes]]) -> tuple[RequestRecord, list[tuple[int, int]]]:
    """Serve ``groups`` (each a write split into pieces) to one chat request; return the record
    and, per group, (start of its first piece, start of the piece before its last) in
    perf_counter ns. The last piece of an awkward split is the chunk's final LF (not part of
    the SSE event) or an event's last LF, so an event is complete no earlier than the piece
    before it, in the middle of its JSON."""
    stamps: list[tuple[int, int]] = []

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        head = await r.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        await r.readexactly(length)
        for pieces in groups:
            starts = []
            for i, piece in enumerate(pieces):
                starts.append(time.perf_counter_ns())
                w.write(piece)
                await w.drain()
                await asyncio.sleep(GAP_S if i == len(pieces) - 1 else 0.002)
            stamps.append((starts[0], starts[-2] if len(starts) > 2 else starts[-1]))
        w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    endpoint = Endpoint.from_url(f"http://127.0.0.1:{port}")
    family, addr = await resolve(endpoint)
    conn = StreamConnection(addr, family)
    record = RequestRecord(index=0, input_len=7, max_tokens=4)
    try:
        await stream_request(conn, build_chat_request(endpoint, "m", chat_messages("hi"), 4),
                             record, 5.0)
    finally:
        conn.close()
        server.close()
        await server.wait_closed()
    return record, stamps


@pytest.mark.parametrize("split", ["whole", "awkward"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_transcript_gives_the_documented_numbers(name, split):
    exp = EXPECTED[name]
    writes = writes_of((STREAMS / name).read_bytes())
    groups = [[w] if split == "whole" else awkward(w) for w in writes]
    record, stamps = asyncio.run(replay(groups))
    assert record.chunk_tokens == exp["chunk_tokens"]
    i = exp["first_token_write"]
    # the first token is the read that completed write i: not before its last piece started,
    # and before the next write started
    assert record.chunk_ns[0] >= stamps[i][1] - SLACK_NS
    assert i + 1 >= len(stamps) or record.chunk_ns[0] < stamps[i + 1][0]
    assert record.send_ns is not None and record.chunk_ns[0] > record.send_ns
    if exp["error"]:
        assert record.error == exp["error"]
        assert exp["error_detail"] in (record.error_detail or "")
        assert not record.ok
        return
    assert record.error is None, record.error_detail
    assert record.ok
    assert record.output_tokens == exp["output_tokens"]
    assert record.prompt_tokens == exp["prompt_tokens"]
    assert record.finish_reason == exp["finish_reason"]
    assert record.token_count_source == exp["token_count_source"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_fast_path_never_misreads_another_servers_chunk(name):
    """Every HTTP chunk of every transcript, given whole to the fast-path matcher (C and
    Python): either not taken (-1) or exactly the cumulative completion_tokens it carries."""
    from infer_prof.loadgen._stamped import match_token_chunk as c_match

    writes = writes_of((STREAMS / name).read_bytes())[1:]
    taken = 0
    for w in writes:
        want = {c_match(w), stamped_reader.match_token_chunk_py(w)}
        assert len(want) == 1, w
        got = want.pop()
        if got == -1:
            continue
        taken += 1
        payload = json.loads(w.split(b"data:", 1)[1])
        assert payload["usage"]["completion_tokens"] == got
        assert payload["choices"][0]["finish_reason"] is None
    # only vLLM's per-chunk-usage streams have chunks the fast path may take
    assert (taken > 0) == name.startswith("vllm_") or name == "vllm_chat_error.http"


def test_usage_that_starts_mid_stream_is_not_counted_twice():
    """Content chunks without usage, then vLLM-shaped chunks with cumulative usage (which the
    fast path would take): once counted per chunk, a stream stays counted per chunk."""

    def ev(n: int, usage: bool) -> bytes:
        obj = {"id": "c", "object": "text_completion", "model": "m",
               "choices": [{"index": 0, "text": " t", "logprobs": None, "finish_reason": None}],
               "usage": {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": 7 + n}
               if usage else None}
        data = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
        return b"%x\r\n%s\r\n" % (len(data), data)

    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n")
    writes = [head, ev(1, False), ev(2, False), ev(3, True), ev(4, True),
              b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"]
    record, _ = asyncio.run(replay([[w] for w in writes]))
    assert record.ok, record.error_detail
    assert record.chunk_tokens == [1, 1, 1, 1]
    assert record.output_tokens == 4 and record.token_count_source == "usage_total"
