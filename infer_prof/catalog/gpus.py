"""The shipped GPU catalog (``infer_prof/catalog/data/gpus.json``) and the GPUs of this machine.

``find_gpu`` turns a ``--gpu`` value (catalog key, alias or NVML name, matched case-insensitively
ignoring spaces, dashes and underscores) into a :class:`GpuSpec`; ``find_gpus`` also takes a
family name (``A100``, ``H100``) and returns every variant; ``detect_gpus`` asks NVML which GPUs
this machine has and matches each to the catalog.
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


@cache
def _families() -> dict[str, list[str]]:
    """Normalized family name -> the keys of its entries, in file order."""
    out: dict[str, list[str]] = {}
    for key, spec in catalog().items():
        out.setdefault(normalize_gpu_name(spec.family or key), []).append(key)
    return out


def gpu_family(name: str) -> list[GpuSpec]:
    """Every entry of the GPU family ``name`` names, in file order: ``A100`` -> the four A100
    entries, ``H100`` -> H100-PCIe, H100-SXM, H100-NVL. ``[]`` when ``name`` is a catalog key,
    alias or NVML name (it names one GPU), or no family of two or more entries."""
    if match_gpu_name(name) is not None:
        return []
    keys = _families().get(normalize_gpu_name(name), [])
    return [catalog()[k] for k in keys] if len(keys) > 1 else []


def find_gpus(name: str) -> list[GpuSpec]:
    """A ``--gpu`` value as the GPUs it means: the one entry its key, alias or NVML name names,
    else every entry of the family it names (:func:`gpu_family`).

    Raises ``ValueError`` naming the known keys when nothing matches.
    """
    spec = match_gpu_name(name)
    if spec is not None:
        return [spec]
    family = gpu_family(name)
    if family:
        return family
    raise ValueError(f"unknown GPU {name!r}; known GPUs: {', '.join(known_gpu_keys())}")


def find_gpu(name: str) -> GpuSpec:
    """Resolve a ``--gpu`` value that must name one GPU: catalog key, alias or NVML name ->
    :class:`GpuSpec`.

    Raises ``ValueError`` naming the known keys when nothing matches, and naming the variants
    when ``name`` is a family (``H100``: H100-PCIe, H100-SXM or H100-NVL).
    """
    found = find_gpus(name)
    if len(found) > 1:
        raise ValueError(f"{name!r} is a GPU family: {', '.join(g.key for g in found)}; name one "
                         "of them")
    return found[0]


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
