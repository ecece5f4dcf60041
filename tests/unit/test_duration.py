"""The run-duration estimate (infer_prof.core.planning.duration) and the refusal above an hour.

llama-2-7b: fp16 weights 13,476,831,232 B, KV 524,288 B/token, linear params 6,476,005,376
(see test_roofline.py). Hand-computed with a made-up device of 1e12 B/s, 1e14 FLOP/s, no
overhead: a decode step at batch 1 and context 192 reads 13,476,831,232 + 192 x 524,288 =
13,577,494,528 B -> 13.577 ms; its compute, 1 x decode_flops_per_token(192) / 1e14, is far less.
"""

from __future__ import annotations

import pytest

from infer_prof.catalog.gpus import find_gpu
from infer_prof.catalog.models import registry, resolve_model
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.catalog.roofline import decode_flops_per_token, prefill_flops_per_token
from infer_prof.core.planning.duration import (
    DeviceSpeed,
    PointLoad,
    cpu_speed,
    estimate_run,
    gpu_speed,
    human_duration,
    step_time_s,
)
from infer_prof.run.config import ConfigError, RunConfig
from infer_prof.run.load_points import base_workload, load_points
from infer_prof.run.preflight import check_duration

WEIGHTS = 13_476_831_232
KV = 524_288
TOY = DeviceSpeed("toy", 1e12, 1e14, 0.0, 10.0, 1.0, "made up")


@pytest.fixture(scope="module")
def llama7b() -> ModelSpec:
    return ModelSpec.from_config(registry()["llama-2-7b"]["config"], name="llama-2-7b")


def test_step_time_is_the_slower_of_memory_and_compute(llama7b):
    # one step reads the weights less the input embedding's 31,999 unread rows (4096 x 2 B
    # each) and 192 tokens of KV, at 1e12 B/s
    read = WEIGHTS - 2 * 4096 * (32000 - 1) + 192 * KV
    assert step_time_s(llama7b, WEIGHTS, KV, TOY, 1, 192) == pytest.approx(read / 1e12)
    assert read / 1e12 == pytest.approx(0.01331535872)
    slow_math = DeviceSpeed("cpu-like", 1e12, 1e9, 0.005, 0, 0, "made up")
    t = step_time_s(llama7b, WEIGHTS, KV, slow_math, 4, 192)
    assert t == pytest.approx(4 * decode_flops_per_token(llama7b, 192) / 1e9 + 0.005)
    assert step_time_s(llama7b, WEIGHTS, KV, TOY, 0, 192) == 0.0


def test_closed_loop_runs_full_waves_and_a_last_partial_one(llama7b):
    est = estimate_run(llama7b, WEIGHTS, KV, TOY, [PointLoad(10, 128, 128, concurrency=4)])
    step = {b: step_time_s(llama7b, WEIGHTS, KV, TOY, b, 128 + 64) for b in (2, 4)}
    decode = 2 * 128 * step[4] + 128 * step[2]
    prefill = 10 * 128 * prefill_flops_per_token(llama7b, 64.5) / 1e14
    assert est.batches == (4,)
    assert est.decode_s == pytest.approx(decode)
    assert est.prefill_s == pytest.approx(prefill)
    assert est.startup_s == pytest.approx(10 + WEIGHTS / 1e9)
    assert est.total_s == pytest.approx(est.startup_s + prefill + decode)
    # the KV cache caps the batch: more waves
    capped = estimate_run(
        llama7b, WEIGHTS, KV, TOY, [PointLoad(10, 128, 128, concurrency=4)], max_sequences=2
    )
    assert capped.batches == (2,) and capped.decode_s == pytest.approx(5 * 128 * step[2])


def test_open_loop_lasts_at_least_its_arrivals_and_duration_bound_runs_their_duration(llama7b):
    slow = estimate_run(llama7b, WEIGHTS, KV, TOY, [PointLoad(100, 128, 128, rate=0.5)])
    assert slow.points_s[0] == pytest.approx(200.0)  # 100 requests at 0.5/s
    fast = estimate_run(llama7b, WEIGHTS, KV, TOY, [PointLoad(100, 128, 128, rate=1e6)])
    assert fast.points_s[0] == pytest.approx(fast.prefill_s + fast.decode_s)
    timed = estimate_run(
        llama7b, WEIGHTS, KV, TOY, [PointLoad(None, 128, 128, concurrency=8, duration_s=60)]
    )
    wave = 8 * 128 * prefill_flops_per_token(llama7b, 64.5) / 1e14 + 128 * step_time_s(
        llama7b, WEIGHTS, KV, TOY, 8, 192
    )
    assert timed.points_s[0] == pytest.approx(60 + wave)
    sweep = estimate_run(
        llama7b, WEIGHTS, KV, TOY, [PointLoad(10, 128, 128, concurrency=c) for c in (1, 4)]
    )
    assert sweep.total_s == pytest.approx(sweep.startup_s + sum(sweep.points_s))


