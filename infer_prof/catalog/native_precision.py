"""Checkpoints published in the precision they were trained in, below 16 bits.

gpt-oss's MoE weights were trained in MXFP4 and released only so: served in MXFP4 it is the model
as published, not a quantization of 16-bit weights (upcast to bf16, the same values; the
publisher's reference implementation does that). ``estimate`` marks 4-bit weights lossy and
``--min-quality`` keeps them out, except a checkpoint's own native precision
(:func:`infer_prof.estimate.configs.costs_accuracy`). The facts, each with its source, are in
``catalog/data/native_precisions.json``, keyed by Hugging Face repository id.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

import msgspec

from infer_prof.core.catalog.models import ModelSpec

__all__ = ["NativePrecision", "native_precision", "native_precisions"]


class NativePrecision(msgspec.Struct, frozen=True, kw_only=True):
    """A checkpoint's native precision (a planner precision, e.g. ``mxfp4``) and its source."""

    precision: str
    source: str


@cache
def native_precisions() -> dict[str, NativePrecision]:
    """Every checkpoint with a native precision below 16 bits, by Hugging Face repository id."""
    text = resources.files("infer_prof.catalog.data").joinpath("native_precisions.json")
    raw = json.loads(text.read_text())["checkpoints"]
    return {hub: msgspec.convert(entry, NativePrecision) for hub, entry in raw.items()}


def native_precision(model: ModelSpec) -> str | None:
    """The precision ``model``'s checkpoint was trained and published in, when that is below 16
    bits (None for a 16-bit checkpoint, a quantization of one, or a model not listed)."""
    entry = native_precisions().get(model.hub_id or "")
    return entry.precision if entry is not None else None
