"""The per-adapter rows of a run over LoRA adapters: one declared row type (AdapterRow) that the
console and Markdown tables, the HTML section and ``compare --format json`` all read."""

import csv
import io
import json

import msgspec
from rich.console import Console

from infer_prof.report.adapter_table import (
    COLUMNS,
    AdapterRow,
    adapter_rows,
    adapter_table,
    cells,
    comparison_adapter_csv,
    comparison_adapter_markdown,
    comparison_adapter_rows,
    comparison_adapter_table,
)
from infer_prof.report.lora_section import lora_section
from infer_prof.report.run_data import RunData
from infer_prof.results.document import Result, decode_result


def _dist(p50: float, p99: float) -> dict[str, float]:
    return {"count": 4, "mean": p50, "p50": p50, "p90": p99, "p99": p99, "max": p99,
            "min": p50, "std": 0.5}


def _result(lora: bool = True) -> Result:
    doc = {"kind": "infer-prof.run", "schema_version": 1, "run_id": "r1", "config": {},
           "summary": {"requests_completed": 11, "requests_failed": 1}}
    if lora:
        doc["lora"] = {"mix": "a1=0.5,base=0.5", "adapters_running_max": 2.0, "per_adapter": [
            {"adapter": "a1", "share_asked": 0.5, "share_sent": 0.55, "requests_completed": 11,
             "requests_failed": 1, "ttft_ms": _dist(80.123, 99.5), "tpot_ms": _dist(4.0, 5.25),
             "output_throughput": 1234.567},
            {"adapter": "base", "share_asked": 0.5, "requests_completed": 0}]}
    return decode_result(doc)


def test_a_row_holds_the_adapters_figures_and_none_where_not_measured():
    a1, base = adapter_rows(_result())
    assert a1 == AdapterRow(adapter="a1", share_asked=0.5, share_sent=0.55,
                            requests_completed=11, requests_failed=1, ttft_p50_ms=80.123,
                            ttft_p99_ms=99.5, tpot_p50_ms=4.0, tpot_p99_ms=5.25,
                            output_throughput=1234.567)
    assert base.share_sent is None and base.ttft_p50_ms is None and base.requests_completed == 0
    assert adapter_rows(_result(lora=False)) == []


def test_the_columns_are_the_rows_fields_in_order():
    fields = AdapterRow.__struct_fields__
    assert [k for k, _ in COLUMNS] == [f for f in fields if f in dict(COLUMNS)]
    row = adapter_rows(_result())[0]
    assert (row.adapter, *row.figures()) == tuple(getattr(row, k) for k, _ in COLUMNS)


def test_cells_format_shares_rates_and_latencies():
    a1, base = adapter_rows(_result())
    assert cells(a1) == ["a1", "50%", "55%", "11", "80.12", "99.50", "4.00", "5.25", "1,234.6"]
    assert cells(base) == ["base", "50%"] + ["n/a", "0"] + ["n/a"] * 5


def test_compare_json_rows_name_the_run_first_and_keep_every_field():
    rows = comparison_adapter_rows([_result(), _result(lora=False)], ["run A", "run B"])
    assert [(r.run, r.adapter) for r in rows] == [("run A", "a1"), ("run A", "base")]
    encoded = json.loads(json.dumps(msgspec.to_builtins(rows)))
    assert list(encoded[0]) == ["run", "adapter", "share_asked", "share_sent",
                                "requests_completed", "requests_failed", "ttft_p50_ms",
                                "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "output_throughput"]
    assert encoded[0]["ttft_p50_ms"] == 80.123 and encoded[1]["share_sent"] is None
    # a single run's row has no run name, and its JSON leaves the key out
    assert "run" not in msgspec.to_builtins(adapter_rows(_result())[0])


def test_compare_adapters_csv_has_a_line_per_run_and_adapter_and_empty_cells_where_unmeasured():
    # two runs of the same name stay apart: each line carries its own run's file
    rows = comparison_adapter_rows([_result(), _result()], ["run A", "run A"])
    text = comparison_adapter_csv(list(zip(rows, ["a.json", "a.json", "b.json", "b.json"],
                                           strict=True)))
    lines = list(csv.DictReader(io.StringIO(text)))
    assert list(lines[0]) == ["run", "adapter", "share_asked", "share_sent",
                              "requests_completed", "requests_failed", "ttft_p50_ms",
                              "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "output_throughput",
                              "path"]
    assert [(x["run"], x["adapter"], x["path"]) for x in lines] == [
        ("run A", "a1", "a.json"), ("run A", "base", "a.json"),
        ("run A", "a1", "b.json"), ("run A", "base", "b.json")]
    assert float(lines[0]["ttft_p50_ms"]) == 80.123 and lines[0]["requests_failed"] == "1"
    assert lines[1]["share_sent"] == "" and lines[1]["ttft_p50_ms"] == ""
    assert comparison_adapter_csv([]).splitlines() == [text.splitlines()[0]]


def test_tables_and_markdown_show_a_row_per_run_and_adapter():
    rows = comparison_adapter_rows([_result()], ["run A"])
    md = comparison_adapter_markdown(rows)
    assert "| run A | a1 | 50% | 55% | 11 | 80.12 | 99.50 | 4.00 | 5.25 | 1,234.6 |" in md
    assert "| run A | base | 50% | n/a | 0 | n/a | n/a | n/a | n/a | n/a |" in md
    assert comparison_adapter_markdown([]) == "" and comparison_adapter_table([]) is None
    console = Console(width=400, record=True, file=io.StringIO())
    console.print(comparison_adapter_table(rows))
    console.print(adapter_table(_result()))
    text = console.export_text()
    assert "vLLM ran up to 2 adapters at once" in text and text.count("1,234.6") == 2
    assert adapter_table(_result(lora=False)) is None


def test_the_html_section_reads_the_same_rows():
    html = lora_section([RunData(_result()), RunData(_result(lora=False))], ["n1", "n2"])
    assert "<tr><td>r1</td><td>a1</td><td class=\"num\">50%</td><td class=\"num\">55%</td>" in html
    assert "--lora-mix a1=0.5,base=0.5, up to 2 adapters running at once" in html
    assert lora_section([RunData(_result(lora=False))], ["n"]) == ""


def test_compare_adapters_csv_of_runs_without_adapters_is_one_line_and_exit_2(tmp_path):
    from typer.testing import CliRunner

    from infer_prof.cli import app

    path = tmp_path / "plain.json"
    path.write_bytes(msgspec.json.encode(_result(lora=False)))
    r = CliRunner().invoke(app, ["compare", str(path), "--format", "adapters-csv"])
    assert r.exit_code == 2, r.output
    assert "none of these runs served LoRA adapters" in r.output
    assert "--format csv" in r.output
    r = CliRunner().invoke(app, ["compare", str(path), "--format", "adapters-csv", "--tiers"])
    assert r.exit_code == 2 and "leave out" in r.output
