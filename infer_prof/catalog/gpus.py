"""The shipped GPU catalog (``infer_prof/catalog/data/gpus.json``) and the GPUs of this machine.

``find_gpu`` turns a ``--gpu`` value (catalog key, alias or NVML name, matched case-insensitively
ignoring spaces, dashes and underscores) into a :class:`GpuSpec`; ``detect_gpus`` asks NVML which
GPUs this machine has and matches each to the catalog.
"""

from __future__ import annotations

import contextlib
import json
from functools import cache
from importlib import resources
from typing import Any, NamedTuple

from infer_prof.core.catalog.gpus import GpuSpec, normalize_gpu_name


class DetectedGpu(NamedTuple):
    """One GPU NVML reports: its name, the catalog entry it matches (or None), total bytes."""

    nvml_name: str
    spec: GpuSpec | None
    memory_total_bytes: int


@cache
def catalog_document() -> dict[str, Any]:
    """The parsed ``gpus.json`` (with its ``_units``, ``_seeds`` and ``gpus`` sections)."""
    text = resources.files("infer_prof.catalog.data").joinpath("gpus.json").read_text("utf-8")
    return dict(json.loads(text))


@cache
def catalog() -> dict[str, GpuSpec]:
    """Every catalog entry by key, in file order."""
    entries = catalog_document()["gpus"]
    return {key: GpuSpec.from_dict(key, entry) for key, entry in entries.items()}


@cache
def _name_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for key, spec in catalog().items():
        for name in spec.match_keys():
            if index.get(name, key) != key:
                raise ValueError(f"GPU catalog: name {name!r} matches both {index[name]} and {key}")
            index[name] = key
    return index


def known_gpu_keys() -> list[str]:
    """The catalog's keys, in file order."""
    return list(catalog())


CANONICAL_GPU_KEYS: tuple[str, ...] = tuple(known_gpu_keys())
"""The GPU keys used across the project (catalog, prices, ``--gpu``): the catalog's
(``catalog/data/gpus.json``), in file order. The one list; a new GPU is its catalog entry."""


def match_gpu_name(name: str) -> GpuSpec | None:
    """The catalog entry whose key, alias or NVML name equals ``name`` (normalized), else None."""
    key = _name_index().get(normalize_gpu_name(name))
    return catalog()[key] if key else None


def find_gpu(name: str) -> GpuSpec:
    """Resolve a ``--gpu`` value: catalog key, alias or NVML name -> :class:`GpuSpec`.

    Raises ``ValueError`` naming the known keys when nothing matches.
    """
    spec = match_gpu_name(name)
    if spec is None:
        raise ValueError(f"unknown GPU {name!r}; known GPUs: {', '.join(known_gpu_keys())}")
    return spec


def detect_gpus(nvml: Any = None) -> list[DetectedGpu]:
    """The GPUs of this machine as NVML reports them: ``[(nvml_name, spec | None, total_bytes)]``.

    ``nvml`` is the ``pynvml`` module (injectable for tests). Returns ``[]`` when pynvml is not
    installed, or NVML or the driver is absent (``nvmlInit`` fails); never raises for that.
    A GPU missing from the catalog comes back with ``spec=None``.
    """
    if nvml is None:
        try:
            import pynvml as nvml  # type: ignore[no-redef]
        except ImportError:
            return []
    nvml_error: type[BaseException] = getattr(nvml, "NVMLError", OSError)
    try:
        nvml.nvmlInit()
    except (nvml_error, OSError):
        return []
    found: list[DetectedGpu] = []
    try:
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            raw = nvml.nvmlDeviceGetName(handle)
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            total = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
            found.append(DetectedGpu(name, match_gpu_name(name), total))
    except (nvml_error, OSError):
        return found
    finally:
        with contextlib.suppress(nvml_error, OSError):
            nvml.nvmlShutdown()
    return found
