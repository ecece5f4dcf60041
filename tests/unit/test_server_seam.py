"""The server seam: the planner decides in engine-neutral settings, only the vLLM server spells
them as flags, and every server in the registry has the whole :class:`Server` protocol."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from infer_prof.catalog.gpus import find_gpu
from infer_prof.catalog.models import resolve_model
from infer_prof.core.planning.plan_result import EngineSettings
from infer_prof.core.planning.planner import PlanRequest, plan
from infer_prof.servers.base import LaunchSpec, Server
from infer_prof.servers.registry import SERVERS, attach, check_server_name, make_server
from infer_prof.servers.vllm_args import vllm_engine_args, vllm_flags

PROTOCOL = sorted(n for n in vars(Server) if not n.startswith("_"))


def test_the_plan_is_engine_neutral_and_vllm_spells_it():
    spec = resolve_model("llama-2-70b").spec
    assert spec is not None
    p = plan(PlanRequest(spec, find_gpu("H200"), concurrency=128))
    assert p.settings == EngineSettings(dtype="auto", tensor_parallel=1, precision="fp8",
                                        memory_utilization=0.9)
    assert vllm_engine_args(p.settings) == {"dtype": "auto", "tensor_parallel_size": 1,
                                            "quantization": "fp8_per_tensor",
                                            "gpu_memory_utilization": 0.9}
    assert vllm_engine_args(p.settings, (0, 10, 1))["quantization"] == "fp8"
    assert "engine_args" not in {f.name for f in fields(p)}


def test_vllm_flags_leave_a_verbatim_flag_to_the_user():
    s = EngineSettings(tensor_parallel=2, kv_cache_bytes=4096, max_model_len=1024)
    assert vllm_flags(s, ["--max-model-len=512"], tokenizer=False) == [
        "--tensor-parallel-size", "2", "--kv-cache-memory-bytes", "4096",
        "--skip-tokenizer-init", "--enable-prompt-tokens-details", "--max-model-len=512"]


def test_vllm_flags_of_speculative_decoding_and_cached_tokens():
    spec = '{"method":"ngram","num_speculative_tokens":3}'
    s = EngineSettings()
    assert vllm_flags(s, speculative_config=spec) == [
        "--enable-prompt-tokens-details", "--speculative-config", spec,
        "--per-request-spec-decode-metrics", "summary"]
    # an older build than 0.32 is not asked for the per-request report it may not know
    assert vllm_flags(s, speculative_config=spec, vllm_version=(0, 26, 0)) == [
        "--enable-prompt-tokens-details", "--speculative-config", spec]
    given = ["--speculative-config", "{}", "--enable-prompt-tokens-details"]
    assert vllm_flags(s, given, speculative_config=spec) == given  # the user's own, verbatim


def test_every_registered_server_has_the_whole_protocol(tmp_path):
    assert {"start", "wait_healthy", "url", "metrics", "stop", "diagnosis", "poll",
            "plan_arguments"} <= set(PROTOCOL)
    spec = LaunchSpec(model="m", served_model_name="m", log_path=tmp_path / "s.log")
    servers = [make_server(name, spec) for name in SERVERS] + [attach("http://127.0.0.1:1")]
    for server in servers:
        missing = [n for n in PROTOCOL if not hasattr(server, n)]
        assert missing == [], (server.kind, missing)
        assert server.poll() is None and server.stop() is None  # not started: nothing to stop
    assert [s.kind for s in servers] == [*SERVERS, "endpoint"]
    assert [s.launched for s in servers][-1] is False
    assert not Path(tmp_path / "s.log").exists()  # making a server starts nothing


def test_unknown_server_names_the_choices():
    assert check_server_name("vllm") is None
    assert check_server_name("sglang") == ("--server 'sglang': unknown server; choose one of "
                                           "vllm, synthetic")
