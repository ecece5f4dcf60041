"""The run's plan holds what was decided; the configuration stays what the user gave.

:func:`infer_prof.run.planning.plan_run` resolves the API (``--api``, else the workloads') and
the weights (random ones, ``load_format = dummy``, when none are at hand) into the plan's own
fields; the :class:`RunConfig` it was given is the same object, unchanged, afterwards."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from infer_prof.core.planning.weights import WeightDecision
from infer_prof.run import preflight
from infer_prof.run.config import RunConfig
from infer_prof.run.planning import plan_run

CHAT_WORKLOAD = """
name = "chat-api"
api = "chat"
num_requests = 4
input_len = { kind = "fixed", value = 16 }
output_len = { kind = "fixed", value = 8 }
[arrival]
mode = "closed"
concurrency = 1
"""


def test_the_workloads_api_is_the_plans_not_the_configs(tmp_path: Path) -> None:
    workload = tmp_path / "chat-api.toml"
    workload.write_text(CHAT_WORKLOAD)
    cfg = RunConfig(model="tiny-llama", server="synthetic", workload=str(workload), yes=True)
    given = copy.deepcopy(cfg)
    plan = plan_run(cfg)
    assert plan.api == "chat" and plan.cfg is cfg and cfg == given and cfg.engine.api is None
    assert plan.text is not None  # the chat API sends text: the plan made its prompt builder


def test_random_weights_are_the_plans_load_format(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_weights(model, load_format, require):  # as when the hub cannot be reached
        return WeightDecision("random", "random", "dummy", "no weights at hand")

    monkeypatch.setattr(preflight, "choose_weights", no_weights)
    cfg = RunConfig(model="llama-2-7b", server="synthetic", workload="fixed-512-128",
                    num_requests=4, concurrency=[1], yes=True)
    given = copy.deepcopy(cfg)
    plan = plan_run(cfg)
    assert plan.load_format == "dummy" and cfg == given and cfg.engine.load_format is None
    assert plan.engine_path.endswith("llama-2-7b")  # the alias's config folder, for dummy


def test_a_run_over_lora_adapters_plans_their_buffers() -> None:
    """``--lora-modules`` with two rank-8 adapters: the launch gets --max-loras 2
    --max-lora-rank 8, and the plan takes vLLM's buffers for them from the KV cache."""
    from infer_prof.catalog.tiny_lora import ensure_tiny_lora

    a1, a2 = ensure_tiny_lora(8, seed=1), ensure_tiny_lora(8, seed=2)
    cfg = RunConfig(model="tiny-llama", server="synthetic", workload="fixed-512-128",
                    num_requests=4, concurrency=[1], yes=True, memory_budget_bytes=1 << 30,
                    lora_modules=[f"a1={a1}", f"a2={a2}"])
    plan = plan_run(cfg)
    assert plan.plan is not None and plan.plan.memory is not None
    assert plan.plan.memory.lora_bytes == 345_088  # tests/unit/test_lora_memory.py
    assert any("2 adapters of rank 8" in n for n in plan.plan.notes)
