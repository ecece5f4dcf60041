"""The workload file mapping as types: what :meth:`Workload.to_dict
<infer_prof.core.workload.workloads.Workload.to_dict>` writes (and a result's ``workload``
section holds), declared once.

``to_dict`` of a workload, its arrival, its shared prefix and each length distribution builds
these Structs and turns them into JSON values with ``msgspec.to_builtins``; the result document
(:class:`infer_prof.results.document.Result`) types its ``workload`` section with
:class:`WorkloadRecord`, and its JSON Schema is generated from them.

Keys a workload leaves unset are left out of the mapping: those fields default to
``msgspec.UNSET`` (never written), so a written file stays what it was and ``from_dict`` of it
gives the same workload back. Lengths are in tokens, ``duration_s`` and ``min_duration_s`` in
seconds, ``rate`` in requests per second (``inf``: every request at once), ``slo`` limits in
milliseconds.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, UnsetType

ApiKind = Literal["completions", "chat"]


class _Record(msgspec.Struct, kw_only=True):
    """Keyword construction; keys another version adds are ignored on load."""


class FixedLength(_Record, tag_field="kind", tag="fixed"):
    """Every request has exactly ``value`` tokens."""

    value: int


class UniformLength(_Record, tag_field="kind", tag="uniform"):
    """Whole lengths ``min..max`` inclusive, each equally likely."""

    min: int
    max: int


class NormalLength(_Record, tag_field="kind", tag="normal"):
    """``round(N(mean, std))`` clipped to ``[min, max]``."""

    mean: float
    std: float
    min: int
    max: int


class LogNormalLength(_Record, tag_field="kind", tag="lognormal"):
    """``round(median * exp(sigma * Z))`` clipped to ``[min, max]``."""

    median: float
    sigma: float
    min: int
    max: int


#: One histogram bin, ``[lo, hi, weight]`` (lengths whole tokens); a list, as the file has it.
Bin = Annotated[list[int | float], msgspec.Meta(min_length=3, max_length=3)]


class EmpiricalLength(_Record, tag_field="kind", tag="empirical"):
    """A histogram: ``bins`` of ``[lo, hi, weight]``."""

    bins: list[Bin]


#: A length distribution as a workload file writes it (``kind`` says which).
LengthRecord = FixedLength | UniformLength | NormalLength | LogNormalLength | EmpiricalLength


class ClosedArrivalRecord(_Record, tag_field="mode", tag="closed"):
    """A closed loop: ``concurrency`` requests in flight."""

    concurrency: int | None


class OpenArrivalRecord(_Record, tag_field="mode", tag="open"):
    """An open loop at ``rate`` req/s with ``process`` and ``burstiness``; ``max_concurrency``
    (left out: no cap) caps requests in flight."""

    rate: float | None
    burstiness: float
    process: str
    max_concurrency: int | UnsetType = UNSET


#: The ``[arrival]`` table (``mode`` says which loop).
ArrivalRecord = ClosedArrivalRecord | OpenArrivalRecord


class SharedPrefixRecord(_Record):
    """The ``[shared_prefix]`` table: ``fraction`` of the requests start with one of ``groups``
    prefixes of ``length`` tokens."""

    fraction: float = 0.0
    length: int = 0
    groups: int = 1


class WorkloadRecord(_Record, kw_only=True):
    """A workload as a file mapping (``kind = "workload"``); exactly one of ``num_requests`` and
    ``duration_s`` is written. Fields an older or hand-written result lacks take their defaults
    on load (``input_len`` and ``output_len`` are always written, and left unset only there)."""

    kind: Literal["workload"] = "workload"
    name: str
    description: str = ""
    input_len: LengthRecord | UnsetType = UNSET
    output_len: LengthRecord | UnsetType = UNSET
    num_requests: int | UnsetType = UNSET
    duration_s: float | UnsetType = UNSET
    warmup: str = "steady"
    warmup_requests: int = 0
    arrival: ArrivalRecord = msgspec.field(
        default_factory=lambda: ClosedArrivalRecord(concurrency=1))
    shared_prefix: SharedPrefixRecord = msgspec.field(default_factory=SharedPrefixRecord)
    seed: int = 0
    slo: dict[str, float] | UnsetType = UNSET
    min_requests: int | UnsetType = UNSET
    min_duration_s: float | UnsetType = UNSET
    dataset: str | UnsetType = UNSET
    api: ApiKind | UnsetType = UNSET
