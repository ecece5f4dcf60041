"""A reasoning model's figures on hand-built records, the parser table, and the parser the
launched vLLM gets.

Records (ms): sent at 0; chunks at 10, 12, 14 (reasoning, 1 token each), 20 (the first answer
chunk, 2 tokens: ``</think>`` rides on it), 23, 26 (1 token each). TTFT 10, TTFO 20, answer
TPOT (26 - 20) / (4 - 1) = 2, TPOT (26 - 10) / (7 - 1) = 2.67.
"""

from __future__ import annotations

import pytest

from infer_prof.catalog.models import ResolvedModel
from infer_prof.config.options import parse_reasoning_parser
from infer_prof.config.run_groups import EngineConfig
from infer_prof.core.analysis.frontier_axes import point_axes
from infer_prof.core.catalog.reasoning_parsers import (
    FAMILIES,
    choose_reasoning_parser,
    reasoning_family,
)
from infer_prof.core.measurement.metrics import (
    RequestRecord,
    answer_tpot_ns,
    prefill_tok_s,
    summarize_run,
    tpot_ns,
    ttfo_ns,
    ttft_ns,
)
from infer_prof.core.measurement.reasoning import answer_tokens, reasoning_tokens
from infer_prof.run.reasoning_setup import reasoning_section
from infer_prof.servers.vllm_args import vllm_flags

MS = 1_000_000


def thinking(usage: int | None = 3, cut: bool = False) -> RequestRecord:
    times = [10, 12, 14] if cut else [10, 12, 14, 20, 23, 26]
    tokens = [1, 1, 1] if cut else [1, 1, 1, 2, 1, 1]
    return RequestRecord(
        index=0, input_len=8, max_tokens=7, send_ns=0, chunk_ns=[t * MS for t in times],
        chunk_tokens=tokens, done_ns=times[-1] * MS, prompt_tokens=50,
        output_tokens=sum(tokens), first_answer_chunk=None if cut else 3,
        reasoning_chunk_tokens=3, reasoning_tokens_usage=usage)


def test_per_request_reasoning_figures():
    r = thinking()
    assert ttft_ns(r) == 10 * MS and ttfo_ns(r) == 20 * MS
    assert answer_tpot_ns(r) == pytest.approx(2 * MS)
    assert tpot_ns(r) == pytest.approx(16 * MS / 6)  # every token, reasoning included
    assert prefill_tok_s(r) == pytest.approx(50 / 0.010)  # 5,000 prompt tokens/s
    assert (reasoning_tokens(r), answer_tokens(r)) == (3, 4)
    # the server's count wins over the chunks' (vLLM leaves the markers out)
    assert (reasoning_tokens(thinking(usage=2)), answer_tokens(thinking(usage=2))) == (2, 5)


def test_a_request_cut_while_thinking_has_no_ttfo_and_is_counted():
    cut = thinking(usage=None, cut=True)
    assert ttfo_ns(cut) is None and answer_tpot_ns(cut) is None  # None, never 0
    s = summarize_run([thinking(usage=None), cut])
    assert s.reasoning is not None
    assert (s.reasoning.requests, s.reasoning.ended_in_reasoning) == (2, 1)
    assert s.reasoning.token_source == "chunks"
    assert s.ttfo_ms is not None and s.ttfo_ms.count == 1 and s.ttfo_ms.p50 == 20.0
    assert s.answer_tpot_ms is not None and s.answer_tpot_ms.p50 == pytest.approx(2.0)


def test_a_run_without_reasoning_has_no_ttfo_and_no_reasoning_section():
    plain = RequestRecord(index=0, input_len=8, max_tokens=3, send_ns=0,
                          chunk_ns=[5 * MS, 6 * MS, 7 * MS], chunk_tokens=[1, 1, 1],
                          done_ns=7 * MS, prompt_tokens=8, output_tokens=3, first_answer_chunk=0)
    s = summarize_run([plain])
    assert s.reasoning is None and s.ttfo_ms is None and s.answer_tpot_ms is None
    assert s.prefill_tok_s_user is not None and s.prefill_tok_s_user.p50 == pytest.approx(1600)


def test_interactivity_of_answer_reads_the_answer_tpot():
    summary = {"tpot_ms": {"p50": 4.0, "p90": 5.0}, "answer_tpot_ms": {"p50": 2.0, "p90": 2.5},
               "output_throughput": 100.0, "total_throughput": 150.0}
    assert point_axes(summary, 1, None, None)["interactivity_tok_s_user"] == 250.0
    answer = point_axes(summary, 1, None, None, "answer")
    assert (answer["interactivity_tok_s_user"], answer["interactivity_p90_tok_s_user"]) == (
        500.0, 400.0)
    assert answer["output_tok_s_per_gpu"] == 100.0  # throughput keeps every output token
    no_reasoning = {**summary, "answer_tpot_ms": None}
    assert point_axes(no_reasoning, 1, None, None, "answer")["interactivity_tok_s_user"] == 250.0


