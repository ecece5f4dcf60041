"""The HTML report builder and its SVG plots, on constructed results and records (with nulls).

Records use integer nanoseconds; expected values are worked out by hand in the comments.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from infer_prof.cli import app
from infer_prof.core.catalog.prices import cost_report
from infer_prof.core.measurement.metrics import RequestRecord, summarize_run
from infer_prof.report.html import build_report
from infer_prof.report.plots import bar_chart, cdf_points, line_chart
from infer_prof.report.run_data import (
    NOT_MEASURED,
    RunData,
    cost_per_million,
    gpu_label,
    joules_per_token,
    run_names,
    samples_ms,
    sweep_groups,
)
from infer_prof.report.svg import Axis, Series, fmt_number, log_ticks, nice_ticks
from infer_prof.results.schema import RESULT_KIND, SCHEMA_VERSION
from infer_prof.results.schema import typed_document as typed
from infer_prof.results.store import write_requests

MS = 1_000_000


def rec(
    index: int,
    send_ms: float,
    chunks_ms: list[float],
    tokens: list[int] | None = None,
    warmup: bool = False,
    error: str | None = None,
    thought: int = 0,
) -> RequestRecord:
    """A request; ``thought``: its first ``thought`` chunks are reasoning (1 token each)."""
    chunk_ns = [int(c * MS) for c in chunks_ms]
    counts = tokens or [1] * len(chunk_ns)
    return RequestRecord(
        index=index,
        input_len=32,
        max_tokens=16,
        warmup=warmup,
        scheduled_ns=int(send_ms * MS),
        send_ns=int(send_ms * MS),
        chunk_ns=chunk_ns,
        chunk_tokens=counts,
        done_ns=chunk_ns[-1] if chunk_ns and error is None else None,
        prompt_tokens=32,
        output_tokens=sum(counts) if chunk_ns else None,
        error=error,
        first_answer_chunk=thought if thought < len(chunk_ns) else None,
        reasoning_chunk_tokens=thought,
    )


def base_records(scale: float = 1.0) -> list[RequestRecord]:
    """Two measured requests, one warm-up, one failure.

    r1: sent 0, chunks 10, 15, 25 ms -> TTFT 10, ITL 5 and 10, E2E 25, TPOT (25-10)/2 = 7.5;
        its first chunk is reasoning: TTFO 15, answer TPOT (25-15)/1 = 10.
    r2: sent 5, chunks 25, 45 ms (the second carries 2 tokens) -> TTFT 20, ITL 10 and 10
        (20 ms split over 2 tokens), E2E 40, TPOT (40-20)/2 = 10.
    Window 0..45 ms; 2 completed requests, 6 output tokens.
    """
    s = scale
    return [
        rec(0, -100, [-90, -80], warmup=True),
        rec(1, 0, [10 * s, 15 * s, 25 * s], thought=1),
        rec(2, 5, [5 + 20 * s, 5 + 40 * s], tokens=[1, 2]),
        rec(3, 6, [], error="http_500"),
    ]


def make_result(
    run_id: str,
    concurrency: int = 4,
    *,
    model: str = "llama-2-7b",
    gpu: str | None = "H100-SXM",
    gpu_count: int = 1,
    price: float | None = 2.0,
    records: list[RequestRecord] | None = None,
    telemetry: dict[str, Any] | None = None,
    energy_j: float | None = 300.0,
) -> dict[str, Any]:
    """A result dict shaped as ``infer-prof run`` writes it, summary computed from records."""
    recs = records if records is not None else base_records()
    run_summary = summarize_run(recs)
    summary = run_summary.to_dict()
    thinking = run_summary.reasoning
    out_tok = summary["total_output_tokens"]
    cost: dict[str, Any]
    if price is None:
        cost = {"available": False, "reason": "no GPU to price: pass --gpu NAME"}
    else:
        cost = {
            "available": True,
            "reason": None,
            **cost_report(
                price, gpu_count, summary["output_throughput"], summary["total_throughput"]
            ),
            "price": {"provider": "testcloud", "usd_per_hour": price},
        }
    energy = {
        "energy_j": energy_j,
        "source": "nvml_energy_counter" if energy_j is not None else None,
        "joules_per_output_token": energy_j / out_tok if energy_j is not None else None,
        "reason": None if energy_j is not None else "NVML not available",
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": RESULT_KIND,
        "run_id": run_id,
        "started_at": "2026-11-22T03:00:00+00:00",
        "complete": True,
        "incomplete_reason": None,
        "config": {
            "model": model,
            "concurrency": concurrency,
            "input_len": 32,
            "output_len": 16,
            "labels": {},
        },
        "labels": {},
        "model": {"name": model},
        "environment": {
            "gpu_name": None,
            "gpu_count": 0,
            "cpu": "Test CPU",
        },
        "gpu": {"key": gpu, "count": gpu_count},
        "summary": summary,
        "reasoning": None if thinking is None else {
            "streamed": True, "requests": thinking.requests,
            "reasoning_tokens": thinking.reasoning_tokens.to_dict()
            if thinking.reasoning_tokens else None,
            "answer_tokens": thinking.answer_tokens.to_dict() if thinking.answer_tokens else None},
        "cost": cost,
        "energy": energy,
        "telemetry": telemetry,
    }


def gpu_telemetry(util: list[float | None], power: list[float | None]) -> dict[str, Any]:
    """NVML telemetry of one GPU sampled at t = 1, 2, 3, ... s; the window starts at 2 s."""
    n = len(util)
    t = [1.0 + i for i in range(n)]
    return {
        "gpu": {
            "available": True,
            "reason": None,
            "window": {"start_s": 2.0, "end_s": float(n), "marked": True},
            "gpus": [
                {
                    "index": 0,
                    "name": "NVIDIA H100 80GB HBM3",
                    "power_limit_w": 700.0,
                    "series": {
                        "t_s": t,
                        "util_pct": util,
                        "power_w": power,
                        "mem_used_bytes": [None] * n,
                        "sm_clock_mhz": [None] * n,
                        "temp_c": [None] * n,
                    },
                }
            ],
        },
        "server_metrics": {
            "available": True,
            "reason": None,
            "window": {"start_s": 2.0, "end_s": float(n), "marked": True},
            "series": {
                "t_s": t,
                "kv_cache_usage_perc": [None] * n,
                "running": [0.0, 4.0, None, 4.0][:n] + [0.0] * max(0, n - 4),
                "waiting": [0.0] * n,
            },
        },
    }


def run(result: dict[str, Any], records: list[RequestRecord] | None = None) -> RunData:
    return RunData(typed(result), f"{result['run_id']}.json", records or base_records())


def svg_of(report_html: str, name: str) -> str:
    m = re.search(rf'<svg[^>]*data-plot="{re.escape(name)}".*?</svg>', report_html, re.S)
    assert m, f"no plot {name}"
    return m.group(0)


def polylines(svg: str) -> list[list[tuple[float, float]]]:
    out = []
    for pts in re.findall(r'<polyline points="([^"]+)"', svg):
        out.append([tuple(map(float, p.split(","))) for p in pts.split()])
    return out


# --------------------------------------------------------------------------- numbers


def test_nice_ticks_cover_the_range_with_round_steps():
    assert nice_ticks(0, 97) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(18.2, 28.9) == [17.5, 20, 22.5, 25, 27.5, 30]  # 10.7 / 5 -> step 2.5
    assert nice_ticks(19.6, 28.1) == [18, 20, 22, 24, 26, 28, 30]  # 8.5 / 5 -> step 2
    assert nice_ticks(0, 12) == [0, 2.5, 5, 7.5, 10, 12.5]
    flat = nice_ticks(5, 5)  # a constant gets a range around it (+-10%)
    assert flat[0] <= 4.5 and flat[-1] >= 5.5 and 5.0 in flat


def test_log_ticks_span_decades():
    assert log_ticks(1, 8) == [1, 2, 5, 10]
    assert log_ticks(3, 700) == [2, 5, 10, 20, 50, 100, 200, 500, 1000]


def test_fmt_number_three_significant_figures_and_not_measured():
    assert fmt_number(1234.5) == "1,234"
    assert fmt_number(12.345) == "12.3"
    assert fmt_number(0.01234) == "0.0123"
    assert fmt_number(0) == "0"
    assert fmt_number(None) == NOT_MEASURED
    assert fmt_number(float("nan")) == NOT_MEASURED


def test_cdf_points_rank_over_n():
    xs, ys = cdf_points([30.0, 10.0, 20.0, 40.0])
    assert xs == [10.0, 20.0, 30.0, 40.0]
    assert ys == [25.0, 50.0, 75.0, 100.0]
    assert cdf_points([]) == ([], [])


def test_cdf_points_thin_long_inputs_but_keep_extremes_and_tail():
    values = [float(i) for i in range(100_000)]
    xs, ys = cdf_points(values, max_points=800)
    assert len(xs) <= 1000
    assert xs[0] == 0.0 and xs[-1] == 99_999.0 and ys[-1] == 100.0
    assert sum(1 for x in xs if x >= 99_000) >= 200  # the top 1% is drawn densely
    assert xs == sorted(xs)


# --------------------------------------------------------------------------- plots


def test_line_chart_breaks_at_none_and_never_draws_it_as_zero():
    s = Series("a", [1, 2, 3, 4, 5], [10.0, None, 30.0, 40.0, None])
    svg = line_chart("t", "t", [s], Axis("x (s)"), Axis("y (ms)", zero=True)).svg
    lines = polylines(svg)
    # point 1 is alone between the start and a gap: a dot; points 3-4 a two-point line
    assert len(lines) == 1 and len(lines[0]) == 2
    circles = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg)
    assert len(circles) == 1
    # the zero line of the y axis is the bottom of the plot area; nothing is drawn there
    ys = [y for _, y in lines[0]] + [float(cy) for _, cy in circles]
    bottom = max(float(y) for y in re.findall(r'<line x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)"', svg))
    assert all(y < bottom - 1 for y in ys)


def test_line_chart_pixel_positions_are_linear_in_the_data():
    s = Series("a", [0, 5, 10], [0.0, 50.0, 100.0])
    svg = line_chart("t", "t", [s], Axis("x (s)", lo=0, hi=10), Axis("y (%)", lo=0, hi=100)).svg
    (pts,) = polylines(svg)
    (x0, y0), (x1, y1), (x2, y2) = pts
    assert x1 - x0 == pytest.approx(x2 - x1, abs=0.11)
    assert y0 - y1 == pytest.approx(y1 - y2, abs=0.11)


def test_line_chart_without_data_says_not_measured():
    svg = line_chart("t", "t", [Series("a", [1, 2], [None, None])], Axis("x"), Axis("y")).svg
    assert "not measured" in svg and "<polyline" not in svg


def test_axes_carry_their_labels_and_units():
    svg = line_chart(
        "t", "T", [Series("a", [1, 2], [1, 2])], Axis("time (s)"), Axis("TTFT (ms)")
    ).svg
    assert ">time (s)</text>" in svg and ">TTFT (ms)</text>" in svg


def test_bar_chart_lengths_proportional_and_none_not_drawn():
    plot = bar_chart("b", "B", ["a", "b", "c"], [1.0, None, 2.0], Axis("USD per 1M tokens"))
    widths = [
        float(w)
        for w in re.findall(
            r'<rect class="bar" x="[\d.]+" y="[\d.]+" '
            r'width="([\d.]+)"',
            plot.svg,
        )
    ]
    assert len(widths) == 2
    assert widths[1] / widths[0] == pytest.approx(2.0, rel=0.01)
    assert "not measured" in plot.svg


def test_text_is_escaped():
    svg = line_chart("t", "<b>", [Series("<script>x</script>", [1], [1])], Axis("x"), Axis("y")).svg
    assert "<script>" not in svg and "&lt;script&gt;" in svg


# --------------------------------------------------------------------------- reading results


def test_samples_ms_measured_completed_requests_only():
    recs = base_records()
    assert samples_ms(recs, "ttft") == [10.0, 20.0]
    assert samples_ms(recs, "itl") == [5.0, 10.0, 10.0, 10.0]
    assert samples_ms(recs, "e2e") == [25.0, 40.0]
    assert samples_ms(recs, "tpot") == [7.5, 10.0]


def test_cost_energy_and_gpu_labels():
    r = typed(make_result("a", price=2.0))
    # 3 + 3 output tokens over the window 0..45 ms -> 133.3 tok/s; $2/h / (133.3 * 3600) * 1e6
    tok_s = 6 / 0.045
    assert cost_per_million(r) == pytest.approx(2.0 / (tok_s * 3600) * 1e6)
    assert joules_per_token(r) == pytest.approx(300.0 / 6)
    assert gpu_label(r) == "H100-SXM"
    assert gpu_label(typed(make_result("b", gpu="A100-80GB", gpu_count=2))) == "A100-80GB x 2"
    cpu = typed(make_result("c", gpu=None, price=None, energy_j=None))
    assert gpu_label(cpu) == "CPU (Test CPU)" and gpu_label(cpu, short=True) == "CPU"
    assert cost_per_million(cpu) is None and joules_per_token(cpu) is None


def test_sweep_groups_need_two_load_levels_of_one_configuration():
    runs = [run(make_result(f"c{c}", c)) for c in (8, 1, 4)]
    runs.append(run(make_result("other", 2, model="llama-2-13b")))
    groups = sweep_groups(runs)
    assert len(groups) == 1
    label, kind, members = groups[0]
    assert kind == "concurrency" and "llama-2-7b on H100-SXM" in label
    assert [m.result.run_id for m in members] == ["c1", "c4", "c8"]
    assert sweep_groups(runs[3:]) == []


def test_run_names_keep_only_what_differs():
    a = run(make_result("a", 1))
    b = run(make_result("b", 4))
    c = run(make_result("c", 4, gpu="A100-80GB"))
    assert run_names([a, b]) == ["c=1", "c=4"]
    assert run_names([a, b, c]) == ["H100-SXM c=1", "H100-SXM c=4", "A100-80GB c=4"]
    assert run_names([b, b]) == ["c=4 [b]", "c=4 [b]"]


# --------------------------------------------------------------------------- the report


def _summary_rows(doc: str) -> list[str]:
    tbody = re.search(r'<section id="summary">.*?<tbody>(.*?)</tbody>', doc, re.S)
    assert tbody
    return re.findall(r"<tr>(.*?)</tr>", tbody.group(1), re.S)


def test_report_summary_table_values_and_nulls():
    full = make_result("full", 4, telemetry=gpu_telemetry([10, 50, 90, 80], [100, 300, 650, 600]))
    bare = make_result("bare", 4, gpu=None, price=None, energy_j=None)
    bare["summary"]["tpot_ms"] = None  # e.g. every request produced one token
    doc = build_report([run(full), run(bare)], generated_at="now").html
    rows = _summary_rows(doc)
    assert len(rows) == 2
    cells_full = re.findall(r"<td[^>]*>(.*?)</td>", rows[0], re.S)
    cells_bare = re.findall(r"<td[^>]*>(.*?)</td>", rows[1], re.S)
    # model, GPU, load, ok/failed, req/s = 2 / 0.045 s = 44.4, out tok/s = 6 / 0.045 = 133
    assert cells_full[1:7] == ["llama-2-7b", "H100-SXM", "c=4", "2 / 1", "44.4", "133"]
    # TTFT p50 of 10 and 20 ms = 15, p99 = 10 + 0.99 * 10 = 19.9
    assert cells_full[7:9] == ["15.0", "19.9"]
    assert cells_full[-1] == "50.0"  # 300 J / 6 tokens
    assert cells_full[-2] == "4.17"  # $2/h / (133.3 tok/s * 3600 s/h) * 1e6
    assert NOT_MEASURED not in rows[0]
    # the bare run: TPOT, $ and J read "not measured", never 0
    assert cells_bare[2] == "CPU (Test CPU)"
    # TTFO (r1 thought for one chunk: 15 ms; r2 did not: 20 ms), then TPOT
    assert cells_full[9:11] == ["17.5", "19.9"]
    assert cells_bare[11:13] == [f'<span class="nm">{NOT_MEASURED}</span>'] * 2
    assert cells_bare[-2:] == [f'<span class="nm">{NOT_MEASURED}</span>'] * 2
    assert "no GPU to price" in rows[1]  # the reason is the cell's hover title


def test_report_is_self_contained():
    doc = build_report([run(make_result("a", telemetry=gpu_telemetry([1, 2], [3, 4])))]).html
    assert "<script" not in doc
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!#|data:)""", doc)
    assert "url(" not in doc and "@import" not in doc
    # the only absolute URL is the SVG namespace name, which is never fetched
    assert set(re.findall(r"https?://[^\s\"'<>]+", doc)) == {"http://www.w3.org/2000/svg"}


