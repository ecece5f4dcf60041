"""The client's fast path recognises vLLM's token chunks and nothing else.

The events below are byte-for-byte what vLLM 0.32's completions endpoint streams with
``continuous_usage_stats`` (CompletionStreamResponse.model_dump_json(exclude_unset=True)).
"""

import pytest

from infer_prof.loadgen.client import _TOKEN_CHUNK

VLLM_TOKEN = (
    b'data: {"id":"cmpl-abc","object":"text_completion","created":1,"model":"tiny","choices":'
    b'[{"index":0,"text":" hi","logprobs":null,"finish_reason":null,"stop_reason":null,'
    b'"prompt_token_ids":null,"token_ids":null}],"usage":{"prompt_tokens":5,"total_tokens":8,'
    b'"completion_tokens":3}}\n\n'
)
VLLM_LAST = VLLM_TOKEN.replace(b'"finish_reason":null', b'"finish_reason":"length"')


def wire(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def fast(data: bytes) -> int | None:
    """What the client's fast path takes from one read: completion tokens, or None."""
    m = _TOKEN_CHUNK.fullmatch(data)
    if m is None or int(m.group(1), 16) != m.end(2) - m.start(2) + 2:
        return None
    return int(m.group(3))


def test_a_vllm_token_chunk_takes_the_fast_path():
    assert fast(wire(VLLM_TOKEN)) == 3


@pytest.mark.parametrize(
    "data",
    [
        wire(VLLM_LAST),  # the finish reason must reach the JSON parser
        wire(VLLM_TOKEN) + wire(VLLM_TOKEN),  # two events in one read
        wire(VLLM_TOKEN)[:-3],  # half a chunk
        wire(VLLM_TOKEN.replace(b"\n\n", b"\r\n\r\n")),  # other line endings
        wire(b'data: {"error":{"message":"boom"}}\n\n'),
        wire(VLLM_TOKEN.replace(b":3}", b":null}")),  # no count
        b"%x\r\n%s\r\n" % (len(VLLM_TOKEN) + 1, VLLM_TOKEN),  # chunk size that does not fit
        wire(b": keep-alive comment\n\n" + VLLM_TOKEN),
    ],
)
def test_anything_else_goes_to_the_general_parser(data):
    assert fast(data) is None
