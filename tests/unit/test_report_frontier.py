"""The report's frontier section on hand-written results (the sweeps and the `run --frontier`
result of test_compare_frontiers): curves, Pareto dots, rings off the front, the target line and
table; "not measured" without a frontier. The browser check is in
tests/integration/test_report_browser.py."""

from __future__ import annotations

import re

from infer_prof.core.analysis.frontier import steffen
from infer_prof.report.frontier_section import front_line, frontier_section
from infer_prof.report.html import build_report
from infer_prof.report.run_data import RunData
from infer_prof.results.frontier_curves import curves_from_results
from infer_prof.results.schema import typed_document
from tests.unit.test_compare_frontiers import A100, H100, LOADS, frontier_result, point_result


def _runs(with_dominated: bool = False) -> list[RunData]:
    runs = [RunData(typed_document(point_result(g, c)), f"{g.name}-c{c}")
            for g in (H100, A100) for c in LOADS]
    if with_dominated:  # an A100 point slower for users AND lower in throughput than c4
        r = point_result(A100, 6)
        r["summary"]["output_throughput"] = 100.0
        r["summary"]["total_throughput"] = 500.0
        runs.append(RunData(typed_document(r), "A100-c6"))
    runs.append(RunData(typed_document(frontier_result()), "L4"))
    return runs


def test_section_draws_each_curve_its_points_and_the_target() -> None:
    plots: list = []
    html = frontier_section(_runs(with_dominated=True), plots, target=60.0)
    assert [p.name for p in plots] == ["frontier_throughput", "frontier_cost"]
    svg = plots[0].svg
    for name in ("H100-SXM · cloud=a · front", "A100-80GB · cloud=b · front",
                 "L4 · cloud=c · front", "A100-80GB · cloud=b · other points"):
        assert f'data-series="{name}"' in svg
    # every H100 point is on its front; the one dominated A100 point is a ring (and its legend)
    assert 'data-series="H100-SXM · cloud=a · other points"' not in svg
    assert len(re.findall(r'fill="#ffffff" stroke="[^"]+" stroke-width="1.5"><title>', svg)) == 1
    assert 'class="vline"' in svg and "target 60 tok/s/user" in svg
    rows = re.findall(r"<tr><td>([^<]+)</td>", html.split("frontier-at-target")[1])
    assert rows == ["L4", "H100-SXM", "A100-80GB"]  # cheapest first, "does not reach" last
    assert "does not reach 60 tok/s/user" in html
    assert html.count(">not reached</span>") == 4  # the A100's four cells, not "not measured"


def test_front_line_follows_steffen_between_the_front_points() -> None:
    (h100,) = [c for c in curves_from_results([(r.source, r.result)
                                                 for r in _runs()])
               if c.gpu == "H100-SXM"]
    xs, ys = front_line(h100.points, "total_tok_s_per_gpu")
    knots = sorted((p.interactivity or 0.0, p.total_tok_s_per_gpu) for p in h100.points)
    assert xs[0] == knots[0][0] and xs[-1] == knots[-1][0]  # never past the measured points
    mid = len(xs) // 2
    x = xs[mid]
    assert x is not None
    assert ys[mid] == steffen([k[0] for k in knots], [k[1] for k in knots], x)


def test_no_frontier_is_not_measured_and_the_page_links_the_section() -> None:
    plots: list = []
    one = [RunData(typed_document(point_result(H100, 4)), "one")]
    assert "no frontier among these results" in frontier_section(one, plots, 60.0)
    assert plots == []
    page = build_report(_runs(), target_interactivity=60.0).html
    assert '<a href="#frontier">Frontier</a>' in page and 'id="frontier"' in page
