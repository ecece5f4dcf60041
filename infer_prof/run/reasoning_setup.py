"""A run's reasoning model: the parser a launched vLLM gets, and the result's ``reasoning``
section with its one-line note (:mod:`infer_prof.core.measurement.reasoning` has the arithmetic,
:mod:`infer_prof.core.catalog.reasoning_parsers` the table of families)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from infer_prof.catalog.models import ResolvedModel
from infer_prof.catalog.weights import cached_folders
from infer_prof.config.run_groups import EngineConfig
from infer_prof.core.analysis.frontier_axes import flag_value
from infer_prof.core.catalog.reasoning_parsers import (
    ParserChoice,
    TemplateThinking,
    choose_reasoning_parser,
    match_reasoning,
    template_thinking,
)
from infer_prof.core.measurement.reasoning import ReasoningSummary
from infer_prof.core.measurement.stats import Distribution as Stats
from infer_prof.results.document_base import Distribution
from infer_prof.results.reasoning_section import Reasoning

#: vLLM's flag for the chat template variables every request gets unless it sets its own
#: (vllm 0.32 ``vllm/entrypoints/launchers/cli_args.py``: ``default_chat_template_kwargs``).
SERVER_TEMPLATE_KWARGS = "--default-chat-template-kwargs"


def parser_choice(engine: EngineConfig, model: ResolvedModel) -> ParserChoice:
    """The reasoning parser for ``model`` under ``--reasoning-parser`` (auto: its family's in
    the table, matched on its alias, hub id, path and config.json ``model_type``, and where its
    chat template is at hand, on what the template's generation prompt does about thinking)."""
    match = match_reasoning((model.name, model.hub_id, model.path),
                            model.spec.model_type if model.spec else "",
                            chat_template_thinking(engine, model))
    return choose_reasoning_parser(engine.reasoning_parser, match.family, match.reason)


def chat_template_thinking(engine: EngineConfig, model: ResolvedModel
                           ) -> TemplateThinking | None:
    """The thinking facts of ``model``'s chat template (:func:`template_thinking`), rendered for
    one user message with the variables the launched server gives every request
    (``--engine-arg=--default-chat-template-kwargs=JSON``) and again with
    ``enable_thinking=false``; None when no template is at hand (an alias with dummy weights, a
    hub model not in the Hugging Face cache) or it does not render."""
    from infer_prof.loadgen.datasets import chat_template_renderer

    folder = _tokenizer_folder(model)
    render = chat_template_renderer(folder) if folder is not None else None
    if render is None:
        return None
    server = _server_template_kwargs(engine.engine_args)
    messages = [{"role": "user", "content": "Hello"}]
    try:
        return template_thinking(render(messages, **server),
                                 render(messages, **{**server, "enable_thinking": False}))
    except Exception:  # noqa: BLE001 - a template that needs more than one user message
        return None


def _tokenizer_folder(model: ResolvedModel) -> Path | None:
    """Where ``model``'s tokenizer files are: its folder, or a hub model's cached snapshot."""
    if Path(model.path).is_dir():
        return Path(model.path)
    if model.source == "hub" and model.hub_id:
        snapshot = cached_folders(model.hub_id)[1]
        return Path(snapshot) if snapshot else None
    return None


def _server_template_kwargs(engine_args: list[str]) -> dict[str, object]:
    """The JSON object of ``--default-chat-template-kwargs`` among the engine arguments ({}
    when absent or not an object)."""
    raw = flag_value(engine_args, (SERVER_TEMPLATE_KWARGS,))
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def no_reasoning_note(choice: ParserChoice, endpoint: bool, api: str) -> str:
    """The line for a model known to reason whose stream carried no reasoning field."""
    why = ("the endpoint streams no reasoning field" if endpoint
           else "vLLM ran without a reasoning parser" if choice.parser is None
           else "the completions API has no reasoning field" if api == "completions"
           else f"vLLM's {choice.parser} parser streamed none")
    assert choice.family is not None
    return (f"{choice.family.family} is known to reason, but {why}: TTFT includes the thinking "
            "and no TTFO or reasoning tokens are reported"
            + (" (use --api chat)" if api == "completions" else ""))


def reasoning_section(engine: EngineConfig, model: ResolvedModel, api: str,
                      measured: ReasoningSummary | None) -> Reasoning | None:
    """The result's ``reasoning``: the run's reasoning figures (``measured``), the parser and
    its source; None for a model not known to reason, no parser asked for and nothing
    streamed."""
    choice = parser_choice(engine, model)
    endpoint = bool(engine.endpoint)
    parser = None if endpoint else choice.parser
    if measured is None and choice.family is None and parser is None:
        return None
    section = Reasoning(
        streamed=measured is not None,
        parser=parser,
        parser_source=None if endpoint else choice.source,
        family=choice.family.family if choice.family else None,
    )
    if measured is None:
        if choice.family is not None:
            section.note = no_reasoning_note(choice, endpoint, api)
        return section
    m = measured
    section.requests, section.ended_in_reasoning = m.requests, m.ended_in_reasoning
    section.reasoning_tokens_total = m.reasoning_tokens_total
    section.answer_tokens_total = m.answer_tokens_total
    section.reasoning_tokens = _dist(m.reasoning_tokens)
    section.answer_tokens = _dist(m.answer_tokens)
    section.token_source = m.token_source  # type: ignore[assignment]
    section.token_sources = dict(m.token_sources)
    section.answer_throughput = m.answer_throughput
    return section


def _dist(d: Stats | None) -> Distribution | None:
    return None if d is None else msgspec.convert(d.to_dict(), Distribution)
