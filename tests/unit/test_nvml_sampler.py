"""NvmlSampler against a scripted fake NVML module: the arithmetic is asserted exactly.

The fake implements the pynvml functions the sampler calls, with the real pynvml names, and
raises the real pynvml exception classes (nvidia-ml-py is a dependency of the project). The
sampler's interval is an hour in the scripted tests, so its thread never samples and every
sample is one the test asked for (start, window marks, sample_now, stop).
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace
from typing import Any

import msgspec
import pynvml
import pytest

from infer_prof.core.measurement.nvml import decode_clock_event_reasons
from infer_prof.report.console import totals_table
from infer_prof.results.document import Summary
from infer_prof.run.economics import energy_block
from infer_prof.telemetry.nvml import NvmlSampler
from tests.unit.typed_results import result_of

GIB = 1024**3
HOUR = 3600.0


class Clock:
    """A settable integer-nanosecond clock."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class FakeNvml:
    """The pynvml functions NvmlSampler uses, returning ``values[gpu][field]`` (an exception
    instance there is raised). Calls are counted per (function, gpu)."""

    NVMLError = pynvml.NVMLError
    NVML_ERROR_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_FUNCTION_NOT_FOUND = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU

    def __init__(self, static: list[dict[str, Any]], init_error: Exception | None = None) -> None:
        self.static = static
        self.values: list[dict[str, Any]] = [{} for _ in static]
        self.init_error = init_error
        self.calls: dict[tuple[str, int], int] = {}
        self.shutdowns = 0

    def _get(self, fn: str, h: int, field: str) -> Any:
        self.calls[(fn, h)] = self.calls.get((fn, h), 0) + 1
        v = self.values[h][field]
        if isinstance(v, Exception):
            raise v
        return v

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.static)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> Any:
        return self.static[h]["name"]

    def nvmlDeviceGetUUID(self, h: int) -> Any:
        return self.static[h]["uuid"]

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self.static[h]["power_limit_mw"]

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        used = self._get("memory", h, "mem_used")
        return SimpleNamespace(total=self.static[h]["mem_total"], used=used, free=0)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        gpu, mem = self._get("util", h, "util")
        return SimpleNamespace(gpu=gpu, memory=mem)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self._get("power", h, "power_mw")

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        return self._get("energy", h, "energy_mj")

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        if kind == pynvml.NVML_CLOCK_SM:
            return self._get("sm_clock", h, "sm_mhz")
        assert kind == pynvml.NVML_CLOCK_MEM
        return self._get("mem_clock", h, "mem_mhz")

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._get("temperature", h, "temp_c")

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self._get("reasons", h, "mask")


TWO_GPUS = [
    {
        "name": b"NVIDIA H100 80GB HBM3",  # pynvml may hand back bytes
        "uuid": "GPU-0000",
        "mem_total": 80 * GIB,
        "power_limit_mw": 700_000,
    },
    {"name": "NVIDIA A10", "uuid": "GPU-1111", "mem_total": 24 * GIB, "power_limit_mw": 150_000},
]


