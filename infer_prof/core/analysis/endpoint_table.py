"""The table that ends a several-endpoint run: one row per endpoint and load point.

Pure: takes what each endpoint's run produced (result dicts, or why there is none) and returns
rows of plain values. The measured columns are the metric table's ``endpoints`` place
(:mod:`infer_prof.core.measurement.metric_table`). Columns and units:

======================  ===============================================  =====================
row key                 source in the result                             unit
======================  ===============================================  =====================
endpoint, url           the endpoint's label and URL                     -
gpu, gpu_count          result ``gpu.key`` / ``gpu.count`` (as named)    -
workload                workload.name (``custom``: the command line's)   -
load                    ``c<N>`` (closed loop) or ``r<rate>`` (open)     -
status                  ``ok``, ``failed: <why>``, ``incomplete: <why>``,
                        ``invalid: <reasons>``, ``not run: <why>``       -
request_throughput      summary.request_throughput                       requests/s
output_throughput       summary.output_throughput                        output tokens/s
ttft/tpot/itl/e2e       summary.<x>_ms.p50 / .p99                        ms
interactivity           summary.interactivity_tok_s_user (1000/TPOT p50)  tokens/s/user
total_tok_s_per_gpu     summary.total_tok_s_per_gpu                      tokens/s per GPU
usd_per_hour            cost.usd_per_hour (all the endpoint's GPUs)       $
usd_per_1m_output       cost.usd_per_million_output_tokens               $ per 1e6 output tok
usd_per_1m_total        cost.usd_per_million_total_tokens                $ per 1e6 prompt+output
price_source            cost.price: ``user`` (--price-per-hour / the
                        file) or ``<provider> <on-demand|spot>``         -
cost_reason             cost.reason when no price applied                -
======================  ===============================================  =====================

$ per 1M output tokens = usd_per_hour / (output tokens/s x 3600) x 1e6 (``core.catalog.prices``);
the total-token figure counts prompt and output tokens.

``cheapest_output`` / ``cheapest_total`` mark the lowest $/1M among the rows of the same
workload and load point that are ``ok`` (complete and valid: a run whose numbers do not hold is
never cheapest), only when at least two such rows have a price; ties are all marked. A value not
measured is None, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infer_prof.core.measurement.metric_table import columns_at

TABLE_KIND = "infer-prof.endpoints"

#: (row key, result path) of the measured columns: the metric table's ``endpoints`` place.
METRICS: tuple[tuple[str, str], ...] = tuple((c.key, c.path) for c in columns_at("endpoints"))

COLUMNS: tuple[str, ...] = (
    "endpoint",
    "url",
    "gpu",
    "gpu_count",
    "workload",
    "load",
    "status",
    *(k for k, _ in METRICS),
    "cheapest_output",
    "cheapest_total",
    "price_source",
    "cost_reason",
    "result_file",
)


@dataclass
class EndpointRun:
    """What one endpoint's run gave: its result documents (one per load point, in run order,
    with the file each was written to), or ``error`` when it produced none (unreachable, bad
    answer); ``gpu`` / ``gpu_count`` as asked, for a row without a result."""

    label: str
    url: str
    gpu: str | None = None
    gpu_count: int = 1
    results: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    error: str | None = None
    skipped: str | None = None  # why it was not run at all (e.g. interrupted before its turn)


def _get(doc: Mapping[str, Any], path: str) -> Any:
    """The number at a dotted ``path`` (alternatives separated by ``|``: the first that is a
    number wins), or None."""
    for alt in path.split("|"):
        cur: Any = doc
        for part in alt.split("."):
            if not isinstance(cur, Mapping):
                cur = None
                break
            cur = cur.get(part)
        if isinstance(cur, bool) or not isinstance(cur, (int, float)):
            continue
        if not (isinstance(cur, float) and math.isnan(cur)):
            return cur
    return None


def load_of(result: Mapping[str, Any]) -> str | None:
    """``c16`` for 16 closed-loop streams, ``r4`` / ``rinf`` for an open loop at 4 requests/s
    or unbounded; None when the result does not say."""
    load = result.get("load") or {}
    if load.get("mode") == "closed" and load.get("concurrency") is not None:
        return f"c{load['concurrency']}"
    if load.get("mode") == "open" and load.get("rate") is not None:
        rate = load["rate"]
        return "rinf" if rate == math.inf else f"r{rate:g}"
    return None


def status_of(result: Mapping[str, Any]) -> str:
    """``ok``, ``incomplete: <why>`` or ``invalid: <reasons>`` (incomplete first)."""
    if not result.get("complete", True):
        return f"incomplete: {result.get('incomplete_reason') or 'unknown'}"
    validity = result.get("validity") or {}
    if validity.get("valid") is False:
        reasons = validity.get("reasons") or []
        text = "; ".join(str(r) for r in reasons) if isinstance(reasons, list) else str(reasons)
        return f"invalid: {text or 'see the result file'}"
    return "ok"


def endpoint_rows(runs: Sequence[EndpointRun]) -> list[dict[str, Any]]:
    """One row per endpoint and load point (a failed endpoint: one row with its reason), keys
    :data:`COLUMNS`, with the cheapest rows marked (see the module docstring)."""
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
        for result, path in run.results:
            gpu = result.get("gpu") or {}
            cost = result.get("cost") or {}
            row = {
                "endpoint": run.label,
                "url": run.url,
                "gpu": gpu.get("key") or run.gpu,
                "gpu_count": gpu.get("count") or run.gpu_count,
                "workload": (result.get("workload") or {}).get("name"),
                "load": load_of(result),
                "status": status_of(result),
            }
            row.update({key: _get(result, path) for key, path in METRICS})
            row["cheapest_output"] = False
            row["cheapest_total"] = False
            row["price_source"] = price_source(cost.get("price"))
            row["cost_reason"] = None if cost.get("available") else cost.get("reason")
            row["result_file"] = path
            rows.append(row)
    _mark_cheapest(rows, "usd_per_1m_output", "cheapest_output")
    _mark_cheapest(rows, "usd_per_1m_total", "cheapest_total")
    return rows


def price_source(price: Any) -> str | None:
    """Where a run's price came from: ``user`` (given by hand) or ``<provider> <kind>`` from the
    catalog; None without a price."""
    if not isinstance(price, Mapping) or not price.get("kind"):
        return None
    if price["kind"] == "user":
        return "user"
    return f"{price.get('provider') or '?'} {price['kind']}"


def _mark_cheapest(rows: list[dict[str, Any]], key: str, flag: str) -> None:
    groups: dict[tuple[str | None, str | None], list[int]] = {}
    for i, row in enumerate(rows):
        if row["status"] == "ok" and row.get(key) is not None:
            groups.setdefault((row["workload"], row["load"]), []).append(i)
    for idx in groups.values():
        if len(idx) < 2:
            continue
        low = min(rows[i][key] for i in idx)
        for i in idx:
            if rows[i][key] == low:
                rows[i][flag] = True


def cheapest(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The endpoints marked cheapest per 1M output tokens (in row order, each once)."""
    return list(dict.fromkeys(str(r["endpoint"]) for r in rows if r.get("cheapest_output")))


def table_document(rows: list[dict[str, Any]], schema_version: int) -> dict[str, Any]:
    """The summary file's JSON document: the rows and what the columns mean."""
    return {
        "schema_version": schema_version,
        "kind": TABLE_KIND,
        "columns": list(COLUMNS),
        "rows": rows,
        "cheapest": cheapest(rows),
        "cheapest_rule": "lowest $ per 1M output tokens among complete, valid runs of the same "
        "workload and load point, marked when at least two have a price",
        "units": {
            "request_throughput": "requests/s",
            "output_throughput": "output tokens/s",
            "latency": "ms",
            "usd_per_hour": "USD for all the endpoint's GPUs",
            "usd_per_1m_output": "USD per 1e6 output tokens",
            "usd_per_1m_total": "USD per 1e6 prompt + output tokens",
        },
    }


def table_csv_rows(rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The rows as CSV cells (header first); None is an empty cell, booleans 1/0."""
    out = [list(COLUMNS)]
    for row in rows:
        cells = []
        for key in COLUMNS:
            v = row.get(key)
            cells.append("" if v is None else str(int(v)) if isinstance(v, bool) else str(v))
        out.append(cells)
    return out
