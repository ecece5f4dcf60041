"""The per-adapter table of a run over LoRA adapters (``run --lora-mix``), printed beside the
run's own tables, and the same rows for ``compare`` (one row per run and adapter).

Each row is one adapter (``base``: the served model itself) from the result's ``lora`` section
(:class:`infer_prof.results.lora_sections.AdapterFigures`): requests asked and sent (shares of
the measured requests), completed, TTFT and TPOT p50/p99 (ms), and output tokens/s over the
whole run's window (so the rows add up to the run's ``output tokens/s``). A row is an
:class:`AdapterRow`, declared once: the console and Markdown tables, the HTML report's section
(:mod:`infer_prof.report.lora_section`), ``compare --format json`` and ``--format adapters-csv``
read its fields.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import msgspec
from rich.console import Console
from rich.table import Table

from infer_prof.core.measurement.distribution_record import p50_of, p99_of
from infer_prof.report.fit import print_fitted
from infer_prof.results.document import Result
from infer_prof.results.lora_sections import AdapterFigures

#: The columns of an adapter row: (key, header), in order.
COLUMNS = (
    ("adapter", "adapter"),
    ("share_asked", "asked"),
    ("share_sent", "sent"),
    ("requests_completed", "done"),
    ("ttft_p50_ms", "TTFT p50"),
    ("ttft_p99_ms", "TTFT p99"),
    ("tpot_p50_ms", "TPOT p50"),
    ("tpot_p99_ms", "TPOT p99"),
    ("output_throughput", "out tok/s"),
)
#: Columns a narrow terminal may leave out, in order.
OPTIONAL = ("TTFT p99", "TPOT p99", "asked")


class AdapterRow(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One adapter's row: the adapter (``base``: the served model itself), its share of requests
    asked and sent (fractions), requests completed and failed, TTFT and TPOT p50/p99 (ms) and
    output tokens/s over the run's window; None where not measured. ``run`` names the run in
    ``compare`` (None, and left out of the JSON, in a single run's table). Encoded as JSON in
    this field order (``compare --format json``'s ``adapters``)."""

    run: str | None = None
    adapter: str
    share_asked: float | None
    share_sent: float | None
    requests_completed: int | None
    requests_failed: int | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p99_ms: float | None
    output_throughput: float | None

    def figures(self) -> tuple[float | None, ...]:
        """The row's figures in the order of :data:`COLUMNS` after ``adapter``."""
        return (self.share_asked, self.share_sent, self.requests_completed, self.ttft_p50_ms,
                self.ttft_p99_ms, self.tpot_p50_ms, self.tpot_p99_ms, self.output_throughput)


def adapter_row(f: AdapterFigures, run: str | None = None) -> AdapterRow:
    """One adapter's figures as a row (latencies in ms, None when not measured), of the run
    named ``run`` in ``compare``."""
    return AdapterRow(
        run=run,
        adapter=f.adapter,
        share_asked=f.share_asked,
        share_sent=f.share_sent,
        requests_completed=f.requests_completed,
        requests_failed=f.requests_failed,
        ttft_p50_ms=p50_of(f.ttft_ms),
        ttft_p99_ms=p99_of(f.ttft_ms),
        tpot_p50_ms=p50_of(f.tpot_ms),
        tpot_p99_ms=p99_of(f.tpot_ms),
        output_throughput=f.output_throughput,
    )


def adapter_rows(result: Result, run: str | None = None) -> list[AdapterRow]:
    """The rows of a result's adapters (:func:`adapter_row`), of the run named ``run`` in
    ``compare``; [] for a run without them."""
    return [adapter_row(f, run) for f in result.lora.per_adapter] if result.lora else []


def cells(row: AdapterRow) -> list[str]:
    """The row's console and Markdown cells in the order of :data:`COLUMNS`: shares as whole
    percents, output tokens/s to 0.1, other figures to 0.01, ``n/a`` where not measured."""
    return [row.adapter] + [_cell(key, value) for (key, _), value
                            in zip(COLUMNS[1:], row.figures(), strict=True)]


def _cell(key: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if key.startswith("share_"):
        return f"{100 * value:.0f}%"
    if isinstance(value, float):
        return f"{value:,.1f}" if key == "output_throughput" else f"{value:,.2f}"
    return str(value)


def adapter_table(result: Result) -> Table | None:
    """The per-adapter table of one result (title: the mix), None without adapters."""
    rows = adapter_rows(result)
    if not rows or result.lora is None:
        return None
    lora = result.lora
    ran = (f"; vLLM ran up to {lora.adapters_running_max:.0f} adapters at once"
           if lora.adapters_running_max is not None else "")
    t = Table(title=f"per LoRA adapter (--lora-mix {lora.mix}{ran})", title_justify="left")
    for key, header in COLUMNS:
        t.add_column(header, justify="left" if key == "adapter" else "right")
    for row in rows:
        t.add_row(*cells(row))
    return t


def print_adapters(result: Result, console: Console) -> None:
    """Print the per-adapter table of ``result`` (nothing without adapters)."""
    table = adapter_table(result)
    if table is not None:
        print_fitted(console, table, OPTIONAL)


def comparison_adapter_rows(results: Sequence[Result], names: Sequence[str]
                            ) -> list[AdapterRow]:
    """``compare``'s adapter rows: each run's adapter rows, ``run`` its name ``names[i]``."""
    return [row for r, name in zip(results, names, strict=True)
            for row in adapter_rows(r, name)]


def comparison_adapter_table(rows: Sequence[AdapterRow]) -> Table | None:
    """``compare``'s per-adapter table: a ``run`` column, then :data:`COLUMNS`; None without
    rows."""
    if not rows:
        return None
    t = Table(title="per LoRA adapter", title_justify="left")
    t.add_column("run")
    for key, header in COLUMNS:
        t.add_column(header, justify="left" if key == "adapter" else "right")
    for row in rows:
        t.add_row(str(row.run), *cells(row))
    return t


def comparison_adapter_csv(rows: Sequence[tuple[AdapterRow, str]]) -> str:
    """``compare --format adapters-csv``: one CSV line per (row, result file) of ``rows``, the
    columns ``run``, then :class:`AdapterRow`'s fields in its order (shares as fractions,
    latencies in ms, output tokens/s), then the run's result file ``path``; an empty cell where
    a figure was not measured. Header only without rows."""
    fields = [f for f in AdapterRow.__struct_fields__ if f != "run"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["run", *fields, "path"])
    for row, path in rows:
        values = [getattr(row, f) for f in fields]
        w.writerow([row.run or "", *("" if v is None else v for v in values), path])
    return buf.getvalue()


def comparison_adapter_markdown(rows: Sequence[AdapterRow]) -> str:
    """``compare --format markdown``'s per-adapter table (a ``run`` column, then
    :data:`COLUMNS`), after a blank line; '' without rows."""
    if not rows:
        return ""
    lines = ["", "Per LoRA adapter:", "",
             "| run | " + " | ".join(h for _, h in COLUMNS) + " |",
             "|---|" + "|".join("---" if k == "adapter" else "---:" for k, _ in COLUMNS) + "|"]
    for row in rows:
        lines.append(f"| {row.run} | " + " | ".join(cells(row)) + " |")
    return "\n".join(lines) + "\n"
