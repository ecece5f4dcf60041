"""The model `infer-prof run` profiles when none is named follows the machine (GPUs injected)."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

import infer_prof.cli.run as run_cli
from infer_prof.catalog.gpus import DetectedGpu, find_gpu
from infer_prof.cli import app
from infer_prof.run.config import ConfigError
from infer_prof.run.default_model import choose_default
from infer_prof.run.environment import has_nvidia_gpu

H100 = DetectedGpu("NVIDIA H100 80GB HBM3", find_gpu("H100-SXM"), 85_520_809_984)
RTX3090 = DetectedGpu("NVIDIA GeForce RTX 3090", find_gpu("RTX-3090"), 25_769_803_776)
NO_CUDA = lambda index: None  # noqa: E731 - no libcuda here: NVML's total less the known gap
UNKNOWN = DetectedGpu("NVIDIA Mystery 7", None, 17_179_869_184)


def test_without_a_gpu_it_is_tiny_llama():
    c = choose_default([])
    assert (c.model, c.load_format, c.concurrency) == ("tiny-llama", None, None)
    assert c.why.startswith("no --model: profiling tiny-llama")
    assert "without a GPU (none detected" in c.why


def test_on_an_h100_it_is_the_missions_case():
    c = choose_default([H100], NO_CUDA)
    assert (c.model, c.load_format, c.concurrency) == ("llama-2-7b", "dummy", 128)
    assert "random weights at 128 streams on H100-SXM" in c.why and "bf16" in c.why
    eight = choose_default([H100] * 8, NO_CUDA)
    assert eight.model == "llama-2-7b" and "8x H100-SXM" in eight.why


def test_where_it_does_not_fit_at_16_or_8_bit_it_is_tiny_llama_with_the_reason():
    c = choose_default([RTX3090], NO_CUDA)
    assert c.model == "tiny-llama" and "does not fit RTX-3090" in c.why
    u = choose_default([UNKNOWN])
    assert u.model == "tiny-llama" and "not in the catalog" in u.why


@pytest.mark.parametrize(
    ("gpus", "model", "concurrency", "load_format"),
    [([], "tiny-llama", None, None), ([H100], "llama-2-7b", [128], "dummy")],
)
def test_cli_without_model_says_which_and_why(monkeypatch, gpus, model, concurrency, load_format):
    seen = {}

    def fake_execute(cfg):
        seen["cfg"] = cfg
        raise ConfigError("stopped by the test")

    monkeypatch.setattr(run_cli, "detect_gpus", lambda: gpus)
    monkeypatch.setattr("infer_prof.run.runner.execute", fake_execute)  # imported when run starts
    r = CliRunner().invoke(app, ["run", "--no-progress"])
    assert r.exit_code == 2
    lines = r.stderr.splitlines()
    assert lines[0].startswith(f"no --model: profiling {model}")
    cfg = seen["cfg"]
    assert (cfg.engine.model, cfg.load.concurrency, cfg.engine.load_format) == (
        model,
        concurrency,
        load_format,
    )
    # what the user gives wins
    r = CliRunner().invoke(app, ["run", "--no-progress", "-c", "4", "--load-format", "auto"])
    cfg = seen["cfg"]
    assert (cfg.engine.model, cfg.load.concurrency, cfg.engine.load_format) == (model, [4], "auto")


@pytest.mark.skipif(has_nvidia_gpu(), reason="a GPU is here: the run fits an hour and would start")
def test_missions_command_on_this_cpu_is_refused_in_seconds():
    t0 = time.monotonic()
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--no-progress",
            "--model",
            "llama-2-7b",
            "--load-format",
            "dummy",
            "--concurrency",
            "128",
        ],
    )
    took = time.monotonic() - t0
    assert r.exit_code == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert lines[0].startswith("error: llama-2-7b: estimated run time ")
    assert "above the 1 h limit, not started" in lines[0] and "--yes" in lines[0]
    assert took < 10
