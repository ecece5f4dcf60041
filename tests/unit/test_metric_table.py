"""The metric table (core.measurement.metric_table) and every place that shows its metrics.

Each place is checked on what it really outputs (a rendered table, a row dict, the gate's
verdicts, the HTML), not on the lists it derives from the table: a place that stops showing a
metric the table marks for it fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args

import pytest
from rich.console import Console
from typer.testing import CliRunner

from infer_prof.cli import app
from infer_prof.cli.run_endpoints import endpoints_table
from infer_prof.core.analysis.comparison import dig
from infer_prof.core.analysis.frontier_axes import summary_with_axes
from infer_prof.core.analysis.regression import Significance, direction_for
from infer_prof.core.measurement import metric_table as mt
from infer_prof.core.measurement.metrics import summarize_run
from infer_prof.core.measurement.stats import summarize
from infer_prof.core.workload.slo import evaluate_slos, parse_slos
from infer_prof.core.workload.workload_fields import WorkloadError
from infer_prof.core.workload.workloads import Workload
from infer_prof.report.console import summary_table
from infer_prof.report.html import build_report
from infer_prof.results.comparison_rows import row_for
from infer_prof.results.document import decode_result as typed
from infer_prof.results.endpoint_rows import EndpointRun, endpoint_rows
from infer_prof.results.gate import RunData as GateRun
from infer_prof.results.gate import evaluate, evaluate_within_run, samples_from_records
from infer_prof.results.history import flatten_summary
from infer_prof.results.loading import history_summary, record_result
from infer_prof.results.schema import public_summary
from tests.unit.test_report_html import base_records, make_result, run


def _result(run_id: str = "r1", concurrency: int = 4) -> dict[str, Any]:
    """A result with every metric of the table measured: the summary from real records, the
    frontier's axes derived, cost and energy (each path the table reads holds a number)."""
    r = make_result(run_id, concurrency)
    r["summary"] = summary_with_axes(r)
    r["cost"].setdefault("usd_per_hour", 2.0)
    r["quality"] = {"status": "measured", "accuracy": 0.96, "perplexity": 1.8,
                    "reference": {"result": "bf16.json", "mean_kl": 0.0097}}
    r["summary"].update(prefix_cache_hit_rate=0.375, spec_acceptance_rate=0.4,
                        spec_acceptance_length=2.2)
    return r


def _text(renderable: Any) -> str:
    console = Console(record=True, width=400)
    console.print(renderable)
    return console.export_text()


def _scalar_columns(place: mt.Place) -> list[mt.Column]:
    return [c for c in mt.columns_at(place) if c.metric.kind != "latency"]


# --------------------------------------------------------------------------- the table itself


def test_table_keys_are_unique_and_typed() -> None:
    for attr in ("key", "column"):
        values = [getattr(m, attr) for m in mt.METRICS]
        assert len(values) == len(set(values)), attr
    for m in mt.METRICS:
        assert m.better in ("lower", "higher") and m.kind in get_args(mt.Kind)
        assert set(m.shows) <= set(mt.PLACES)
        if m.kind == "latency":  # a latency has its per-request formula and shows statistics
            assert m.samples_ns is not None and m.unit == "ms"
            assert all(s.stats for p, s in m.shows.items() if p != "slo")
    with pytest.raises(ValueError, match="unknown place 'consol'"):
        mt._at("gate", consol=mt.Show())


def test_every_latency_is_the_distribution_of_its_formula() -> None:
    """The run summary holds each latency of the table under its key, and it is the
    distribution of the table's per-request formula (in ms) over the completed requests
    (queue: over every measured request, completed or not)."""
    records = base_records()
    summary = summarize_run(records).to_dict()
    for m in mt.latencies():
        assert m.samples_ns is not None
        pool = [r for r in records if not r.warmup and (r.ok or m.column == "queue")]
        want = summarize([v / 1e6 for r in pool for v in m.samples_ns(r)])
        assert want is not None, m.key
        assert summary[m.key] == pytest.approx(want.to_dict()), m.key


def test_every_path_of_the_table_is_read_from_a_result() -> None:
    r = _result()
    for place in mt.PLACES:
        for c in mt.columns_at(place):
            assert isinstance(dig(r, c.path), float | int), (place, c.key, c.path)


