"""The several-endpoint table's rows, read from typed results: one row per endpoint and load point.

The columns, the cheapest marks and the JSON / CSV forms are
:mod:`infer_prof.core.analysis.endpoint_table` (pure: rows of plain values); this module reads
each endpoint's :class:`infer_prof.results.document.Result` by attribute, and a measured column's
dotted path (the metric table's ``endpoints`` place) through the declared fields with
:func:`infer_prof.results.comparison_rows.value_at`, which refuses a path the result type does
not declare.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from infer_prof.core.analysis.endpoint_table import COLUMNS, METRICS, mark_cheapest
from infer_prof.results.comparison_rows import value_at
from infer_prof.results.cost_sections import Price
from infer_prof.results.document import Result


@dataclass
class EndpointRun:
    """What one endpoint's run gave: its typed results (one per load point, in run order,
    with the file each was written to), or ``error`` when it produced none (unreachable, bad
    answer); ``gpu`` / ``gpu_count`` as asked, for a row without a result."""

    label: str
    url: str
    gpu: str | None = None
    gpu_count: int = 1
    results: list[tuple[Result, str]] = field(default_factory=list)
    error: str | None = None
    skipped: str | None = None  # why it was not run at all (e.g. interrupted before its turn)


def number_at(result: Result, path: str) -> int | float | None:
    """The number at a dotted ``path`` of ``result`` (alternatives separated by ``|``: the
    first that is a number, not NaN, wins), or None."""
    for alt in path.split("|"):
        value = value_at(result, alt)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not (isinstance(value, float) and math.isnan(value)):
            return value
    return None


def load_of(result: Result) -> str | None:
    """``c16`` for 16 closed-loop streams, ``r4`` / ``rinf`` for an open loop at 4 requests/s
    or unbounded; None when the result does not say."""
    load = result.load
    if load is None:
        return None
    if load.mode == "closed" and load.concurrency is not None:
        return f"c{load.concurrency}"
    if load.mode == "open" and load.rate is not None:
        return "rinf" if load.rate == math.inf else f"r{load.rate:g}"
    return None


def status_of(result: Result) -> str:
    """``ok``, ``incomplete: <why>`` or ``invalid: <reasons>`` (incomplete first)."""
    if not result.complete:
        return f"incomplete: {result.incomplete_reason or 'unknown'}"
    validity = result.validity
    if validity is not None and not validity.valid:
        text = "; ".join(str(r) for r in validity.reasons)
        return f"invalid: {text or 'see the result file'}"
    return "ok"


def price_source(price: Price | None) -> str | None:
    """Where a run's price came from: ``user`` (given by hand) or ``<provider> <kind>`` from the
    catalog; None without a price."""
    if price is None or not price.kind:
        return None
    if price.kind == "user":
        return "user"
    return f"{price.provider or '?'} {price.kind}"


def _row(run: EndpointRun, result: Result, path: str) -> dict[str, Any]:
    gpu, cost = result.gpu, result.cost
    row: dict[str, Any] = {
        "endpoint": run.label,
        "url": run.url,
        "gpu": (gpu.key if gpu is not None else None) or run.gpu,
        "gpu_count": (gpu.count if gpu is not None else None) or run.gpu_count,
        "workload": result.workload.name if result.workload is not None else None,
        "load": load_of(result),
        "status": status_of(result),
    }
    row.update({key: number_at(result, metric_path) for key, metric_path in METRICS})
    row["cheapest_output"] = False
    row["cheapest_total"] = False
    row["price_source"] = price_source(cost.price if cost is not None else None)
    row["cost_reason"] = None if cost is None or cost.available else cost.reason
    row["result_file"] = path
    return row


def endpoint_rows(runs: Sequence[EndpointRun]) -> list[dict[str, Any]]:
    """One row per endpoint and load point (a failed endpoint: one row with its reason), keys
    :data:`infer_prof.core.analysis.endpoint_table.COLUMNS`, with the cheapest rows marked
    (:func:`infer_prof.core.analysis.endpoint_table.mark_cheapest`)."""
    rows: list[dict[str, Any]] = []
    for run in runs:
        if not run.results:
            row: dict[str, Any] = {k: None for k in COLUMNS}
            row.update(
                endpoint=run.label,
                url=run.url,
                gpu=run.gpu,
                gpu_count=run.gpu_count,
                status=f"not run: {run.skipped}"
                if run.skipped
                else f"failed: {run.error or 'no result'}",
                cheapest_output=False,
                cheapest_total=False,
            )
            rows.append(row)
            continue
        rows += [_row(run, result, path) for result, path in run.results]
    mark_cheapest(rows)
    return rows
