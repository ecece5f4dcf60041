"""NVML clock-event reasons and the arithmetic that summarizes NVML samples over a window: the
pure half of :mod:`infer_prof.telemetry.nvml` (which reads the GPUs).

Units as there: times in seconds, utilization in percent, memory in bytes, power in W, energy
counter in mJ, clocks in MHz, temperature in degrees C.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infer_prof.core.measurement import timeseries as ts

# Clock-event ("throttle") reason bits, as nvml.h defines nvmlClocksEventReason* /
# nvmlClocksThrottleReason* (the same values; the second spelling is the deprecated one).
CLOCK_EVENT_REASON_BITS: tuple[tuple[int, str], ...] = (
    (0x0001, "gpu_idle"),
    (0x0002, "applications_clocks_setting"),
    (0x0004, "sw_power_cap"),
    (0x0008, "hw_slowdown"),
    (0x0010, "sync_boost"),
    (0x0020, "sw_thermal_slowdown"),
    (0x0040, "hw_thermal_slowdown"),
    (0x0080, "hw_power_brake_slowdown"),
    (0x0100, "display_clock_setting"),
    (0x0200, "board_limit"),
    (0x0400, "reliability"),
)

# Clocks held at the board's power limit: what a GPU does under full load (a saturated H100 SXM
# sits at its 700 W cap all the time). Reported as ``power_capped``; normal operation, not a
# warning.
POWER_CAP_REASONS: frozenset[str] = frozenset({"sw_power_cap"})

# Thermal and hardware slowdowns: the clocks were pulled below what the power limit allows
# (overheating, a hardware slowdown signal, the external power brake). The run did not get the
# GPU's normal speed: reported as ``throttled``, a warning. Idle, application or display clock
# settings, sync boost and the board/reliability design limits are neither: they are listed in
# ``clock_event_reasons`` only.
THROTTLE_REASONS: frozenset[str] = frozenset(
    {
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    }
)

# Summary keys, in the order :func:`summarize_gpu` writes them.
SUMMARY_KEYS: tuple[str, ...] = (
    "samples",
    "window_s",
    "util_pct_mean",
    "util_pct_max",
    "mem_util_pct_mean",
    "mem_used_bytes_max",
    "power_w_mean",
    "power_w_max",
    "energy_j",
    "energy_j_integrated",
    "sm_clock_mhz_mean",
    "mem_clock_mhz_mean",
    "temp_c_max",
    "clock_event_reasons",
    "power_capped",
    "power_cap_fraction",
    "throttle_reasons",
    "throttled",
    "throttled_fraction",
)


def decode_clock_event_reasons(mask: int) -> list[str]:
    """Names of the bits set in an NVML clock-event (throttle) reasons mask, lowest bit first.

    Bits that nvml.h does not name (as of driver 5xx) come out as ``"unknown_0x<bit>"``.
    ``decode_clock_event_reasons(0x24) == ["sw_power_cap", "sw_thermal_slowdown"]``.
    """
    names = [name for bit, name in CLOCK_EVENT_REASON_BITS if mask & bit]
    known = 0
    for bit, _ in CLOCK_EVENT_REASON_BITS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"unknown_0x{bit:x}")
            rest &= ~bit
        bit <<= 1
    return names


def summarize_gpu(
    series: dict[str, list[Any]], start_s: float | None, end_s: float | None
) -> dict[str, Any]:
    """Summary of one GPU's series over the window ``[start_s, end_s]`` (``None``: open end).

    - ``*_mean``: time-weighted (trapezoid) mean over the window's samples, so
      ``power_w_mean * window_s == energy_j_integrated``; ``*_max``: largest sample.
    - ``energy_j``: (energy counter at the window's last sample - at its first) / 1000, counter
      resets handled; ``None`` where the GPU has no energy counter or a boundary read failed.
    - ``energy_j_integrated``: trapezoid integral of power (W) over the window's samples, J;
      an estimate from samples, labelled as such, reported beside the counter's figure.
    - ``clock_event_reasons``: every reason seen in the window (sorted).
    - ``power_capped``: the clocks were held at the board's power limit (``sw_power_cap``) in
      some sample; ``power_cap_fraction``: share of the window's samples with it set. Normal
      under full load, not a slowdown.
    - ``throttle_reasons``: the thermal and hardware slowdowns seen (``THROTTLE_REASONS``);
      ``throttled``: any seen (a warning); ``throttled_fraction``: share of samples with one.
      Each ``None`` where the reasons could not be read.
    - ``samples``: samples in the window; ``window_s``: time from its first to its last sample.
    """
    t: list[float] = series["t_s"]
    idx = ts.window_indices(t, start_s, end_s)
    tw = ts.take(t, idx)

    def col(key: str) -> list[Any]:
        return ts.take(series[key], idx)

    energy_mj = ts.counter_increase(col("energy_mj"))
    masks = [m for m in col("clock_event_mask") if m is not None]
    seen: set[str] = set()
    for m in masks:
        seen.update(decode_clock_event_reasons(m))
    throttle = sorted(seen & THROTTLE_REASONS)

    def share(reasons: frozenset[str]) -> float | None:
        if not masks:
            return None
        hits = sum(1 for m in masks if reasons & set(decode_clock_event_reasons(m)))
        return hits / len(masks)

    return {
        "samples": len(idx),
        "window_s": (tw[-1] - tw[0]) if tw else None,
        "util_pct_mean": ts.time_weighted_mean(tw, col("util_pct")),
        "util_pct_max": ts.maximum(col("util_pct")),
        "mem_util_pct_mean": ts.time_weighted_mean(tw, col("mem_util_pct")),
        "mem_used_bytes_max": ts.maximum(col("mem_used_bytes")),
        "power_w_mean": ts.time_weighted_mean(tw, col("power_w")),
        "power_w_max": ts.maximum(col("power_w")),
        "energy_j": energy_mj / 1000.0 if energy_mj is not None else None,
        "energy_j_integrated": ts.trapezoid(tw, col("power_w")),
        "sm_clock_mhz_mean": ts.time_weighted_mean(tw, col("sm_clock_mhz")),
        "mem_clock_mhz_mean": ts.time_weighted_mean(tw, col("mem_clock_mhz")),
        "temp_c_max": ts.maximum(col("temp_c")),
        "clock_event_reasons": sorted(seen) if masks else None,
        "power_capped": bool(seen & POWER_CAP_REASONS) if masks else None,
        "power_cap_fraction": share(POWER_CAP_REASONS),
        "throttle_reasons": throttle if masks else None,
        "throttled": bool(throttle) if masks else None,
        "throttled_fraction": share(THROTTLE_REASONS),
    }


def summarize_total(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """All GPUs together: sums of energy and mean power, whether any GPU was power-capped and
    whether any GPU throttled (thermal or hardware slowdown).

    A sum is ``None`` unless every GPU has the figure (a partial sum would under-state it);
    ``power_capped`` / ``throttled`` are True if any GPU's are, ``None`` if no GPU's reasons
    could be read; ``throttle_reasons`` is the union of the GPUs' slowdown reasons.
    """

    def total(key: str) -> float | None:
        vals = [s[key] for s in summaries]
        if not vals or any(v is None for v in vals):
            return None
        return float(sum(vals))

    def any_of(key: str) -> bool | None:
        flags = [s[key] for s in summaries if s.get(key) is not None]
        return any(flags) if flags else None

    read = [s for s in summaries if s.get("throttle_reasons") is not None]
    return {
        "gpus": len(summaries),
        "energy_j": total("energy_j"),
        "energy_j_integrated": total("energy_j_integrated"),
        "power_w_mean": total("power_w_mean"),
        "power_capped": any_of("power_capped"),
        "throttled": any_of("throttled"),
        "throttle_reasons": sorted({r for s in read for r in s["throttle_reasons"]})
        if read
        else None,
    }