def test_direction_for_follows_the_table() -> None:
    """A metric the table declares goes its declared way, whatever its name suggests: tokens
    per $ is higher-is-better (the name heuristic read it lower)."""
    assert direction_for("cost.output_tokens_per_usd") == "higher"
    for m in mt.METRICS:
        for c in (c for p in mt.PLACES for c in mt.columns_of(m, p)):
            for alt in c.history_name.split("|"):
                assert direction_for(alt) == m.better, alt
    assert direction_for("some_unknown_per_s") == "higher"  # others: the name heuristic


# --------------------------------------------------------------------- each place shows its own


def test_console_shows_its_latencies() -> None:
    r = _result()
    lines = _text(summary_table(typed(r))).splitlines()
    for m in mt.metrics_at("console"):
        label = m.shows["console"].label or m.name
        row = next((ln for ln in lines if ln.strip(" │┃|").startswith(label)), None)
        assert row is not None, f"console has no row {label!r}"
        p50 = r["summary"][m.key]["p50"]
        assert f"{p50:,.2f}" in row, (label, p50, row)


def test_slos_take_every_slo_metric(tmp_path: Path) -> None:
    records = base_records()
    summary = summarize_run(records).to_dict()
    names = [m.column for m in mt.metrics_at("slo")]
    slos = parse_slos(",".join(f"{n}_p99=100000" for n in names))
    report = evaluate_slos(records, slos)
    for m, check in zip(mt.metrics_at("slo"), report.checks, strict=True):
        assert check.value_ms == pytest.approx(summary[m.key]["p99"]), m.key
        assert check.passed
    base = {"name": "t", "num_requests": 10, "input_len": 16, "output_len": 8}
    w = Workload.from_dict({**base, "slo": {f"{n}_p99": 5 for n in names}})
    assert set(w.slo) == {f"{n}_p99" for n in names}
    with pytest.raises(WorkloadError, match="metric one of " + ", ".join(names)):
        Workload.from_dict({**base, "slo": {"latency_p99": 5}})


def test_gate_judges_every_gate_metric() -> None:
    records = base_records()
    runs = [
        GateRun(f"r{i}", "test", flatten_summary(history_summary(_result(f"r{i}"))),
                samples_from_records(records))
        for i in range(2)
    ]
    judged = {c.name for c in evaluate(runs[:1], runs[1:])}
    within = evaluate_within_run(runs[:1], runs[1:], significance=Significance(n_boot=50))
    assert judged == {c.name for c in within}
    for c in mt.columns_at("gate"):
        assert judged & set(c.history_name.split("|")), f"the gate does not judge {c.key}"


def test_compare_has_every_compare_column() -> None:
    row = row_for(typed(_result()))
    for c in mt.columns_at("compare"):
        assert isinstance(row.get(c.key), float | int), f"compare has no value for {c.key}"


def test_history_lists_every_history_metric(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    r = _result()
    record_result(db, r, None)
    runner = CliRunner()
    listed = runner.invoke(app, ["history", "--db", str(db), "--json"])
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.stdout)
    table = runner.invoke(app, ["history", "--db", str(db)], terminal_width=400)
    assert table.exit_code == 0, table.output
    for c in mt.columns_at("history"):
        name = c.history_name.split("|")[0]
        assert row["metrics"].get(name) == pytest.approx(dig(r, c.path)), name
        assert c.label in table.stdout, c.label


def test_endpoint_table_has_every_endpoint_column() -> None:
    r = _result()
    (row,) = endpoint_rows([EndpointRun("a", "http://127.0.0.1:1", "H100-SXM",
                                        results=[(typed(r), "a.json")])])
    text = _text(endpoints_table([row]))
    for c in mt.columns_at("endpoints"):
        assert row.get(c.key) == pytest.approx(dig(r, c.path)), c.key
        assert c.label in text, c.label


def test_report_shows_every_report_and_sweep_latency() -> None:
    runs = [run(_result("c2", 2)), run(_result("c8", 8))]
    html = build_report(runs, generated_at="now").html
    summary = re.search(r'<section id="summary">.*?</section>', html, re.S)
    assert summary
    for m in mt.metrics_at("report"):
        assert f"{m.name} ({m.unit})" in summary.group(0), m.key
        assert f'data-plot="cdf_{m.column}"' in html, f"no CDF of {m.key}"
    for m in mt.metrics_at("sweep"):
        assert f'data-plot="sweep_concurrency_{m.column}"' in html, f"no sweep chart of {m.key}"


def test_json_summary_holds_every_latency() -> None:
    out = public_summary(typed(_result()).summary)
    for m in mt.latencies():
        assert out[m.key] is not None and out[m.key]["p99"] is not None, m.key
