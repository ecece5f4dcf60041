"""The per-adapter table of a run over LoRA adapters (``run --lora-mix``), printed beside the
run's own tables, and the same rows for ``compare`` (one row per run and adapter).

Each row is one adapter (``base``: the served model itself) from the result's ``lora`` section
(:class:`infer_prof.results.lora_sections.AdapterFigures`): requests asked and sent (shares of
the measured requests), completed, TTFT and TPOT p50/p99 (ms), and output tokens/s over the
whole run's window (so the rows add up to the run's ``output tokens/s``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from infer_prof.report.fit import print_fitted
from infer_prof.results.document import Result
from infer_prof.results.document_base import Distribution
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


def adapter_row(f: AdapterFigures) -> dict[str, Any]:
    """One adapter's figures as a row (keys of :data:`COLUMNS`; latencies in ms, None when not
    measured)."""
    return {
        "adapter": f.adapter,
        "share_asked": f.share_asked,
        "share_sent": f.share_sent,
        "requests_completed": f.requests_completed,
        "requests_failed": f.requests_failed,
        "ttft_p50_ms": _stat(f.ttft_ms, "p50"),
        "ttft_p99_ms": _stat(f.ttft_ms, "p99"),
        "tpot_p50_ms": _stat(f.tpot_ms, "p50"),
        "tpot_p99_ms": _stat(f.tpot_ms, "p99"),
        "output_throughput": f.output_throughput,
    }


def _stat(d: Distribution | None, name: str) -> float | None:
    return None if d is None else getattr(d, name)


def adapter_rows(result: Result) -> list[dict[str, Any]]:
    """The rows of a result's adapters (:func:`adapter_row`); [] for a run without them."""
    return [adapter_row(f) for f in result.lora.per_adapter] if result.lora else []


def _cell(key: str, value: Any) -> str:
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
        t.add_row(*(_cell(k, row[k]) for k, _ in COLUMNS))
    return t


def print_adapters(result: Result, console: Console) -> None:
    """Print the per-adapter table of ``result`` (nothing without adapters)."""
    table = adapter_table(result)
    if table is not None:
        print_fitted(console, table, OPTIONAL)


def comparison_adapter_rows(results: Sequence[Result], names: Sequence[str]
                            ) -> list[dict[str, Any]]:
    """``compare``'s adapter rows: each run's (named ``names[i]``, key ``run``) adapter rows."""
    return [{"run": name, **row} for r, name in zip(results, names, strict=True)
            for row in adapter_rows(r)]


def comparison_adapter_table(rows: Sequence[dict[str, Any]]) -> Table | None:
    """``compare``'s per-adapter table: a ``run`` column, then :data:`COLUMNS`; None without
    rows."""
    if not rows:
        return None
    t = Table(title="per LoRA adapter", title_justify="left")
    t.add_column("run")
    for key, header in COLUMNS:
        t.add_column(header, justify="left" if key == "adapter" else "right")
    for row in rows:
        t.add_row(str(row["run"]), *(_cell(k, row[k]) for k, _ in COLUMNS))
    return t


def comparison_adapter_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """``compare --format markdown``'s per-adapter table (a ``run`` column, then
    :data:`COLUMNS`), after a blank line; '' without rows."""
    if not rows:
        return ""
    lines = ["", "Per LoRA adapter:", "",
             "| run | " + " | ".join(h for _, h in COLUMNS) + " |",
             "|---|" + "|".join("---" if k == "adapter" else "---:" for k, _ in COLUMNS) + "|"]
    for row in rows:
        lines.append(f"| {row['run']} | " + " | ".join(_cell(k, row[k]) for k, _ in COLUMNS)
                     + " |")
    return "\n".join(lines) + "\n"
