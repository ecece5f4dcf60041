"""core.measurement.timeseries on hand-computed series: None is "not measured" and never becomes
0."""

from __future__ import annotations

import math

from infer_prof.core.measurement.timeseries import (
    busy_mean,
    counter_increase,
    joules_per_token,
    joules_per_token_at_rate,
    maximum,
    mean,
    ratio,
    take,
    time_weighted_mean,
    trapezoid,
    window_indices,
)


def test_window_indices_inclusive_and_open_ends() -> None:
    t = [0.0, 1.0, 2.0, 4.0, 5.0]
    assert window_indices(t, 1.0, 4.0) == [1, 2, 3]
    assert window_indices(t, None, 1.5) == [0, 1]
    assert window_indices(t, 4.5, None) == [4]
    assert window_indices(t, None, None) == [0, 1, 2, 3, 4]
    assert take(["a", "b", "c"], [2, 0]) == ["c", "a"]


def test_mean_and_max_skip_unmeasured() -> None:
    assert mean([1, None, 3]) == 2.0
    assert mean([None, None]) is None
    assert mean([]) is None
    assert maximum([1, None, 3, math.nan]) == 3
    assert maximum([None]) is None


def test_trapezoid() -> None:
    # 1 s at (200 + 300) / 2 + 2 s at (300 + 250) / 2 = 250 + 550
    assert trapezoid([1.0, 2.0, 4.0], [200.0, 300.0, 250.0]) == 800.0
    # The unmeasured middle point is bridged: 3 s at (200 + 250) / 2
    assert trapezoid([1.0, 2.0, 4.0], [200.0, None, 250.0]) == 675.0
    assert trapezoid([1.0], [200.0]) is None
    assert trapezoid([1.0, 2.0], [None, 5.0]) is None


def test_time_weighted_mean() -> None:
    assert time_weighted_mean([1.0, 2.0, 4.0], [50.0, 100.0, 80.0]) == 85.0  # 255 / 3
    assert time_weighted_mean([3.0], [7.0]) == 7.0
    assert time_weighted_mean([3.0, 3.0], [7.0, 9.0]) == 8.0
    assert time_weighted_mean([1.0, 2.0], [None, None]) is None


def test_counter_increase_with_reset_and_gaps() -> None:
    assert counter_increase([10, 15, 30]) == 20.0
    assert counter_increase([10, 15, 3, 8]) == 5.0 + 3.0 + 5.0  # reset to 0 after 15
    assert counter_increase([10, None, 30]) == 20.0
    assert counter_increase([None, 15, 30]) is None  # start unknown: increase unknown
    assert counter_increase([10, 15, None]) is None
    assert counter_increase([]) is None
    assert counter_increase([7]) == 0.0


def test_ratio_and_joules_per_token() -> None:
    assert ratio(600.0, 2500.0) == 0.24
    assert ratio(0.0, 0.0) is None
    assert ratio(None, 3.0) is None
    assert joules_per_token(800.0, 4000) == 0.2
    assert joules_per_token(None, 4000) is None
    assert joules_per_token(800.0, 0) is None
    assert joules_per_token(800.0, None) is None
    assert joules_per_token(0.0, 10) == 0.0


def test_busy_mean_leaves_out_idle_time() -> None:
    # one stream, scraped each second, idle at t = 3: time average 0.9, batch while busy 1.0
    t = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    v = [1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1]
    assert time_weighted_mean(t, v) == 0.9
    assert busy_mean(t, v) == 1.0
    # uneven spacing: each sample stands for half the gap on either side
    # t = 0 (w 0.5) v 2; t = 1 (w 0.5 + 1.5) v 4; t = 4 (w 1.5 + 0.5) v 0 (idle); t = 5 (w 0.5) v 6
    # -> (0.5 x 2 + 2 x 4 + 0.5 x 6) / (0.5 + 2 + 0.5) = 12 / 3 = 4
    assert busy_mean([0.0, 1.0, 4.0, 5.0], [2, 4, 0, 6]) == 4.0
    # an unmeasured sample is skipped, not read as idle
    assert busy_mean([0.0, 1.0, 2.0], [3, None, 3]) == 3.0
    assert busy_mean([5.0], [7]) == 7.0  # one sample: itself
    assert busy_mean([0.0, 1.0], [0, 0]) is None  # never busy
    assert busy_mean([], []) is None


def test_joules_per_token_at_the_runs_rate() -> None:
    # 800 J over a 4 s window is 200 W; at 1,000 tokens/s that is 0.2 J per token
    assert joules_per_token_at_rate(800.0, 4.0, 1000.0) == 0.2
    assert joules_per_token_at_rate(None, 4.0, 1000.0) is None
    assert joules_per_token_at_rate(800.0, None, 1000.0) is None
    assert joules_per_token_at_rate(800.0, 4.0, 0.0) is None


def test_energy_block_follows_the_rate_basis() -> None:
    import msgspec

    from infer_prof.results.document import Summary
    from infer_prof.run.economics import energy_block

    gpu = {"available": True, "total": {"energy_j": 800.0}}
    # a closed loop out of phase: 3,600 measured tokens over a 4 s window, at 1,000 tokens/s
    # over the streams' spans (warm-up tokens filled the rest of the window the energy paid for)
    steady = Summary(total_output_tokens=3600, duration_s=4.0, output_throughput=1000.0,
                     rate_basis="stream_spans")
    assert energy_block(gpu, steady).joules_per_output_token == 0.2
    window = msgspec.structs.replace(steady, rate_basis="window")
    assert energy_block(gpu, window).joules_per_output_token == 800.0 / 3600


def test_energy_block_is_the_result_section_as_a_run_writes_it() -> None:
    import msgspec

    from infer_prof.results.cost_sections import Energy
    from infer_prof.results.document import Summary
    from infer_prof.run.economics import energy_block

    # NVML's counter in whole joules (an int) is held as a float, as decoding the file makes it
    e = energy_block({"total": {"energy_j": 800, "power_w_mean": 200, "power_capped": True,
                                "throttled": False, "throttle_reasons": ["sw_power_cap"]}},
                     Summary(total_output_tokens=400))
    assert e == Energy(energy_j=800.0, source="nvml_energy_counter",
                       joules_per_output_token=2.0, mean_power_w=200.0, power_capped=True,
                       throttled=False, throttle_reasons=["sw_power_cap"])
    assert msgspec.json.encode(e) == msgspec.json.encode(
        msgspec.json.decode(msgspec.json.encode(e), type=Energy))
    assert isinstance(e.energy_j, float) and isinstance(e.mean_power_w, float)
    # the integrated power when the counter is missing; nothing read: a reason
    integrated = energy_block({"total": {"energy_j_integrated": 10.5}}, Summary())
    assert (integrated.energy_j, integrated.source) == (10.5, "nvml_power_integrated")
    none = energy_block({"available": False, "reason": "no NVML"}, Summary())
    assert (none.energy_j, none.source, none.reason) == (None, None, "no NVML")
    assert energy_block(None, Summary()).reason == "no energy reading"