def test_cpu_calibration_a_7b_model_decodes_about_0_3_tokens_per_s(llama7b):
    est = estimate_run(
        llama7b, WEIGHTS, KV, cpu_speed(2), [PointLoad(1, 16, 16, concurrency=1)]
    )
    assert 0.25 < est.single_stream_tokens_per_s < 0.35


def test_the_batch_parallelises_on_a_gpu_not_on_a_cpu(llama7b):
    def gain(device: DeviceSpeed) -> float:
        one = 1 / step_time_s(llama7b, WEIGHTS, KV, device, 1, 192)
        many = 128 / step_time_s(llama7b, WEIGHTS, KV, device, 128, 192)
        return many / one

    h100 = find_gpu("H100-SXM")
    assert gain(cpu_speed(2)) < 3.5
    assert gain(gpu_speed("H100-SXM", 1, h100.memory_bandwidth_gbps, h100.bf16_tflops)) > 20


def test_gpu_estimate_is_near_what_the_h100_measured(llama7b):
    """On an H100 SXM (vLLM 0.26) c=128, 512/128, 1024 requests ran 33.27 requests/s (about
    31 s of load) after a 76-99 s start-up; the estimate should be within a factor of two."""
    h100 = find_gpu("H100-SXM")
    dev = gpu_speed("H100-SXM", 1, h100.memory_bandwidth_gbps, h100.bf16_tflops)
    est = estimate_run(llama7b, WEIGHTS, KV, dev, [PointLoad(1024 + 8, 512, 128, concurrency=128)])
    load = est.total_s - est.startup_s
    assert 15 < load < 62
    assert 76 <= est.startup_s <= 120


def test_human_duration():
    assert [human_duration(s) for s in (42, 720, 3 * 3600 + 1440, 3 * 86400)] == [
        "42 s",
        "12 min",
        "3.4 h",
        "3.0 days",
    ]


def _points(cfg: RunConfig):
    return load_points(cfg.load, base_workload(cfg))


def test_mission_command_on_a_2_core_cpu_is_refused_with_the_ways_out():
    cfg = RunConfig(model="llama-2-7b", load_format="dummy", concurrency=[128])
    model = resolve_model("llama-2-7b")
    with pytest.raises(ConfigError) as err:
        check_duration(cfg, model, _points(cfg), None, cpu_speed(2))
    msg = str(err.value)
    assert "\n" not in msg and "estimated run time" in msg and " h on CPU (2 cores)" in msg
    for way in ("--model tiny-llama", "--num-requests", "a GPU", "--yes"):
        assert way in msg
    # --yes goes ahead; the estimate is still made
    est = check_duration(
        RunConfig(model="llama-2-7b", concurrency=[128], yes=True),
        model,
        _points(cfg),
        None,
        cpu_speed(2),
    )
    assert est is not None and est.total_s > 3600
    # on an H100 the same run takes minutes
    h100 = find_gpu("H100-SXM")
    gpu = gpu_speed("H100-SXM", 1, h100.memory_bandwidth_gbps, h100.bf16_tflops)
    est = check_duration(cfg, model, _points(cfg), None, gpu)
    assert est is not None and est.total_s < 600


def test_a_server_other_than_vllm_is_not_estimated_as_vllm():
    # the estimate models vLLM on this device; the synthetic server's speed is its own options
    cfg = RunConfig(model="llama-2-7b", load_format="dummy", concurrency=[128],
                    server="synthetic")
    model = resolve_model("llama-2-7b")
    assert check_duration(cfg, model, _points(cfg), None, cpu_speed(2)) is None


def test_tiny_llama_is_never_refused():
    tiny = resolve_model("tiny-llama")
    cfg = RunConfig(concurrency=[16])
    est = check_duration(cfg, tiny, _points(cfg), None, cpu_speed(2))
    assert est is not None and est.total_s < 600  # the default run: minutes
    huge = RunConfig(num_requests=10_000_000, concurrency=[1])
    est = check_duration(huge, tiny, _points(huge), None, cpu_speed(1))
    assert est is not None and est.total_s > 3600  # estimated long, and still not refused


