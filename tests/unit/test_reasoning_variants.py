"""Which checkpoints of a reasoning family get its parser: the Qwen3 checkpoints that do not
think (Instruct-2507, Qwen3-Next Instruct, Qwen3-Coder, -Base) get none, by name or, where the
chat template is at hand, by what its generation prompt does.

Why it matters (vLLM 0.32, ``tests/e2e/test_reasoning_parser_vllm.py``): the ``qwen3`` and
``deepseek_r1`` parsers stream an answer with no ``<think>``/``</think>`` entirely as reasoning.

The templates below are the generation-prompt blocks of the official ones, written out short (the
history part of each is left out): hybrid Qwen3 (``enable_thinking is false`` -> an empty think
block), Thinking-2507 (the prompt opens ``<think>``), Instruct-2507 (``<|im_start|>assistant``
only; it mentions ``</think>`` for history, as the real one does): unslothai/unsloth
``unsloth/chat_templates.py`` (``qwen3-instruct``, ``qwen3-thinking``) and the Qwen3-8B
template's ``enable_thinking`` block quoted in the Hugging Face blog "The 4 Things Qwen-3's Chat
Template Teaches Us".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infer_prof.catalog.models import ResolvedModel, registry, resolve_model
from infer_prof.config.run_groups import EngineConfig
from infer_prof.core.catalog.reasoning_parsers import (
    NOT_KNOWN,
    TemplateThinking,
    match_reasoning,
    template_thinking,
)
from infer_prof.run.reasoning_setup import chat_template_thinking, parser_choice

TURNS = ("{%- for m in messages %}{%- if '</think>' in m.content %}{{- 'history' }}{%- endif %}"
         "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}")
HYBRID = TURNS + ("{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
                  "{%- if enable_thinking is defined and enable_thinking is false %}"
                  "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}")
THINKING_2507 = TURNS + ("{%- if add_generation_prompt %}"
                         "{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}")
INSTRUCT_2507 = TURNS + ("{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
                         "{%- endif %}")


@pytest.mark.parametrize(("names", "model_type", "parser", "why"), [
    # hybrid (no type in the name): thinks by default
    (("Qwen/Qwen3-8B",), "qwen3", "qwen3", "docs.vllm.ai"),
    (("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"), "qwen3_moe", "qwen3", "docs.vllm.ai"),
    # thinking-only: the template opens <think>, the model writes only </think>
    (("Qwen/Qwen3-30B-A3B-Thinking-2507",), "qwen3_moe", "qwen3", "docs.vllm.ai"),
    (("qwen3-next-80b-a3b", "Qwen/Qwen3-Next-80B-A3B-Thinking"), "qwen3_next", "qwen3", "vllm"),
    # no thinking at all
    (("Qwen/Qwen3-235B-A22B-Instruct-2507",), "qwen3_moe", None, "QwenLM/Qwen3 README.md"),
    (("Qwen/Qwen3-4B-Instruct-2507",), "qwen3", None, "Instruct-2507 supports only non-thinking"),
    (("Qwen/Qwen3-Next-80B-A3B-Instruct",), "qwen3_next", None, "Qwen3-Next-80B-A3B-Instruct"),
    (("Qwen/Qwen3-Coder-30B-A3B-Instruct",), "qwen3_moe", None, "QwenLM/Qwen3-Coder"),
    (("Qwen/Qwen3-Coder-Next",), "qwen3_next", None, "QwenLM/Qwen3-Coder"),
    (("qwen3-8b-base", None, "/data/Qwen3-8B-Base"), "qwen3", None, "Naming"),
    # a folder's parent path says nothing about the checkpoint: only the last part is read
    (("qwen3-8b", None, "/srv/model-base/instruct-runs/qwen3-8b"), "qwen3", "qwen3", "vllm"),
    # another family's name comes first in the table
    (("deepseek-ai/DeepSeek-R1-0528-Qwen3-8B",), "qwen3", "deepseek_r1", "docs.vllm.ai"),
])
def test_the_name_says_which_qwen3_checkpoints_think(names, model_type, parser, why):
    match = match_reasoning(names, model_type)
    assert (match.family.parser if match.family else None) == parser
    assert why in match.reason


def test_the_rendered_template_says_what_the_generation_prompt_does():
    user = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
    assert template_thinking(user, user + "<think>\n\n</think>\n\n") == TemplateThinking(
        opens=False, switch=True)  # hybrid
    assert template_thinking(user + "<think>\n", user + "<think>\n") == TemplateThinking(
        opens=True, switch=False)  # Thinking-2507
    assert template_thinking(user, user) == TemplateThinking(opens=False, switch=False)
    # the server's default turned thinking off (--default-chat-template-kwargs)
    off = user + "<think>\n\n</think>\n\n"
    assert not template_thinking(off, off).thinks


def test_the_template_decides_over_the_name_where_it_is_at_hand():
    hybrid = TemplateThinking(opens=False, switch=True)
    none = TemplateThinking(opens=False, switch=False)
    # a fine-tune named -Instruct that kept the hybrid template thinks
    assert match_reasoning(("org/Qwen3-14B-Instruct",), "qwen3", hybrid).family is not None
    # a checkpoint with no name to go by and a template that does not think gets no parser
    match = match_reasoning(("my-model", None, "/models/x"), "qwen3_moe", none)
    assert match.family is None and "chat template" in match.reason
    # other families are matched by name alone
    assert match_reasoning(("tiny-thinker",), "llama", none).family is not None
    assert match_reasoning(("llama-2-7b",), "llama").reason == NOT_KNOWN


def folder_with(tmp_path: Path, name: str, template: str) -> ResolvedModel:
    """A model folder with Qwen3-30B-A3B's real config.json (the shipped alias's) and
    ``template`` as its chat template, resolved as ``--model FOLDER`` is."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(registry()["qwen3-30b-a3b"]["config"]))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    (folder / "tokenizer.json").write_text("{}")
    return resolve_model(str(folder))


def test_a_local_folder_gets_the_parser_its_chat_template_calls_for(tmp_path):
    # names that say nothing: the model type matches Qwen3, the template decides
    hybrid = folder_with(tmp_path, "a", HYBRID)
    thinking = folder_with(tmp_path, "b", THINKING_2507)
    instruct = folder_with(tmp_path, "c", INSTRUCT_2507)
    assert instruct.spec is not None and instruct.spec.model_type == "qwen3_moe"
    assert chat_template_thinking(EngineConfig(), hybrid) == TemplateThinking(False, True)
    assert chat_template_thinking(EngineConfig(), thinking) == TemplateThinking(True, False)
    assert chat_template_thinking(EngineConfig(), instruct) == TemplateThinking(False, False)
    assert parser_choice(EngineConfig(), hybrid).parser == "qwen3"
    assert parser_choice(EngineConfig(), thinking).parser == "qwen3"
    no = parser_choice(EngineConfig(), instruct)
    assert no.parser is None and "does not think" in no.source
    # the server turns thinking off for every request: the hybrid does not think there
    off = EngineConfig(engine_args=["--default-chat-template-kwargs",
                                    '{"enable_thinking": false}'])
    assert chat_template_thinking(off, hybrid) == TemplateThinking(False, False)
    assert parser_choice(off, hybrid).parser is None
    # the user's choice stays the user's
    assert parser_choice(EngineConfig(reasoning_parser="qwen3"), instruct).parser == "qwen3"
