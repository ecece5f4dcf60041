"""The client's fast path recognises vLLM's token chunks and nothing else.

The events below are byte-for-byte what vLLM 0.32's completions endpoint streams with
``continuous_usage_stats`` (CompletionStreamResponse.model_dump_json(exclude_unset=True)).
"""

import pytest

from infer_prof.loadgen import stamped_reader

VLLM_TOKEN = (
    b'data: {"id":"cmpl-abc","object":"text_completion","created":1,"model":"tiny","choices":'
    b'[{"index":0,"text":" hi","logprobs":null,"finish_reason":null,"stop_reason":null,'
    b'"prompt_token_ids":null,"token_ids":null}],"usage":{"prompt_tokens":5,"total_tokens":8,'
    b'"completion_tokens":3}}\n\n'
)
VLLM_LAST = VLLM_TOKEN.replace(b'"finish_reason":null', b'"finish_reason":"length"')


def wire(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


MATCHERS = {"python": stamped_reader.match_token_chunk_py, "c": stamped_reader.match_token_chunk}


@pytest.fixture(params=["python", "c"])
def fast(request):
    """What the client's fast path takes from one read: completion tokens, or None; for the
    pure-Python reader and the C one (which must be built wherever these tests run)."""
    if request.param == "c":
        assert stamped_reader.READER == "c", (
            "the C reader was not built (infer_prof/loadgen/_stamped.c)")
    match = MATCHERS[request.param]

    def take(data: bytes) -> int | None:
        ct = match(data)
        return None if ct < 0 else ct

    return take


def test_a_vllm_token_chunk_takes_the_fast_path(fast):
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
def test_anything_else_goes_to_the_general_parser(fast, data):
    assert fast(data) is None


def test_uppercase_chunk_sizes_and_the_last_count_in_the_line(fast):
    assert fast(b"%X\r\n%s\r\n" % (len(VLLM_TOKEN), VLLM_TOKEN)) == 3
    assert fast(b"%08x\r\n%s\r\n" % (len(VLLM_TOKEN), VLLM_TOKEN)) == 3  # 8 hex digits: fine
    assert fast(b"%09x\r\n%s\r\n" % (len(VLLM_TOKEN), VLLM_TOKEN)) is None  # 9: not a size
    nested = b'"completion_tokens":3,"x":{"completion_tokens":41}}'
    assert fast(wire(VLLM_TOKEN.replace(b'"completion_tokens":3}', nested))) == 41


def test_the_c_and_python_readers_agree_on_mutated_chunks():
    """Equal answers from both implementations on thousands of corrupted token chunks:
    single-byte changes, deletions and truncations at every position of a real one."""
    assert stamped_reader.READER == "c", (
        "the C reader was not built (infer_prof/loadgen/_stamped.c)")
    base = wire(VLLM_TOKEN)
    candidates = [base, base + b"x", b"", b"\r\n"]
    for i in range(len(base)):
        candidates.append(base[:i])
        candidates.append(base[:i] + base[i + 1 :])
        for ch in (b"\n", b"0", b"9", b'"', b"\r", b"z"):
            candidates.append(base[:i] + ch + base[i + 1 :])
    for data in candidates:
        assert (stamped_reader.match_token_chunk(data)
                == stamped_reader.match_token_chunk_py(data)), data


INVALID_UTF8 = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\x80",
                b"\xc3", b"\xe6\xbc", b"\xf0\x9f\x98", b"\x80", b"\xf5\x80\x80\x80"]
VALID_UTF8 = ["é", "漢", "😀", "\U0010ffff", "\ud7ff", "\ue000"]


def with_text(text: bytes) -> bytes:
    return wire(VLLM_TOKEN.replace(b'"text":" hi"', b'"text":"' + text + b'"'))


@pytest.mark.parametrize("bad", INVALID_UTF8)
def test_invalid_utf8_leaves_the_fast_path(fast, bad):
    """Overlong forms, surrogates, code points past U+10FFFF, cut-off sequences: the general
    parser gets them (and fails the request with invalid_utf8), as a JSON parser refuses them."""
    assert fast(with_text(b"a" + bad + b"b")) is None
    assert fast(with_text(b"a" + bad)) is None


@pytest.mark.parametrize("good", VALID_UTF8)
def test_valid_multibyte_text_stays_on_the_fast_path(fast, good):
    assert fast(with_text(good.encode("utf-8", "surrogatepass"))) == 3
