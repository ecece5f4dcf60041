"""GPU telemetry from NVML (the ``pynvml`` module of the ``nvidia-ml-py`` package).

``NvmlSampler`` reads every GPU on a background thread every ``interval_s`` and on demand at the
measured window's boundaries, keeps the time series, and summarizes the window (the arithmetic
is :mod:`infer_prof.core.measurement.nvml`). Where NVML is absent (no ``pynvml``, no driver) the
result says so and every number is ``None``: a figure that was not measured is never reported as 0.

Units: times in seconds from the sampler's start (``t0_ns`` is that instant on
``time.perf_counter_ns``); utilization in percent; memory in bytes; power in W (NVML reports
mW); energy counter in mJ (NVML's ``nvmlDeviceGetTotalEnergyConsumption``, since driver load);
clocks in MHz; temperature in degrees C.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from infer_prof.core.measurement.nvml import (
    decode_clock_event_reasons,
    summarize_gpu,
    summarize_total,
)

# pynvml error codes (nvml.h), used when the module given lacks the constants.
_NVML_ERROR_NOT_SUPPORTED = 3
_NVML_ERROR_FUNCTION_NOT_FOUND = 13

# Series keys, in the order they appear in the result.
SERIES_KEYS: tuple[str, ...] = (
    "t_s",
    "util_pct",
    "mem_util_pct",
    "mem_used_bytes",
    "power_w",
    "energy_mj",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "temp_c",
    "clock_event_mask",
    "clock_event_reasons",
)


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


class _Gpu:
    def __init__(self, index: int, handle: Any) -> None:
        self.index = index
        self.handle = handle
        self.name: str | None = None
        self.uuid: str | None = None
        self.memory_total_bytes: int | None = None
        self.power_limit_w: float | None = None
        self.unsupported: set[str] = set()
        self.read_errors: dict[str, int] = {}
        self.last_error: str | None = None
        self.series: dict[str, list[Any]] = {k: [] for k in SERIES_KEYS}


class NvmlSampler:
    """Samples NVML on a background thread; summarizes the measured window.

    Use: ``start()`` (initializes NVML, takes a first sample, starts the thread), then
    ``mark_window_start()`` / ``mark_window_end()`` around the measured load (each takes a sample
    at once, so the energy counter is read at the window's edges), then ``stop()`` for the result.
    The sampler may run longer than the window (through warm-up, say): the summary covers only
    the window, the series cover everything. Without marks, the window is the whole sampling run.

    ``nvml`` is the ``pynvml`` module, or any object with the same functions (tests inject one);
    ``None`` imports ``pynvml``. ``clock`` returns integer nanoseconds (``time.perf_counter_ns``,
    the clock the load generator uses, so series can be aligned with request timestamps).
    ``gpu_indices`` restricts sampling to those NVML indices (NVML numbers GPUs in PCI order,
    which is not always ``CUDA_VISIBLE_DEVICES`` order); ``None`` samples every GPU.
    """

    def __init__(
        self,
        interval_s: float = 0.5,
        nvml: Any | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
        *,
        gpu_indices: Sequence[int] | None = None,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self.interval_s = float(interval_s)
        self._nvml: Any = nvml
        self._clock = clock
        self._gpu_indices = list(gpu_indices) if gpu_indices is not None else None
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._gpus: list[_Gpu] = []
        self._available = False
        self._reason: str | None = "not started"
        self._started = False
        self._stopped = False
        self._t0_ns: int | None = None
        self._window_start_ns: int | None = None
        self._window_end_ns: int | None = None
        self._driver_version: str | None = None
        self._reason_fn: str | None = None  # which clock-reasons function this module has

    # ---------------------------------------------------------------- lifecycle

    @property
    def available(self) -> bool:
        """True once ``start()`` has initialized NVML and found at least one GPU."""
        return self._available

    @property
    def reason(self) -> str | None:
        """Why telemetry is unavailable (``None`` when it is available)."""
        return self._reason

    def start(self) -> None:
        """Initialize NVML, take the first sample and start the sampling thread.

        Never raises for a missing library or driver: the sampler becomes unavailable, with the
        reason in ``reason`` and in ``stop()``'s result.
        """
        if self._started:
            raise RuntimeError("NvmlSampler.start() called twice")
        self._started = True
        self._t0_ns = self._clock()
        nv = self._nvml
        if nv is None:
            try:
                import pynvml
            except ImportError as exc:
                self._reason = f"pynvml is not installed ({exc}); install the nvidia-ml-py package"
                return
            nv = self._nvml = pynvml
        try:
            nv.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            why = _text(exc) or type(exc).__name__
            self._reason = f"nvmlInit failed: {why} (no NVIDIA driver?)"
            return
        try:
            self._driver_version = _text(nv.nvmlSystemGetDriverVersion())
        except Exception:
            self._driver_version = None
        try:
            count = int(nv.nvmlDeviceGetCount())
            indices = self._gpu_indices if self._gpu_indices is not None else list(range(count))
            for i in indices:
                if not 0 <= i < count:
                    raise ValueError(f"GPU index {i} not present (NVML sees {count} GPUs)")
                self._gpus.append(self._open_gpu(i))
        except Exception as exc:
            self._reason = f"NVML device enumeration failed: {_text(exc) or type(exc).__name__}"
            self._gpus = []
            self._shutdown()
            return
        if not self._gpus:
            self._reason = "NVML reports no GPUs"
            self._shutdown()
            return
        self._available = True
        self._reason = None
        self.sample_now()
        self._thread = threading.Thread(target=self._run, name="infer-prof-nvml", daemon=True)
        self._thread.start()

    def mark_window_start(self) -> None:
        """Mark the start of the measured window now, and sample at once."""
        self._window_start_ns = self._clock()
        self.sample_now()

    def mark_window_end(self) -> None:
        """Sample at once, then mark the end of the measured window."""
        self.sample_now()
        self._window_end_ns = self._clock()

    def stop(self) -> dict[str, Any]:
        """Stop the thread, take a last sample, shut NVML down, and return the result.

        ``{available, reason, interval_s, driver_version, t0_ns, window: {start_s, end_s,
        marked}, gpus: [{index, name, uuid, memory_total_bytes, power_limit_w, unsupported,
        read_errors, last_error, series, summary}], total: {...}}``; see ``summarize_gpu``.
        """
        if self._available and not self._stopped:
            self._stop_event.set()
            if self._thread is not None:
                self._thread.join()
            self.sample_now()
            self._shutdown()
        self._stopped = True
        return self._result()

    # ---------------------------------------------------------------- sampling

    def sample_now(self) -> None:
        """Take one sample of every GPU now (thread-safe; a no-op when unavailable or stopped)."""
        if not self._available or self._stopped:
            return
        with self._lock:
            for gpu in self._gpus:
                self._sample_gpu(gpu)

    def _run(self) -> None:
        next_t = time.perf_counter() + self.interval_s
        while not self._stop_event.wait(max(0.0, next_t - time.perf_counter())):
            self.sample_now()
            next_t += self.interval_s
            now = time.perf_counter()
            if next_t < now:  # fell behind (slow NVML calls): skip, do not burst
                next_t = now + self.interval_s

    def _shutdown(self) -> None:
        try:
            assert self._nvml is not None
            self._nvml.nvmlShutdown()
        except Exception:
            pass

    def _open_gpu(self, index: int) -> _Gpu:
        nv = self._nvml
        gpu = _Gpu(index, nv.nvmlDeviceGetHandleByIndex(index))
        h = gpu.handle
        name = self._read(gpu, "name", lambda: nv.nvmlDeviceGetName(h))
        gpu.name = _text(name) if name is not None else None
        uuid = self._read(gpu, "uuid", lambda: nv.nvmlDeviceGetUUID(h))
        gpu.uuid = _text(uuid) if uuid is not None else None
        mem = self._read(gpu, "memory_total", lambda: nv.nvmlDeviceGetMemoryInfo(h))
        gpu.memory_total_bytes = int(mem.total) if mem is not None else None
        limit_mw = self._read(gpu, "power_limit", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
        gpu.power_limit_w = limit_mw / 1000.0 if limit_mw is not None else None
        return gpu

    def _is_unsupported(self, exc: BaseException) -> bool:
        nv = self._nvml
        err_cls = getattr(nv, "NVMLError", None)
        if err_cls is not None and not isinstance(exc, err_cls):
            return False
        codes = {
            getattr(nv, "NVML_ERROR_NOT_SUPPORTED", _NVML_ERROR_NOT_SUPPORTED),
            getattr(nv, "NVML_ERROR_FUNCTION_NOT_FOUND", _NVML_ERROR_FUNCTION_NOT_FOUND),
        }
        return getattr(exc, "value", None) in codes

    def _read(self, gpu: _Gpu, field: str, fn: Callable[[], Any]) -> Any:
        """One NVML call: its value, or ``None`` (NotSupported: remembered, never asked again)."""
        if field in gpu.unsupported:
            return None
        try:
            return fn()
        except AttributeError:  # this pynvml (or fake) lacks the function
            gpu.unsupported.add(field)
            return None
        except Exception as exc:  # an NVMLError, or anything else: never kill the sampler
            if self._is_unsupported(exc):
                gpu.unsupported.add(field)
            else:
                gpu.read_errors[field] = gpu.read_errors.get(field, 0) + 1
                gpu.last_error = f"{field}: {_text(exc) or type(exc).__name__}"
            return None

    def _read_reasons(self, gpu: _Gpu) -> int | None:
        nv = self._nvml
        h = gpu.handle
        # Prefer the current name (driver 535+); fall back to the deprecated one.
        if "clock_events" not in gpu.unsupported:
            mask = self._read(
                gpu, "clock_events", lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h)
            )
            if mask is not None or "clock_events" not in gpu.unsupported:
                return int(mask) if mask is not None else None
        mask = self._read(
            gpu, "clock_throttle", lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        )
        return int(mask) if mask is not None else None

    def _sample_gpu(self, gpu: _Gpu) -> None:
        nv = self._nvml
        h = gpu.handle
        t_ns = self._clock()
        # The energy counter first: it is the one read whose timing matters most.
        energy = self._read(gpu, "energy", lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h))
        power_mw = self._read(gpu, "power", lambda: nv.nvmlDeviceGetPowerUsage(h))
        util = self._read(gpu, "utilization", lambda: nv.nvmlDeviceGetUtilizationRates(h))
        mem = self._read(gpu, "memory", lambda: nv.nvmlDeviceGetMemoryInfo(h))
        sm = self._read(gpu, "sm_clock", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        mclk = self._read(gpu, "mem_clock", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))
        temp = self._read(
            gpu, "temperature", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
        )
        mask = self._read_reasons(gpu)
        assert self._t0_ns is not None
        s = gpu.series
        s["t_s"].append((t_ns - self._t0_ns) / 1e9)
        s["util_pct"].append(float(util.gpu) if util is not None else None)
        s["mem_util_pct"].append(float(util.memory) if util is not None else None)
        s["mem_used_bytes"].append(int(mem.used) if mem is not None else None)
        s["power_w"].append(power_mw / 1000.0 if power_mw is not None else None)
        s["energy_mj"].append(int(energy) if energy is not None else None)
        s["sm_clock_mhz"].append(float(sm) if sm is not None else None)
        s["mem_clock_mhz"].append(float(mclk) if mclk is not None else None)
        s["temp_c"].append(float(temp) if temp is not None else None)
        s["clock_event_mask"].append(mask)
        s["clock_event_reasons"].append(
            decode_clock_event_reasons(mask) if mask is not None else None
        )

    # ---------------------------------------------------------------- result

    def _window_s(self) -> tuple[float | None, float | None]:
        t0 = self._t0_ns
        if t0 is None:
            return None, None
        ws = (self._window_start_ns - t0) / 1e9 if self._window_start_ns is not None else None
        we = (self._window_end_ns - t0) / 1e9 if self._window_end_ns is not None else None
        return ws, we

    def _result(self) -> dict[str, Any]:
        ws, we = self._window_s()
        gpus: list[dict[str, Any]] = []
        for g in self._gpus:
            gpus.append(
                {
                    "index": g.index,
                    "name": g.name,
                    "uuid": g.uuid,
                    "memory_total_bytes": g.memory_total_bytes,
                    "power_limit_w": g.power_limit_w,
                    "unsupported": sorted(g.unsupported),
                    "read_errors": dict(g.read_errors),
                    "last_error": g.last_error,
                    "series": {k: list(v) for k, v in g.series.items()},
                    "summary": summarize_gpu(g.series, ws, we),
                }
            )
        return {
            "available": self._available,
            "reason": self._reason,
            "interval_s": self.interval_s,
            "driver_version": self._driver_version,
            "t0_ns": self._t0_ns,
            "window": {
                "start_s": ws,
                "end_s": we,
                "marked": self._window_start_ns is not None and self._window_end_ns is not None,
            },
            "gpus": gpus,
            "total": summarize_total([g["summary"] for g in gpus]),
        }
