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