def gpu0(energy_mj: int, power_mw: int, util: int, mem_gib: int, sm: int, temp: int, mask: int):
    return {
        "energy_mj": energy_mj,
        "power_mw": power_mw,
        "util": (util, util // 2),
        "mem_used": mem_gib * GIB,
        "sm_mhz": sm,
        "mem_mhz": 2619,
        "temp_c": temp,
        "mask": mask,
    }


def gpu1(power_mw: int, temp: Any) -> dict[str, Any]:
    # No energy counter and no memory clock on this board.
    return {
        "energy_mj": pynvml.NVMLError_NotSupported(),
        "power_mw": power_mw,
        "util": (30, 10),
        "mem_used": 4 * GIB,
        "sm_mhz": 1695,
        "mem_mhz": pynvml.NVMLError_NotSupported(),
        "temp_c": temp,
        "mask": 0,
    }


def run_scripted() -> tuple[dict[str, Any], FakeNvml]:
    """Five samples at t = 0 (warm-up), 1 (window start), 2, 4 (window end), 5 (after)."""
    fake = FakeNvml(TWO_GPUS)
    clock = Clock(1_000_000_000)
    s = NvmlSampler(interval_s=HOUR, nvml=fake, clock=clock)

    fake.values = [gpu0(5_000_000, 100_000, 0, 1, 345, 35, 0x1), gpu1(50_000, 30)]
    s.start()  # t = 0 s
    clock.now = 2_000_000_000
    fake.values = [gpu0(5_100_000, 200_000, 50, 10, 1980, 40, 0x0), gpu1(100_000, 40)]
    s.mark_window_start()  # t = 1 s
    clock.now = 3_000_000_000
    fake.values = [
        gpu0(5_350_000, 300_000, 100, 12, 1980, 60, 0x4),
        gpu1(100_000, pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)),  # a transient failure
    ]
    s.sample_now()  # t = 2 s
    clock.now = 5_000_000_000
    fake.values = [gpu0(5_900_000, 250_000, 80, 11, 1755, 75, 0x44), gpu1(100_000, 50)]
    s.mark_window_end()  # t = 4 s
    clock.now = 6_000_000_000
    fake.values = [gpu0(6_000_000, 90_000, 0, 11, 345, 90, 0x1), gpu1(50_000, 99)]
    return s.stop(), fake  # t = 5 s