def test_report_plots_sections_and_not_measured_notes():
    tel = gpu_telemetry([10.0, None, 90.0, 80.0], [100.0, 300.0, 650.0, None])
    runs = [run(make_result(f"c{c}", c, telemetry=tel)) for c in (1, 2, 4)]
    cpu = make_result(
        "cpu",
        4,
        gpu=None,
        price=None,
        energy_j=None,
        telemetry={
            "gpu": {"available": False, "reason": "nvmlInit failed"},
            "server_metrics": {"available": False, "reason": "refused"},
        },
    )
    report = build_report([*runs, run(cpu)])
    doc = report.html
    names = [p.name for p in report.plots]
    assert len(names) == len(set(names))
    for key in ("ttft", "tpot", "itl", "e2e"):
        assert f"cdf_{key}" in names
    assert {"sweep_concurrency_throughput", "sweep_concurrency_ttft"} <= set(names)
    assert "cost_per_million" in names
    # every plot is inline in the document
    assert doc.count("<svg") == len(report.plots)
    # GPU telemetry: util and power plotted; memory, clock, temperature said not measured
    util = svg_of(doc, next(n for n in names if n == "telemetry_c1_util_pct"))
    # util [10, None, 90, 80]: a lone dot then a 2-point line
    assert len(polylines(util)) == 1 and len(polylines(util)[0]) == 2
    assert "GPU memory used, SM clock, GPU temperature" in doc
    # KV cache all null -> not measured; running/waiting plotted
    assert "KV cache usage" in doc and any(n.endswith("_requests") for n in names)
    assert not any(n.endswith("_kv_cache") for n in names)
    # the CPU run: GPU telemetry and server metrics not measured, with the reasons
    assert "nvmlInit failed" in doc and "refused" in doc
    # cost: the CPU run has no price -> a labelled bar slot without a bar
    cost_svg = svg_of(doc, "cost_per_million")
    assert cost_svg.count('class="bar"') == 3 and "not measured" in cost_svg
    # power limit drawn as a reference line
    assert "power limit 700 W" in doc


