"""The table that ends a several-endpoint run: its columns, the cheapest marks, JSON and CSV.

Pure: works on rows of plain values, one per endpoint and load point; the rows are read from
each endpoint's typed results by :mod:`infer_prof.results.endpoint_rows`. The measured columns
are the metric table's ``endpoints`` place (:mod:`infer_prof.core.measurement.metric_table`).
Columns and units:

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

from collections.abc import Mapping, Sequence
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


def mark_cheapest(rows: list[dict[str, Any]]) -> None:
    """Set ``cheapest_output`` / ``cheapest_total`` on ``rows`` (keys :data:`COLUMNS`, both
    flags False on entry) by the rule of the module docstring."""
    _mark_cheapest(rows, "usd_per_1m_output", "cheapest_output")
    _mark_cheapest(rows, "usd_per_1m_total", "cheapest_total")


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