def test_decode_clock_event_reasons() -> None:
    assert decode_clock_event_reasons(0) == []
    assert decode_clock_event_reasons(0x1) == ["gpu_idle"]
    assert decode_clock_event_reasons(0x24) == ["sw_power_cap", "sw_thermal_slowdown"]
    assert decode_clock_event_reasons(0xC8) == [
        "hw_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ]
    assert decode_clock_event_reasons(0x804) == ["sw_power_cap", "unknown_0x800"]


def test_series_cover_the_whole_run_and_window_is_marked() -> None:
    result, fake = run_scripted()
    assert result["available"] is True
    assert result["reason"] is None
    assert result["interval_s"] == HOUR
    assert result["driver_version"] == "550.54.15"
    assert result["t0_ns"] == 1_000_000_000
    assert result["window"] == {"start_s": 1.0, "end_s": 4.0, "marked": True}
    assert fake.shutdowns == 1
    g0, g1 = result["gpus"]
    assert (g0["index"], g0["name"], g0["uuid"]) == (0, "NVIDIA H100 80GB HBM3", "GPU-0000")
    assert (g1["index"], g1["name"], g1["uuid"]) == (1, "NVIDIA A10", "GPU-1111")
    assert g0["memory_total_bytes"] == 80 * GIB
    assert g0["power_limit_w"] == 700.0
    s0 = g0["series"]
    assert s0["t_s"] == [0.0, 1.0, 2.0, 4.0, 5.0]
    assert s0["power_w"] == [100.0, 200.0, 300.0, 250.0, 90.0]  # mW / 1000
    assert s0["energy_mj"] == [5_000_000, 5_100_000, 5_350_000, 5_900_000, 6_000_000]
    assert s0["util_pct"] == [0.0, 50.0, 100.0, 80.0, 0.0]
    assert s0["mem_util_pct"] == [0.0, 25.0, 50.0, 40.0, 0.0]
    assert s0["mem_used_bytes"] == [GIB, 10 * GIB, 12 * GIB, 11 * GIB, 11 * GIB]
    assert s0["mem_clock_mhz"] == [2619.0] * 5
    assert s0["clock_event_mask"] == [0x1, 0x0, 0x4, 0x44, 0x1]
    assert s0["clock_event_reasons"][3] == ["sw_power_cap", "hw_thermal_slowdown"]


def test_window_summary_of_a_fully_supported_gpu() -> None:
    result, _ = run_scripted()
    summary = result["gpus"][0]["summary"]
    # Window samples: t = 1, 2, 4 s. Power 200, 300, 250 W:
    # trapezoid = 1 * (200 + 300) / 2 + 2 * (300 + 250) / 2 = 250 + 550 = 800 J.
    assert summary["samples"] == 3
    assert summary["window_s"] == 3.0
    assert summary["energy_j_integrated"] == 800.0
    # Counter: (5_900_000 - 5_100_000) mJ = 800 J; warm-up and after-window samples excluded.
    assert summary["energy_j"] == 800.0
    assert summary["power_w_mean"] == pytest.approx(800.0 / 3.0, rel=1e-12)
    assert summary["power_w_max"] == 300.0
    # Utilization 50, 100, 80: (1 * 75 + 2 * 90) / 3 = 85.
    assert summary["util_pct_mean"] == 85.0
    assert summary["util_pct_max"] == 100.0
    assert summary["mem_util_pct_mean"] == 42.5
    assert summary["mem_used_bytes_max"] == 12 * GIB
    # SM clock 1980, 1980, 1755: (1 * 1980 + 2 * 1867.5) / 3 = 1905.
    assert summary["sm_clock_mhz_mean"] == 1905.0
    assert summary["mem_clock_mhz_mean"] == 2619.0
    assert summary["temp_c_max"] == 75.0  # the 90 C after the window does not count
    # gpu_idle before and after the window is not in it; 0x4 and 0x44 are.
    assert summary["clock_event_reasons"] == ["hw_thermal_slowdown", "sw_power_cap"]
    # The power cap is reported apart: only the thermal slowdown is throttling.
    # Window masks 0x0, 0x4, 0x44: power cap in 2 of 3 samples, a slowdown in 1 of 3.
    assert summary["power_capped"] is True
    assert summary["power_cap_fraction"] == pytest.approx(2 / 3, rel=1e-12)
    assert summary["throttle_reasons"] == ["hw_thermal_slowdown"]
    assert summary["throttled"] is True
    assert summary["throttled_fraction"] == pytest.approx(1 / 3, rel=1e-12)


def test_unsupported_fields_are_null_for_that_gpu_only() -> None:
    result, fake = run_scripted()
    g1 = result["gpus"][1]
    assert g1["unsupported"] == ["energy", "mem_clock"]
    # NotSupported is remembered: asked once, at the first sample, never again.
    assert fake.calls[("energy", 1)] == 1
    assert fake.calls[("mem_clock", 1)] == 1
    assert fake.calls[("energy", 0)] == 5
    assert g1["series"]["energy_mj"] == [None] * 5
    assert g1["series"]["mem_clock_mhz"] == [None] * 5
    # A transient error nulls that one reading and is counted, not remembered.
    assert g1["series"]["temp_c"] == [30.0, 40.0, None, 50.0, 99.0]
    assert g1["read_errors"] == {"temperature": 1}
    assert g1["last_error"] == "temperature: Unknown Error"
    summary = g1["summary"]
    assert summary["energy_j"] is None
    assert summary["energy_j_integrated"] == 300.0  # 100 W for 3 s, labelled as integrated
    assert summary["power_w_mean"] == 100.0
    assert summary["mem_clock_mhz_mean"] is None
    assert summary["sm_clock_mhz_mean"] == 1695.0
    assert summary["temp_c_max"] == 50.0
    assert summary["clock_event_reasons"] == []
    assert summary["throttle_reasons"] == []
    assert summary["throttled"] is False
    assert summary["power_capped"] is False
    assert summary["power_cap_fraction"] == 0.0
    assert summary["throttled_fraction"] == 0.0


def test_total_needs_every_gpu() -> None:
    result, _ = run_scripted()
    total = result["total"]
    assert total["gpus"] == 2
    assert total["energy_j"] is None  # GPU 1 has no counter: a partial sum would mislead
    assert total["energy_j_integrated"] == 1100.0
    assert total["power_w_mean"] == pytest.approx(800.0 / 3.0 + 100.0, rel=1e-12)
    assert total["throttled"] is True
    assert total["throttle_reasons"] == ["hw_thermal_slowdown"]
    assert total["power_capped"] is True


def test_without_marks_the_window_is_the_whole_run() -> None:
    fake = FakeNvml(TWO_GPUS[:1])
    clock = Clock(0)
    s = NvmlSampler(interval_s=HOUR, nvml=fake, clock=clock)
    fake.values = [gpu0(1_000, 100_000, 10, 1, 1000, 30, 0)]
    s.start()
    clock.now = 2_000_000_000
    fake.values = [gpu0(401_000, 300_000, 30, 1, 1000, 30, 0)]
    result = s.stop()
    assert result["window"] == {"start_s": None, "end_s": None, "marked": False}
    summary = result["gpus"][0]["summary"]
    assert summary["samples"] == 2
    assert summary["energy_j"] == 400.0
    assert summary["energy_j_integrated"] == 400.0  # 2 s * (100 + 300) / 2 W
    assert summary["throttled"] is False


def test_energy_counter_reset_inside_the_window() -> None:
    fake = FakeNvml(TWO_GPUS[:1])
    clock = Clock(0)
    s = NvmlSampler(interval_s=HOUR, nvml=fake, clock=clock)
    fake.values = [gpu0(900_000, 100_000, 10, 1, 1000, 30, 0)]
    s.start()
    clock.now = 1_000_000_000
    fake.values = [gpu0(50_000, 100_000, 10, 1, 1000, 30, 0)]  # driver reloaded: from 0
    s.sample_now()
    clock.now = 2_000_000_000
    fake.values = [gpu0(150_000, 100_000, 10, 1, 1000, 30, 0)]
    summary = s.stop()["gpus"][0]["summary"]
    assert summary["energy_j"] == (50_000 + 100_000) / 1000


def _masks_summary(masks: list[int]) -> dict[str, Any]:
    """One H100 whose marked window holds one sample per mask, 1 s apart; the samples before
    (start) and after (stop) the window read gpu_idle and do not count."""
    fake = FakeNvml(TWO_GPUS[:1])
    clock = Clock(0)
    s = NvmlSampler(interval_s=HOUR, nvml=fake, clock=clock)
    fake.values = [gpu0(0, 60_000, 0, 70, 345, 40, 0x1)]
    s.start()
    for i, mask in enumerate(masks):
        clock.now = (i + 1) * 1_000_000_000
        fake.values = [gpu0(0, 690_000, 100, 70, 1755, 60, mask)]
        if i == 0:
            s.mark_window_start()
        elif i == len(masks) - 1:
            s.mark_window_end()
        else:
            s.sample_now()
    clock.now = (len(masks) + 1) * 1_000_000_000
    fake.values = [gpu0(0, 60_000, 0, 70, 345, 40, 0x1)]
    result = s.stop()
    summary: dict[str, Any] = result["gpus"][0]["summary"]
    assert summary["samples"] == len(masks)
    summary["total"] = result["total"]
    return summary


def test_a_saturated_h100_at_its_power_cap_is_not_throttled() -> None:
    """What every saturated H100 SXM run shows: sw_power_cap (0x4) in every sample, at 700 W."""
    summary = _masks_summary([0x4, 0x4, 0x4, 0x4])
    assert summary["clock_event_reasons"] == ["sw_power_cap"]
    assert summary["power_capped"] is True
    assert summary["power_cap_fraction"] == 1.0
    assert summary["throttled"] is False
    assert summary["throttle_reasons"] == []
    assert summary["throttled_fraction"] == 0.0
    assert summary["total"]["throttled"] is False
    assert summary["total"]["power_capped"] is True


@pytest.mark.parametrize(
    ("bit", "name"),
    [
        (0x08, "hw_slowdown"),
        (0x20, "sw_thermal_slowdown"),
        (0x40, "hw_thermal_slowdown"),
        (0x80, "hw_power_brake_slowdown"),
    ],
)
def test_thermal_and_hardware_slowdowns_are_throttling(bit: int, name: str) -> None:
    # at the cap in all four samples, the slowdown in the last two
    summary = _masks_summary([0x4, 0x4, 0x4 | bit, 0x4 | bit])
    assert summary["throttled"] is True
    assert summary["throttle_reasons"] == [name]
    assert summary["throttled_fraction"] == 0.5
    assert summary["power_capped"] is True
    assert summary["total"]["throttle_reasons"] == [name]


def test_design_limits_and_clock_settings_are_neither() -> None:
    # gpu_idle, applications clocks, sync boost, display clocks, board limit, reliability
    summary = _masks_summary([0x1, 0x2, 0x10, 0x100 | 0x200 | 0x400])
    assert summary["throttled"] is False
    assert summary["throttled_fraction"] == 0.0
    assert summary["power_capped"] is False
    assert "board_limit" in summary["clock_event_reasons"]


def test_deprecated_throttle_reasons_function_is_the_fallback() -> None:
    """An older driver lacks nvmlDeviceGetCurrentClocksEventReasons (pynvml raises
    FunctionNotFound): the deprecated ...ThrottleReasons gives the same bits."""
    fake = FakeNvml(TWO_GPUS[:1])

    def event_reasons(h: int) -> int:
        raise pynvml.NVMLError_FunctionNotFound()

    def throttle_reasons(h: int) -> int:
        return fake._get("throttle", h, "mask")

    fake.nvmlDeviceGetCurrentClocksEventReasons = event_reasons  # type: ignore[method-assign]
    fake.nvmlDeviceGetCurrentClocksThrottleReasons = throttle_reasons  # type: ignore[attr-defined]
    s = NvmlSampler(interval_s=HOUR, nvml=fake, clock=Clock(0))
    fake.values = [gpu0(0, 100_000, 10, 1, 1000, 30, 0x20)]
    s.start()
    result = s.stop()
    g = result["gpus"][0]
    assert g["unsupported"] == ["clock_events"]
    assert g["series"]["clock_event_mask"] == [0x20, 0x20]
    assert g["summary"]["throttle_reasons"] == ["sw_thermal_slowdown"]
    assert g["summary"]["throttled"] is True
    assert fake.calls[("throttle", 0)] == 2


def test_reasons_unreadable_means_throttled_is_null() -> None:
    fake = FakeNvml(TWO_GPUS[:1])
    fake.nvmlDeviceGetCurrentClocksEventReasons = _raise_not_supported  # type: ignore[method-assign]
    fake.nvmlDeviceGetCurrentClocksThrottleReasons = _raise_not_supported  # type: ignore[attr-defined]
    s = NvmlSampler(interval_s=HOUR, nvml=fake, clock=Clock(0))
    fake.values = [gpu0(0, 100_000, 10, 1, 1000, 30, 0)]
    s.start()
    summary = s.stop()["gpus"][0]["summary"]
    assert summary["clock_event_reasons"] is None
    assert summary["throttled"] is None
    assert summary["power_capped"] is None
    assert summary["power_cap_fraction"] is None
    assert summary["throttled_fraction"] is None


def _raise_not_supported(h: int) -> int:
    raise pynvml.NVMLError_NotSupported()


def test_no_driver_means_unavailable_and_null() -> None:
    fake = FakeNvml(TWO_GPUS, init_error=pynvml.NVMLError_LibraryNotFound())
    s = NvmlSampler(interval_s=HOUR, nvml=fake, clock=Clock(0))
    s.start()
    s.mark_window_start()
    s.mark_window_end()
    result = s.stop()
    assert result["available"] is False
    assert result["reason"] == "nvmlInit failed: NVML Shared Library Not Found (no NVIDIA driver?)"
    assert result["gpus"] == []
    assert result["total"] == {
        "gpus": 0,
        "energy_j": None,
        "energy_j_integrated": None,
        "power_w_mean": None,
        "power_capped": None,
        "throttled": None,
        "throttle_reasons": None,
    }
    assert fake.calls == {}


def test_pynvml_missing_means_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    s = NvmlSampler(interval_s=HOUR)
    s.start()
    result = s.stop()
    assert result["available"] is False
    assert "nvidia-ml-py" in result["reason"]
    assert result["gpus"] == []


def test_gpu_indices_restrict_sampling() -> None:
    fake = FakeNvml(TWO_GPUS)
    fake.values = [gpu0(0, 100_000, 10, 1, 1000, 30, 0), gpu1(100_000, 40)]
    s = NvmlSampler(interval_s=HOUR, nvml=fake, clock=Clock(0), gpu_indices=[1])
    s.start()
    result = s.stop()
    assert [g["index"] for g in result["gpus"]] == [1]
    assert ("power", 0) not in fake.calls

    bad = NvmlSampler(interval_s=HOUR, nvml=FakeNvml(TWO_GPUS), gpu_indices=[2])
    bad.start()
    result = bad.stop()
    assert result["available"] is False
    assert result["reason"] == (
        "NVML device enumeration failed: GPU index 2 not present (NVML sees 2 GPUs)"
    )


def test_thread_samples_on_its_own() -> None:
    """The background thread takes samples between start and stop (no timing asserted)."""
    fake = FakeNvml(TWO_GPUS[:1])
    fake.values = [gpu0(0, 100_000, 10, 1, 1000, 30, 0)]
    s = NvmlSampler(interval_s=0.005, nvml=fake)
    s.start()
    deadline = time.monotonic() + 10.0
    while fake.calls.get(("power", 0), 0) < 5 and time.monotonic() < deadline:
        time.sleep(0.005)
    result = s.stop()
    t = result["gpus"][0]["series"]["t_s"]
    assert len(t) >= 6  # start + at least 4 thread samples + stop
    assert t == sorted(t)


def test_real_nvml_on_this_machine() -> None:
    """Runs the real pynvml: on a GPU machine it must read numbers, without one say why."""
    s = NvmlSampler(interval_s=0.05)
    s.start()
    s.mark_window_start()
    time.sleep(0.2)
    s.mark_window_end()
    result = s.stop()
    if result["available"]:
        g = result["gpus"][0]
        assert g["summary"]["samples"] >= 2
        assert g["summary"]["power_w_mean"] is None or g["summary"]["power_w_mean"] > 0
        assert g["memory_total_bytes"] > 0
    else:
        assert result["reason"]
        assert result["gpus"] == []
        assert all(v is None for k, v in result["total"].items() if k != "gpus")


def _console_rows(masks: list[int]) -> dict[str, str]:
    """The console's totals rows for a run whose NVML window held these masks."""
    summary = _masks_summary(masks)
    telemetry_gpu = {"available": True, "total": summary["total"]}
    run = Summary(total_output_tokens=1000)
    result = {
        "summary": {
            "requests_completed": 1,
            "requests_failed": 0,
            "request_throughput": 1.0,
            "output_throughput": 1.0,
            "total_throughput": 1.0,
        },
        "energy": msgspec.to_builtins(energy_block(telemetry_gpu, run)),
    }
    t = totals_table(result_of(**result))
    return dict(zip(t.columns[0].cells, t.columns[1].cells, strict=True))


def test_console_says_power_cap_plainly_and_warns_only_on_slowdowns() -> None:
    capped = _console_rows([0x4, 0x4, 0x4])
    assert capped["GPU power"].startswith("at its power cap (sw_power_cap): normal")
    assert not any("THROTTL" in k or "WARNING" in k for k in capped)
    hot = _console_rows([0x4, 0x44, 0x44])
    assert hot["WARNING GPU THROTTLED"].startswith("hw_thermal_slowdown: ")
    assert "GPU power" in hot
    idle = _console_rows([0x0, 0x0])
    assert not any("THROTTL" in k or k == "GPU power" for k in idle)
