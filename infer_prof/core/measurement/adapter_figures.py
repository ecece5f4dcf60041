"""A run's figures per LoRA adapter, beside the whole (``run --lora-mix``).

Each measured request records the adapter it asked for (``RequestRecord.adapter``; None for the
served model itself, named :data:`BASE` here). For each name, :func:`per_adapter` summarises
that name's measured requests exactly as :func:`~infer_prof.core.measurement.metrics.summarize_run`
summarises the whole (TTFT, TPOT, ITL, E2E by the same formulas and percentiles), with one
difference: the rates are over the **whole run's** window (its wall window, or a closed loop's
stream span), not over the adapter's own requests' span. So an adapter's output tokens/s is the
share of the run's throughput its requests produced, and the adapters' rates add up to the
whole's: ``sum_a output_throughput_a = output_throughput``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from infer_prof.core.measurement.metrics import (
    RequestRecord,
    RunSummary,
    measured_window_ns,
    summarize_run,
)

#: The name the per-adapter figures give requests to the served model itself (no adapter).
BASE = "base"


@dataclass(frozen=True)
class AdapterSummary:
    """One adapter's figures: its name (:data:`BASE` for the served model), the share of
    requests the mix asked for it (None when no mix said), the share of measured requests it
    got, and its :class:`RunSummary` (rates over the whole run's window)."""

    adapter: str
    share_asked: float | None
    share_sent: float | None
    summary: RunSummary


def adapter_of(r: RequestRecord) -> str:
    """The adapter a request asked for, :data:`BASE` for the served model."""
    return r.adapter or BASE


def per_adapter(
    records: Iterable[RequestRecord],
    names: Sequence[str] = (),
    shares: Sequence[float] = (),
    rate_window_s: float | None = None,
) -> list[AdapterSummary]:
    """Each adapter's :class:`AdapterSummary`: first ``names`` in their order (``shares`` the
    mix's share of each, same order; a name with no measured request still gets a row of
    zeros), then any other adapter the records name, sorted. The window is the whole run's
    (:func:`measured_window_ns` of every measured record), ``rate_window_s`` the whole run's
    rate window when it is not that (a closed loop's stream span)."""
    measured = [r for r in records if not r.warmup]
    window = measured_window_ns(measured)
    groups: dict[str, list[RequestRecord]] = {n: [] for n in names}
    for r in measured:
        groups.setdefault(adapter_of(r), []).append(r)
    asked = dict(zip(names, shares, strict=False))
    order = list(names) + sorted(n for n in groups if n not in asked and n not in names)
    total = len(measured)
    return [
        AdapterSummary(
            adapter=name,
            share_asked=asked.get(name),
            share_sent=len(groups[name]) / total if total else None,
            summary=summarize_run(groups[name], window_ns=window, rate_window_s=rate_window_s),
        )
        for name in order
    ]
