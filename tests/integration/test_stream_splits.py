"""A response cut at any byte boundary gives the same tokens as the response delivered whole.

The cuts fall anywhere: in the status line, the headers, a chunk-size line, between a CR and its
LF, inside an SSE event's JSON, in the final 0-chunk. Checked on the pure parser at every single
byte boundary, and with hypothesis-chosen sets of cuts through a real socket server
(:class:`MisbehavingServer`, each piece its own TCP segment) to both readers (C and Python):
the tokens, the number of timestamps and the usage must be those of the unsplit delivery.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen import stamped_reader
from infer_prof.loadgen.client import stream_request
from infer_prof.loadgen.endpoint import Endpoint, StreamConnection, resolve
from infer_prof.loadgen.http_stream import SseResponseParser
from infer_prof.loadgen.openai_requests import build_completion_request

from .misbehaving_server import MisbehavingServer, Reply
from .test_stream_client import full_stream, token_event

pytestmark = pytest.mark.integration

CHUNKED = b"".join(full_stream(6, compact=True))
CLOSE_DELIMITED = (
    b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
    + b"".join(token_event(i).replace(b"\n", b"\r\n") + b": ping\r\n\r\n" for i in range(1, 6))
    + token_event(6, finish="length").replace(b"\n", b"\r\n")
    + b"data: [DONE]\r\n\r\n"
)
RESPONSES = {"chunked": (CHUNKED, "keep"), "close-delimited-crlf": (CLOSE_DELIMITED, "close")}


def parse(pieces: list[bytes], close: bool) -> list[bytes]:
    p = SseResponseParser()
    out = []
    for i, piece in enumerate(pieces):
        out += [e for e, _ in p.feed(piece, i)]
    if close:
        p.feed_eof(len(pieces))
    assert p.complete
    return out


@pytest.mark.parametrize("name", RESPONSES)
def test_the_parser_gives_the_same_events_at_every_single_cut(name):
    raw, end = RESPONSES[name]
    whole = parse([raw], end == "close")
    assert len(whole) == 7  # 6 token events and [DONE]
    for i in range(1, len(raw)):
        assert parse([raw[:i], raw[i:]], end == "close") == whole, i


def cut(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(raw)})
    return [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]


@settings(max_examples=300, deadline=None, database=None)
@given(data=st.data())
@pytest.mark.parametrize("name", RESPONSES)
def test_the_parser_gives_the_same_events_for_any_set_of_cuts(name, data):
    raw, end = RESPONSES[name]
    cuts = data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=40))
    assert parse(cut(raw, cuts), end == "close") == parse([raw], end == "close")


async def _one(url: str) -> RequestRecord:
    endpoint = Endpoint.from_url(url)
    family, addr = await resolve(endpoint)
    conn = StreamConnection(addr, family, endpoint)
    record = RequestRecord(index=0, input_len=7, max_tokens=6)
    try:
        await stream_request(conn, build_completion_request(endpoint, "m", [1] * 7, 6), record,
                             5.0)
    finally:
        conn.close()
    return record


def served(pieces: list[bytes], end: str) -> RequestRecord:
    with MisbehavingServer(Reply(pieces, end=end, gap_s=0.001)) as server:
        record = asyncio.run(_one(server.url))
        assert server.requests == 1
    return record


@pytest.fixture(params=["c", "python"])
def reader(request):
    if request.param == "c":
        assert stamped_reader.READER == "c", "the C reader was not built"
    return request.param


@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@pytest.mark.parametrize("name", RESPONSES)
def test_any_cuts_through_a_socket_give_the_unsplit_tokens(name, reader, data, monkeypatch):
    monkeypatch.setenv("INFER_PROF_READER", reader)
    raw, end = RESPONSES[name]
    cuts = data.draw(st.lists(st.integers(1, len(raw) - 1), min_size=1, max_size=12))
    whole = served([raw], end)
    assert whole.ok, whole.error_detail
    split = served(cut(raw, cuts), end)
    assert split.error is None, split.error_detail
    assert split.chunk_tokens == whole.chunk_tokens == [1] * 6
    assert len(split.chunk_ns) == len(whole.chunk_ns)
    assert split.chunk_ns == sorted(split.chunk_ns)
    assert split.output_tokens == whole.output_tokens == 6
    assert split.finish_reason == whole.finish_reason == "length"
