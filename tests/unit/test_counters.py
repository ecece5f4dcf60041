"""Counters vLLM registers but counts only behind a flag (infer_prof.core.measurement.counters)."""

from __future__ import annotations

import pytest

from infer_prof.core.measurement.counters import flag_enabled, not_counted_reason

FLAG = "--enable-mfu-metrics"
METRIC = "vllm:estimated_read_bytes_per_gpu_total"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--model", "m", "--port", "8000"], False),
        (["--model", "m", FLAG], True),
        (["--enable_mfu_metrics"], True),  # vLLM reads _ and - alike
        ([f"{FLAG}=true"], True),
        ([f"{FLAG}=False"], False),
        ([FLAG, "--no-enable-mfu-metrics"], False),  # the last one wins
        (["--no-enable-mfu-metrics", FLAG], True),
        (["--enable-mfu-metrics-extra"], False),  # another flag, not a prefix match
        (["--config", "serve.yaml"], None),  # options in a file: cannot tell
        (["--config=serve.yaml", FLAG], None),
        (None, None),  # not started by infer-prof
    ],
)
def test_flag_enabled(args, expected):
    assert flag_enabled(args, FLAG) is expected


def test_counted_value_stands_even_without_the_flag():
    # a vLLM that counts by default must not be nulled
    assert not_counted_reason(5e9, METRIC, FLAG, False, 1000) is None
    assert not_counted_reason(5e9, METRIC, FLAG, None, 1000) is None


def test_zero_from_a_server_started_without_the_flag_is_not_counted():
    reason = not_counted_reason(0.0, METRIC, FLAG, False, 0)
    assert reason == (
        "not counted: vLLM counts vllm:estimated_read_bytes_per_gpu_total only when started "
        "with --enable-mfu-metrics, and infer-prof started it without "
        "(add --engine-arg=--enable-mfu-metrics)"
    )


def test_zero_while_tokens_were_generated_is_not_counted():
    # --endpoint: launch flags unknown
    reason = not_counted_reason(0.0, METRIC, FLAG, None, 131_072)
    assert reason == (
        "not counted: vllm:estimated_read_bytes_per_gpu_total rose by 0 while 131,072 output "
        "tokens were generated (vLLM counts it only with --enable-mfu-metrics)"
    )
    # flag given but nothing counted while working: still not a measurement
    assert not_counted_reason(0.0, METRIC, FLAG, True, 10) is not None


def test_zero_with_nothing_generated_is_a_measured_zero():
    assert not_counted_reason(0.0, METRIC, FLAG, None, 0) is None
    assert not_counted_reason(0.0, METRIC, FLAG, True, None) is None


def test_unread_counter_gets_no_reason_here():
    assert not_counted_reason(None, METRIC, FLAG, False, 1000) is None