@pytest.mark.parametrize(("names", "model_type", "parser"), [
    (("qwen3-8b", "Qwen/Qwen3-8B"), "qwen3", "qwen3"),
    (("my-model", None, "/models/x"), "qwen3_moe", "qwen3"),
    (("gpt-oss-20b", "openai/gpt-oss-20b"), "gpt_oss", "openai_gptoss"),
    ((None, "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"), "qwen2", "deepseek_r1"),
    (("Qwen/QwQ-32B",), "qwen2", "deepseek_r1"),
    (("tiny-thinker",), "llama", "deepseek_r1"),
    (("llama-2-7b", "meta-llama/Llama-2-7b-hf"), "llama", None),
])
def test_the_family_table_picks_the_parser(names, model_type, parser):
    family = reasoning_family(names, model_type)
    assert (family.parser if family else None) == parser


def test_every_parser_of_the_table_is_registered_in_the_vllm_it_names():
    """Each parser name is one vLLM 0.32 registers (vllm/reasoning/__init__.py)."""
    import importlib.util  # the file is read: importing vllm.reasoning loads much of vLLM
    from pathlib import Path

    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        pytest.skip("vLLM is not installed here (its registry is checked where it is)")
    text = (Path(spec.origin).parent / "reasoning" / "__init__.py").read_text()
    for fam in FAMILIES:
        assert f'"{fam.parser}":' in text, fam.parser


def test_the_choice_the_option_and_the_flag():
    qwen = reasoning_family(("qwen3-8b",), "qwen3")
    auto = choose_reasoning_parser("auto", qwen)
    assert auto.parser == "qwen3" and "docs.vllm.ai" in auto.source
    assert choose_reasoning_parser("none", qwen).parser is None
    assert choose_reasoning_parser("deepseek_r1", None).parser == "deepseek_r1"
    assert choose_reasoning_parser("auto", None).parser is None
    flags = vllm_flags_of("qwen3")
    assert flags[flags.index("--reasoning-parser") + 1] == "qwen3"
    assert "--reasoning-parser" not in vllm_flags_of(None)
    # given verbatim (--engine-arg) it is not given twice
    flags = vllm_flags_of("qwen3", ("--reasoning-parser=granite",))
    assert "--reasoning-parser" not in flags and flags[-1] == "--reasoning-parser=granite"
    with pytest.raises(ValueError, match="--reasoning-parser 'Deep Seek' is not a parser name"):
        parse_reasoning_parser("Deep Seek", "--reasoning-parser")


def vllm_flags_of(parser: str | None, extra: tuple[str, ...] = (),
                  version: tuple[int, ...] | None = None) -> list[str]:
    from infer_prof.core.planning.plan_result import EngineSettings

    return vllm_flags(EngineSettings(), extra, reasoning_parser=parser, vllm_version=version)


def test_vllm_before_0_9_also_gets_enable_reasoning():
    assert "--enable-reasoning" in vllm_flags_of("deepseek_r1", version=(0, 8, 5))
    assert "--enable-reasoning" not in vllm_flags_of("deepseek_r1", version=(0, 26, 0))
    assert "--enable-reasoning" not in vllm_flags_of(None, version=(0, 8, 5))


def test_a_model_known_to_reason_that_streamed_none_gets_one_line():
    model = ResolvedModel("qwen3-8b", "Qwen/Qwen3-8B", None, "Qwen/Qwen3-8B", False, "alias")
    at_endpoint = reasoning_section(EngineConfig(endpoint="http://h:1"), model, "chat", None)
    assert at_endpoint is not None and not at_endpoint.streamed
    assert at_endpoint.note is not None and "\n" not in at_endpoint.note
    assert "the endpoint streams no reasoning field: TTFT includes the thinking" in (
        at_endpoint.note)
    assert at_endpoint.parser is None  # an endpoint's parser is not known
    launched = reasoning_section(EngineConfig(), model, "completions", None)
    assert launched is not None and launched.parser == "qwen3"
    assert launched.note is not None and "use --api chat" in launched.note
    plain = ResolvedModel("llama-2-7b", "x", None, None, False, "alias")
    assert reasoning_section(EngineConfig(), plain, "chat", None) is None


def test_the_json_view_holds_ttfo_prefill_and_the_reasoning_section():
    from infer_prof.results.document import decode_result
    from infer_prof.results.schema import public_result
    from tests.unit.test_report_html import make_result

    out = public_result(decode_result(make_result("r1")))  # r1 thinks for one chunk, r2 not
    assert out["ttfo_ms"]["p50"] == pytest.approx(17.5)  # 15 and 20 ms
    # per request: 32 prompt tokens / 10 ms and / 20 ms; p50 of 3,200 and 1,600 tokens/s
    assert out["prefill_tok_s_user"]["p50"] == pytest.approx(2400.0)
    assert out["reasoning"]["requests"] == 1 and out["reasoning"]["streamed"] is True


def test_the_console_prints_the_reasoning_rows_or_the_note():
    from rich.console import Console

    from infer_prof.report.console import totals_table
    from infer_prof.results.document import decode_result
    from tests.unit.test_report_html import make_result

    def text(doc: dict) -> str:
        console = Console(record=True, width=300)
        console.print(totals_table(decode_result(doc)))
        return console.export_text()

    thought = text(make_result("r1"))
    assert "reasoning: requests / cut" in thought and "prefill tok/s/user p50/p90" in thought
    doc = make_result("r2")
    doc["reasoning"] = {"streamed": False, "family": "Qwen3 series",
                        "note": "Qwen3 series is known to reason, but the endpoint streams no "
                        "reasoning field: TTFT includes the thinking"}
    assert "TTFT includes the thinking" in text(doc)
