"""The synthetic server's event bytes (:mod:`infer_prof.servers.synthetic`): each streamed
event as vLLM writes it with continuous usage stats, for the completions API and the chat API
(an answer token in ``delta.content``, a thinking token in ``delta.reasoning`` as vLLM streams
it with a reasoning parser). Templates for ``bytes %`` formatting: no JSON encoder on the hot
path. Byte-for-byte what ``json.dumps(..., separators=(",", ":"))`` gives.

``POST /v1/chat/completions`` streams the completions' tokens as chat chunks
(``delta.content``). With ``--reasoning-tokens R`` a chat stream's first R tokens are a
reasoning model's thinking (``delta.reasoning``, as vLLM streams it with a reasoning parser)
and the rest its answer; the final usage says ``completion_tokens_details.reasoning_tokens``
(unless ``--no-reasoning-usage``), and the truth records each request's reasoning tokens, so
that the true TTFO is ``send_ns[R] - arrival``.
"""

from __future__ import annotations

MODEL_NAME = "synthetic"

# One token event, as vLLM streams it with continuous usage stats, split at the completion-token
# count: the prefix is formatted once per stream (request index, prompt_tokens), the tail per
# token (completion_tokens, total_tokens). The last token adds a usage-only event and [DONE].
# (Byte-for-byte what json.dumps(..., separators=(",", ":")) gives.)
_EVENT_HEAD = (
    b'data: {"id":"cmpl-%d","object":"text_completion","model":"' + MODEL_NAME.encode() + b'",'
)
_USAGE = b'"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}\n\n'
EVENT_PREFIX = (
    _EVENT_HEAD
    + b'"choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null}],'
    + b'"usage":{"prompt_tokens":%d,"completion_tokens":'
)
EVENT_TAIL = b'%d,"total_tokens":%d}}\n\n'
LAST_EVENT = (
    _EVENT_HEAD
    + b'"choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":"length"}],'
    + _USAGE
    + _EVENT_HEAD
    + b'"choices":[],'
    + _USAGE
    + b"data: [DONE]\n\n"
)
# With a prefix cache the usage-only event also says the prompt tokens it held (as vLLM does
# with --enable-prompt-tokens-details); the last %d is them.
LAST_EVENT_CACHED = LAST_EVENT.replace(
    b'"choices":[],' + _USAGE[:-4], b'"choices":[],' + _USAGE[:-4]
    + b',"prompt_tokens_details":{"cached_tokens":%d}')

# The chat endpoint's events (vLLM's ChatCompletionStreamResponse layout): a token of the answer
# (``delta.content``) or of the thinking (``delta.reasoning``), split as the completions ones.
_CHAT_HEAD = (
    b'data: {"id":"chatcmpl-%d","object":"chat.completion.chunk","model":"'
    + MODEL_NAME.encode() + b'",'
)


def _chat_choice(key: bytes, finish: bytes) -> bytes:
    return (b'"choices":[{"index":0,"delta":{"' + key + b'":" tok"},"logprobs":null,'
            b'"finish_reason":' + finish + b'}],')


CHAT_PREFIX = (_CHAT_HEAD + _chat_choice(b"content", b"null")
                + b'"usage":{"prompt_tokens":%d,"completion_tokens":')
THINK_PREFIX = (_CHAT_HEAD + _chat_choice(b"reasoning", b"null")
                 + b'"usage":{"prompt_tokens":%d,"completion_tokens":')
_USAGE_REASONING = (b'"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,'
                    b'"completion_tokens_details":{"reasoning_tokens":%d}}}\n\n')


def last_chat_event(index: int, prompt: int, n: int, reasoning: int, count_reasoning: bool
                    ) -> bytes:
    """A chat stream's last token (the ``n``-th, finish reason ``length``; a thinking token
    when ``n <= reasoning``), the usage-only event (with ``completion_tokens_details`` counting
    ``min(n, reasoning)`` thinking tokens when ``reasoning`` and ``count_reasoning``) and
    ``[DONE]``."""
    key = b"reasoning" if n <= reasoning else b"content"
    total = (prompt, n, prompt + n)
    usage = (_USAGE_REASONING % (*total, min(n, reasoning)) if reasoning and count_reasoning
             else _USAGE % total)
    return (_CHAT_HEAD % index + _chat_choice(key, b'"length"') + _USAGE % total
            + _CHAT_HEAD % index + b'"choices":[],' + usage + b"data: [DONE]\n\n")