def test_report_without_records_or_sweep_or_prices_says_not_measured():
    r = make_result("solo", 4, gpu=None, price=None, energy_j=None)
    solo = RunData(typed(r), "solo.json", None, "per-request records not found (x)")
    doc = build_report([solo]).html
    assert "latency distributions of c=4: per-request records not found (x)" in doc
    assert "no sweep among these results" in doc
    assert "no run has a cost per 1M tokens" in doc and "no GPU to price" in doc
    assert "GPU telemetry" in doc  # telemetry None -> not measured


def test_report_needs_a_run():
    with pytest.raises(ValueError):
        build_report([])


# --------------------------------------------------------------------------- the command


def _write(tmp: Path, result: dict[str, Any], records: list[RequestRecord] | None) -> Path:
    path = tmp / f"{result['run_id']}.json"
    result["requests_file"] = f"{result['run_id']}.requests.jsonl"
    path.write_text(json.dumps(result))
    if records is not None:
        write_requests(tmp / result["requests_file"], records)
    return path


def test_report_command_writes_html_from_folder_and_notes_missing_records(tmp_path: Path):
    results = tmp_path / "results"
    results.mkdir()
    for c in (1, 2):
        _write(results, make_result(f"run-c{c}", c), base_records())
    _write(results, make_result("run-c4", 4), None)
    out = tmp_path / "out" / "r.html"
    res = CliRunner().invoke(app, ["report", str(results), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "3 runs" in res.output
    assert "per-request records not found" in res.output
    doc = out.read_text()
    assert doc.startswith("<!doctype html>") and len(_summary_rows(doc)) == 3


def test_report_command_bad_input_exits_2(tmp_path: Path):
    res = CliRunner().invoke(app, ["report", str(tmp_path / "nope.json")])
    assert res.exit_code == 2
    assert "error:" in res.output


def test_png_without_chromium_names_the_install_command(tmp_path: Path, monkeypatch):
    import infer_prof.report.chromium as chromium

    monkeypatch.setattr(chromium, "find_chromium", lambda: None)
    plot = line_chart("p", "P", [Series("a", [1, 2], [1, 2])], Axis("x"), Axis("y"))
    with pytest.raises(chromium.PngError, match="apt-get install -y chromium"):
        chromium.render_pngs([plot], tmp_path)
    with pytest.raises(chromium.PngError, match="cannot start Chromium"):
        chromium.render_pngs([plot], tmp_path, chromium=str(tmp_path / "no-such-browser"))

    results = tmp_path / "r"
    results.mkdir()
    _write(results, make_result("run-c1", 1), base_records())
    res = CliRunner().invoke(
        app, ["report", str(results), "-o", str(tmp_path / "r.html"), "--png-dir", str(tmp_path)]
    )
    assert res.exit_code == 1 and "apt-get install -y chromium" in res.output
    assert (tmp_path / "r.html").exists()  # the HTML is written before the PNGs are tried


def test_incomplete_run_and_labels_are_shown():
    r = make_result("cut", 4)
    r["complete"] = False
    r["incomplete_reason"] = "server_died"
    r["labels"] = {"instance": "<spot>"}
    doc = build_report([run(r)]).html
    (row,) = _summary_rows(doc)
    assert "incomplete: server_died" in row and "instance=&lt;spot&gt;" in row


def test_invalid_run_is_marked_with_its_reason_beside_and_on_hover():
    r = make_result("small", 4)
    r["validity"] = {"valid": False, "reasons": ["3 requests completed (< 10)", "window 1 s"]}
    ok = make_result("fine", 4)
    ok["validity"] = {"valid": True, "reasons": []}
    doc = build_report([run(r), run(ok)]).html
    bad_row, ok_row = _summary_rows(doc)
    why = "invalid: 3 requests completed (&lt; 10); window 1 s"
    assert f'<span class="badge invalid" title="{why}">{why}</span>' in bad_row
    assert "badge" not in ok_row
    r["complete"], r["incomplete_reason"] = False, "interrupted"
    (both,) = _summary_rows(build_report([run(r)]).html)
    assert 'title="incomplete: interrupted"' in both and 'class="badge invalid"' in both
