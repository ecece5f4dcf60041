"""What vLLM's own reasoning parsers do with an answer that has no ``<think>``/``</think>``: the
reason the parser table gives no parser to the Qwen3 checkpoints that do not think
(:mod:`infer_prof.core.catalog.reasoning_parsers`).

The real classes of the installed vLLM (0.32 here), composed as its chat server composes them
(``ParserManager.get_parser``) and fed token by token as its streaming path feeds them
(``vllm/entrypoints/openai/chat_completion/serving.py``: ``parser.parse_delta(delta_text,
delta_token_ids, request, prompt_token_ids, finished)``), with tiny-thinker's tokenizer (trained
at first use: ``<think>`` and ``</think>`` are tokens of its own, as in Qwen3's). No server is
started; importing vLLM's serving code takes a while, so this is an e2e test.
"""

from __future__ import annotations

from typing import Any

import pytest

from infer_prof.catalog.trained_thinker import ANSWER, THOUGHT, ensure_tiny_thinker

pytestmark = pytest.mark.e2e
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")

PROMPT = "user: hello\nassistant: "


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from vllm.tokenizers import get_tokenizer

    return get_tokenizer(str(ensure_tiny_thinker()))


def stream(tokenizer: Any, parser: str, prompt: str, output: str,
           chat_template_kwargs: dict[str, bool] | None = None) -> tuple[str, str]:
    """(reasoning, content) that vLLM's ``parser`` streams for ``output`` after ``prompt``, one
    token a chunk."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser.parser_manager import ParserManager

    cls = ParserManager.get_parser(reasoning_parser_name=parser, tokenizer=tokenizer)
    assert cls is not None
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hello"}],
                                    stream=True, chat_template_kwargs=chat_template_kwargs)
    instance = cls(tokenizer, None, chat_template_kwargs=chat_template_kwargs or {})
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    ids = tokenizer.encode(output, add_special_tokens=False)
    reasoning, content = "", ""
    for i, token in enumerate(ids):
        delta = instance.parse_delta(tokenizer.decode([token]), [token], request, prompt_ids,
                                     finished=i == len(ids) - 1)
        if delta is not None:
            reasoning += delta.reasoning or ""
            content += delta.content or ""
    return reasoning, content


@pytest.mark.parametrize("parser", ["qwen3", "deepseek_r1"])
def test_an_answer_without_markers_streams_as_reasoning(tokenizer, parser):
    """Qwen3-Instruct-2507 and Qwen3-Coder write no think block: with a parser their whole
    answer would be reasoning (no TTFO, every token counted as thinking)."""
    assert stream(tokenizer, parser, PROMPT, ANSWER) == (ANSWER, "")


@pytest.mark.parametrize("parser", ["qwen3", "deepseek_r1"])
def test_the_parsers_split_what_thinking_checkpoints_write(tokenizer, parser):
    # a hybrid Qwen3 (and tiny-thinker) writes both markers
    assert stream(tokenizer, parser, PROMPT, f"<think>{THOUGHT}</think>{ANSWER}") == (
        THOUGHT, ANSWER)
    # Thinking-2507: the template opens <think>, the model writes only </think>
    assert stream(tokenizer, parser, PROMPT + "<think>\n", f"{THOUGHT}</think>{ANSWER}") == (
        THOUGHT, ANSWER)


def test_a_hybrid_asked_not_to_think_streams_its_answer_as_content(tokenizer):
    """enable_thinking=false: the template closes an empty think block in the prompt and vLLM's
    qwen3 parser starts in content, so hybrids can keep the parser."""
    closed = PROMPT + "<think>\n\n</think>\n\n"
    assert stream(tokenizer, "qwen3", closed, ANSWER, {"enable_thinking": False}) == (
        "", ANSWER)
