"""The client tells a reasoning chunk from an answer chunk without parsing JSON, and the C and
Python readers and the general parser agree.

The chat events are byte-for-byte what vLLM 0.32's chat endpoint streams with a reasoning parser
and ``continuous_usage_stats`` (``ChatCompletionStreamResponse.model_dump_json(exclude_unset=
True)`` of ``DeltaMessage(reasoning=...)``, ``DeltaMessage(reasoning=..., content=None)`` as the
base thinking parser builds it, ``DeltaMessage(content=...)``).
"""

import orjson
import pytest

from infer_prof.loadgen import stamped_reader
from infer_prof.loadgen.client import chunk_kind_of
from infer_prof.loadgen.stamped_reader import KIND_ANSWER, KIND_NEITHER, KIND_REASONING

HEAD = (b'data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1,"model":"tiny",'
        b'"choices":[{"index":0,"delta":')
TAIL = (b',"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":8,'
        b'"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":2}}}\n\n')


def chat(delta: bytes) -> bytes:
    return HEAD + delta + TAIL


def wire(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


COMPLETION = (
    b'data: {"id":"cmpl-abc","object":"text_completion","created":1,"model":"tiny","choices":'
    b'[{"index":0,"text":" hi","logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens"'
    b':5,"total_tokens":8,"completion_tokens":3}}\n\n')

CASES = [
    (chat(b'{"reasoning":" think"}'), KIND_REASONING),
    (chat(b'{"content":null,"reasoning":"r"}'), KIND_REASONING),
    (chat(b'{"reasoning_content":"r"}'), KIND_REASONING),  # vLLM before 0.10, SGLang
    (chat(b'{"reasoning":""}'), KIND_REASONING),  # a partial UTF-8 sequence while thinking
    (chat(b'{"content":"","reasoning":"r"}'), KIND_REASONING),
    (chat(b'{"content":" ans"}'), KIND_ANSWER),
    (chat(b'{"content":"a","reasoning":"r"}'), KIND_ANSWER),  # the turn: answer has begun
    (chat(b'{"content":""}'), KIND_ANSWER),  # a partial UTF-8 sequence of the answer
    (chat(b'{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}'), KIND_ANSWER),
    (chat(b'{"role":null,"content":"x","reasoning_content":null,"tool_calls":null}'),
     KIND_ANSWER),  # every field written, nulls too
    (chat(b'{"content":"say \\"reasoning\\":\\"x\\""}'), KIND_ANSWER),  # keys inside text
    (chat(b'{"reasoning":"say \\"content\\":\\"x\\""}'), KIND_REASONING),
    (chat(b'{"reasoning":"r","content":"a"}'), KIND_ANSWER),  # any key order
    (chat(b'{"reasoning":"r","tool_calls":[{"index":0}]}'), KIND_ANSWER),
    (chat(b'{"content":"\\\\","reasoning":"r"}'), KIND_ANSWER),  # an escaped backslash
    (chat(b'{"tool_calls":[{"function":{"arguments":"{\\"content\\":\\"x\\"}"}}]}'),
     KIND_ANSWER),
    (chat(b'{"role":"assistant","reasoning":"r"}'), KIND_REASONING),
    (chat(b'{}'), KIND_NEITHER),
    (chat(b'{"content":null}'), KIND_NEITHER),
    (chat(b'{"tool_calls":[]}'), KIND_NEITHER),
    (COMPLETION, KIND_ANSWER),
]


@pytest.mark.parametrize(("event", "kind"), CASES)
def test_each_reader_and_the_general_parser_classify_a_chunk_alike(event, kind):
    assert stamped_reader.READER == "c", "the C reader was not built"
    data = wire(event)
    assert stamped_reader.chunk_kind_py(data) == kind
    assert stamped_reader.chunk_kind(data) == kind
    choice = orjson.loads(event.removeprefix(b"data: "))["choices"][0]
    assert chunk_kind_of(choice) == kind


def test_the_c_and_python_classifiers_agree_on_mutated_chunks():
    """Equal kinds from both on every single-byte change, deletion and truncation of a
    reasoning chunk and an answer chunk."""
    bases = (b'{"content":null,"reasoning":"r"}', b'{"content":"a"}',
             b'{"tool_calls":[{"a":"\\"]"}],"reasoning":"r\\\\"}')
    for base in (wire(chat(delta)) for delta in bases):
        for i in range(len(base)):
            for data in (base[:i], base[:i] + base[i + 1:],
                         *(base[:i] + ch + base[i + 1:]
                           for ch in (b'"', b"{", b"}", b"x", b"[", b"]", b"\\", b","))):
                assert stamped_reader.chunk_kind(data) == stamped_reader.chunk_kind_py(data), data


@pytest.mark.parametrize("which", ["python", "c"])
def test_a_reader_counts_reasoning_tokens_and_finds_the_first_answer_chunk(which):
    """Three reasoning chunks of 1, 2 and 1 tokens, then answer chunks: ``reasoning_ct`` 4 and
    ``first_answer`` 3 (its index in ``chunk_ns``), read through a real socket pair."""
    import socket

    a, b = socket.socketpair()
    b.setsockopt(socket.SOL_SOCKET, stamped_reader.SO_TIMESTAMPNS, 1)
    b.setblocking(False)
    ns: list[int] = []
    toks: list[int] = []
    sinks = stamped_reader.ReadSinks(ns, toks, [], lambda data, t: True, lambda e: None, None)
    reader = stamped_reader.make_reader(b, sinks, implementation=which)
    reader.fast = 1
    ct = 0
    for k, delta in ((1, b'{"reasoning":"a"}'), (2, b'{"content":null,"reasoning":"b"}'),
                     (1, b'{"reasoning":"c"}'), (2, b'{"content":"d"}'), (1, b'{"content":"e"}')):
        ct += k
        a.send(wire(chat(delta).replace(b'"completion_tokens":3', b'"completion_tokens":%d' % ct)))
        reader()
    a.close()
    b.close()
    assert toks == [1, 2, 1, 2, 1]
    assert (reader.reasoning_ct, reader.first_answer) == (4, 3)


@pytest.mark.parametrize("which", ["python", "c"])
def test_a_stream_that_answers_first_is_not_classified_further(which):
    """A plain model's stream pays for its first chunk only: a later reasoning chunk is not
    looked at (the server's usage still counts its tokens)."""
    import socket

    a, b = socket.socketpair()
    b.setsockopt(socket.SOL_SOCKET, stamped_reader.SO_TIMESTAMPNS, 1)
    b.setblocking(False)
    sinks = stamped_reader.ReadSinks([], [], [], lambda data, t: True, lambda e: None, None)
    reader = stamped_reader.make_reader(b, sinks, implementation=which)
    reader.fast = 1
    for ct, delta in ((1, b'{"content":"a"}'), (2, b'{"reasoning":"b"}')):
        a.send(wire(chat(delta).replace(b'"completion_tokens":3', b'"completion_tokens":%d' % ct)))
        reader()
    a.close()
    b.close()
    assert (reader.reasoning_ct, reader.first_answer) == (0, 0)