def test_warm_up_counts_as_its_requests_or_its_seconds():
    from infer_prof.run.preflight import point_loads

    def loads(**kw):
        cfg = RunConfig(concurrency=[8], num_requests=100, **kw)
        return point_loads(_points(cfg), 300.0)[0]

    steady = loads()  # the default: one wave of the 8 streams
    assert (steady.requests, steady.warmup_s) == (108, 0.0)
    counted = loads(warmup_requests=3)
    assert (counted.requests, counted.warmup_s) == (103, 0.0)
    llama = ModelSpec.from_config(registry()["llama-2-7b"]["config"], name="llama-2-7b")
    timed = estimate_run(llama, WEIGHTS, KV, TOY, [PointLoad(10, 16, 16, 1, warmup_s=30)])
    untimed = estimate_run(llama, WEIGHTS, KV, TOY, [PointLoad(10, 16, 16, 1)])
    assert timed.total_s == pytest.approx(untimed.total_s + 30)


def test_repeats_count_every_round_and_a_start_up_per_relaunch():
    model = resolve_model("llama-2-7b")
    h100 = find_gpu("H100-SXM")
    gpu = gpu_speed("H100-SXM", 1, h100.memory_bandwidth_gbps, h100.bf16_tflops)
    once = RunConfig(model="llama-2-7b", load_format="dummy", concurrency=[128])
    one = check_duration(once, model, _points(once), None, gpu)
    thrice = once.with_options(repeat=3)
    three = check_duration(thrice, model, _points(thrice), None, gpu)
    relaunched = once.with_options(repeat=3, repeat_relaunch=True)
    fresh = check_duration(relaunched, model, _points(relaunched), None, gpu)
    assert one is not None and three is not None and fresh is not None
    load = one.total_s - one.startup_s
    assert three.startup_s == one.startup_s
    assert three.total_s == pytest.approx(one.startup_s + 3 * load)
    assert fresh.startup_s == pytest.approx(3 * one.startup_s)
    assert fresh.total_s == pytest.approx(3 * one.total_s)


def test_a_run_whose_every_request_would_time_out_is_refused():
    """llama-3.1-8b on a CPU, each point bound by time as a frontier's points are (35 s: the
    precision stop's 30 s ceiling + 5): the run stays under the hour, but one request (512 + 128
    tokens at ~0.12 tok/s) outlasts the 300 s per-request timeout: nothing would be measured."""
    model = resolve_model("llama-3.1-8b")
    opts = dict(model="llama-3.1-8b", load_format="dummy", concurrency=[1, 2, 4, 8],
                duration_s=35.0, input_len=512, output_len=128)
    cfg = RunConfig(**opts)
    with pytest.raises(ConfigError) as err:
        check_duration(cfg, model, _points(cfg), None, cpu_speed(1))
    msg = str(err.value)
    assert "\n" not in msg and "above the per-request timeout of 5 min" in msg
    for way in ("--model tiny-llama", "--output-len", "a GPU", "--timeout", "--yes"):
        assert way in msg
    est = check_duration(RunConfig(**opts, yes=True), model, _points(cfg), None, cpu_speed(1))
    assert est is not None and est.total_s < 3600 and est.fastest_request_s > 300
    # its time-bound points count their last wave's prefill and decode (not 0 s)
    assert est.prefill_s > 0 and est.decode_s > 0
    # a timeout longer than the request: each point now waits for its requests, hours in all
    long = RunConfig(**opts, timeout_s=est.fastest_request_s * 1.01)
    with pytest.raises(ConfigError, match="estimated run time .* above the 1 h limit"):
        check_duration(long, model, _points(long), None, cpu_speed(1))
    # on an H100 a request takes well under a second
    h100 = find_gpu("H100-SXM")
    gpu = gpu_speed("H100-SXM", 1, h100.memory_bandwidth_gbps, h100.bf16_tflops)
    fast = check_duration(cfg, model, _points(cfg), None, gpu)
    assert fast is not None and fast.fastest_request_s < 2


def test_fastest_request_is_one_prefill_and_its_decode_steps(llama7b):
    est = estimate_run(llama7b, WEIGHTS, KV, TOY, [PointLoad(10, 128, 128, concurrency=c)
                                                   for c in (4, 1)])
    one = 128 * prefill_flops_per_token(llama7b, 64.5) / 1e14 + 128 * step_time_s(
        llama7b, WEIGHTS, KV, TOY, 1, 192)
    assert est.fastest_request_s == pytest.approx(one)
