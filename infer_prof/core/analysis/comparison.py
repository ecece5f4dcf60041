"""The comparison table: one row per run, and the best value of each column.

Pure: the columns, and the best of rows of plain values. The rows are read from typed results by
:mod:`infer_prof.results.comparison_rows`. The measured columns are the metric table's
``compare`` place (:mod:`infer_prof.core.measurement.metric_table`). Columns and units:

========================  =========================================  ==========
column key                source in the result                       better
========================  =========================================  ==========
gpu                       environment.gpu_name (count prefix if >1)  -
label                     labels as ``k=v`` joined by ``,``          -
model                     model.name                                 -
precision                 plan.precision / quantization / dtype      -
concurrency               config.concurrency                         -
status                    complete/incomplete_reason, validity       -
request_throughput        summary.request_throughput (requests/s)    higher
output_throughput         summary.output_throughput (tokens/s)       higher
ttft_p50, ttft_p99        summary.ttft_ms.p50 / .p99 (ms)            lower
tpot_p50, tpot_p99        summary.tpot_ms.p50 / .p99 (ms)            lower
e2e_p50, e2e_p99          summary.e2e_ms.p50 / .p99 (ms)             lower
interactivity             summary.interactivity_tok_s_user           higher
interactivity_p90         summary.interactivity_p90_tok_s_user       higher
output_tok_s_per_gpu      summary.output_tok_s_per_gpu               higher
input_tok_s_per_gpu       summary.input_tok_s_per_gpu                higher
total_tok_s_per_gpu       summary.total_tok_s_per_gpu                higher
usd_per_hour              cost.usd_per_hour ($)                      lower
usd_per_1m_output         summary.usd_per_million_output_tokens ($)  lower
usd_per_1m_input          summary.usd_per_million_input_tokens ($)   lower
usd_per_1m_total          summary.usd_per_million_total_tokens ($)   lower
output_tokens_per_usd     cost.output_tokens_per_usd                 higher
joules_per_token          energy.joules_per_output_token (J)         lower
joules_per_total_token    summary.joules_per_total_token (J)         lower
accuracy                  quality.accuracy (share of task items)     higher
perplexity                quality.perplexity                         lower
kl                        quality.reference.mean_kl (nats/token)     lower
========================  =========================================  ==========

Interactivity is tokens/s each user sees (1000 / TPOT p50, p90), throughput per GPU and $ per
1M tokens count the GPUs the engine used (:mod:`infer_prof.core.analysis.frontier_axes`).

``gpu`` falls back to ``gpu.key`` (the GPU named with ``--gpu`` for an endpoint run) and then to
"cpu"; ``precision`` also looks at the result's top-level ``precision``. The $/1M column also
falls back to ``cost.usd_per_million_output_tokens`` and ``cost.usd_per_1m_output_tokens`` (an
alternative spelling; ``|`` in :attr:`Column.path`).

``status`` is ``ok``, or ``INCOMPLETE: <why>`` and/or ``INVALID: <reasons>`` (see
:func:`infer_prof.results.comparison_rows.run_status`): a run whose numbers do not hold is
marked in every table.

A value that is missing (not measured, no price, no energy reading) is None, never 0, and never
best. A column's best is marked only when at least two rows have a value; ties are all best.

A result that closes a ``run --repeat N`` group (its ``repeats`` section holds statistics) gives
each metric's mean across the repeats as the column's value, with ``<key>_sd``, ``<key>_cv``,
``<key>_low`` and ``<key>_high`` (the sample SD, CV and Student-t interval of the mean) and
``repeats`` (how many) beside it; its cell reads ``mean ±SD`` (:func:`format_cell`), and the
best is judged on the means.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infer_prof.core.measurement.metric_table import Better, columns_at


@dataclass(frozen=True)
class Column:
    """One column: ``key`` (row dict key), ``header`` (short title with unit), ``path`` (where
    the value is in a result, dotted, alternatives separated by ``|``; empty for the text columns
    computed by :func:`infer_prof.results.comparison_rows.row_for`),
    ``better`` (None for descriptive columns) and ``digits`` (decimals when printed)."""

    key: str
    header: str
    path: str = ""
    better: Better | None = None
    digits: int = 2


TEXT_COLUMNS = (
    Column("gpu", "GPU"),
    Column("label", "label"),
    Column("model", "model"),
    Column("precision", "precision"),
    Column("concurrency", "conc.", "config.concurrency", None, 0),
    Column("status", "status"),
)

#: The measured columns: the metric table's ``compare`` place, in its order.
METRIC_COLUMNS = tuple(
    Column(c.key, c.label, c.path, c.better, c.digits) for c in columns_at("compare")
)

COLUMNS = TEXT_COLUMNS + METRIC_COLUMNS


def dig(data: Mapping[str, Any] | None, path: str) -> Any:
    """The value at a dotted ``path`` in nested dicts, or None when any step is missing.

    ``path`` may list alternatives separated by ``|``: the first that is not None wins.
    """
    for alt in path.split("|"):
        cur: Any = data
        for part in alt.split("."):
            if not isinstance(cur, Mapping):
                cur = None
                break
            cur = cur.get(part)
        if cur is not None:
            return cur
    return None


def finite_number(value: Any) -> float | None:
    """A finite int/float as float; anything else (None, bool, text, NaN) as None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def labels_text(labels: Mapping[str, Any] | None) -> str:
    """``{"instance": "a100", "zone": "b"}`` -> ``"instance=a100,zone=b"`` (sorted by key)."""
    if not labels:
        return ""
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def best_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, set[int]]:
    """For each metric column, the indices of the rows holding its best value.

    Best is the maximum for "higher" columns and the minimum for "lower" ones, over rows with a
    value. Columns with fewer than two values get an empty set (nothing to compare).
    """
    out: dict[str, set[int]] = {}
    for col in METRIC_COLUMNS:
        values = [(i, r.get(col.key)) for i, r in enumerate(rows)]
        present = [(i, v) for i, v in values if isinstance(v, (int, float))]
        if len(present) < 2:
            out[col.key] = set()
            continue
        pick = max if col.better == "higher" else min
        best = pick(v for _, v in present)
        out[col.key] = {i for i, v in present if v == best}
    return out


def format_cell(col: Column, row: Mapping[str, Any]) -> str:
    """A row's cell in column ``col``: :func:`format_value`, with `` ±SD`` after a mean across
    repeats (the row's ``<key>_sd``)."""
    text = format_value(col, row.get(col.key))
    sd = row.get(f"{col.key}_sd")
    return text if sd is None or col.better is None else f"{text} ±{sd:,.{col.digits}f}"


def format_interval(col: Column, row: Mapping[str, Any]) -> str:
    """``low-high (cv 4.5 %)`` of a mean across repeats in column ``col``; empty when the row
    holds none."""
    low, high, cv = (row.get(f"{col.key}_{k}") for k in ("low", "high", "cv"))
    if low is None or high is None:
        return ""
    spread = "" if cv is None else f" (cv {100 * cv:.1f} %)"
    return f"{low:,.{col.digits}f}-{high:,.{col.digits}f}{spread}"


def format_value(col: Column, value: Any) -> str:
    """A cell as text: ``n/a`` for missing, thousands separators and ``col.digits`` decimals."""
    if value is None or value == "":
        return "n/a" if col.better is not None or col.key == "concurrency" else ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return f"{value:,.{col.digits}f}"
    return str(value)
