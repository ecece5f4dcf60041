"""The report's frontier section: throughput per GPU and $ per 1M tokens against the speed each
user sees, one curve per GPU, instance and configuration (docs/frontier.md).

Curves come from :func:`infer_prof.results.frontier_curves.curves_from_results` (a
``run --frontier`` result, or a sweep's per-point results). On each chart a curve is its Pareto
front drawn with Steffen's monotone interpolation between the front's points (never past them),
the Pareto points as filled dots and the other measured points as rings; a target interactivity
is a dashed vertical line, and the table under the charts reads every curve at it.
"""

from __future__ import annotations

from collections.abc import Sequence

from infer_prof.core.analysis.frontier import (
    FrontierPoint,
    front,
    mark_pareto,
    steffen,
    usd_per_million,
)
from infer_prof.core.analysis.frontier_compare import Curve, rows_at_target
from infer_prof.report.html_fragments import cell, esc, figure, not_measured
from infer_prof.report.plots import line_chart
from infer_prof.report.run_data import RunData, num
from infer_prof.report.svg import PALETTE, Axis, Marks, Plot, Series
from infer_prof.results.frontier_curves import curves_from_results

X_LABEL = "interactivity (tokens/s per user = 1000 / TPOT p50 ms)"
#: Samples of the interpolated front between its first and last point.
CURVE_SAMPLES = 48


def curve_label(curve: Curve, curves: Sequence[Curve]) -> str:
    """The parts of GPU, instance and configuration that tell ``curve`` apart from the others
    (the GPU alone when nothing else differs)."""
    parts = [(c.gpu, c.instance, c.configuration) for c in curves]
    varying = [i for i in range(3) if len({p[i] for p in parts}) > 1] or [0]
    own = (curve.gpu, curve.instance, curve.configuration)
    return " · ".join(own[i] for i in varying if own[i]) or curve.gpu


def front_line(
    points: Sequence[FrontierPoint], value: str, price: float | None = None,
) -> tuple[list[float | None], list[float | None]]:
    """The Pareto front of ``points`` sampled along Steffen's curve: x interactivity, y the
    point attribute ``value`` (tokens/s per GPU) or, with ``price``, $ per 1M of those tokens."""
    f = front(points)
    if len(f) < 2:
        return [], []
    xs = [float(p.interactivity or 0.0) for p in f]
    ys = [float(getattr(p, value)) for p in f]
    grid = sorted({*xs, *(xs[0] + (xs[-1] - xs[0]) * k / CURVE_SAMPLES
                         for k in range(CURVE_SAMPLES + 1))})
    out_x: list[float | None] = []
    out_y: list[float | None] = []
    for x in grid:
        y = steffen(xs, ys, x)
        out_x.append(x)
        out_y.append(y if price is None or y is None else usd_per_million(price, y))
    return out_x, out_y


def _target(runs: Sequence[RunData], given: float | None) -> float | None:
    if given is not None:
        return given
    for r in runs:
        target = r.result.frontier.target if r.result.frontier else None
        if target is not None and num(target.interactivity) is not None:
            return num(target.interactivity)
    return None


def _y(p: FrontierPoint, value: str, price: float | None, cost: bool) -> float | None:
    v = float(getattr(p, value))
    return usd_per_million(price, v) if cost else v


def _series(curves: Sequence[Curve], cost: bool, predicted: Sequence[Curve] = ()
            ) -> list[Series]:
    out = []
    value = "output_tok_s_per_gpu" if cost else "total_tok_s_per_gpu"
    colors = {c.gpu: PALETTE[i % len(PALETTE)] for i, c in enumerate(curves)}
    for i, c in enumerate(predicted):  # dashed, in the colour of the same GPU's measured curve
        color = colors.get(c.gpu, PALETTE[(len(curves) + i) % len(PALETTE)])
        if cost and c.usd_per_gpu_hour is None:
            continue
        lx, ly = front_line(c.points, value, c.usd_per_gpu_hour if cost else None)
        out.append(Series(f"{c.gpu} · predicted", lx, ly, color=color, dashed=True))
    for i, c in enumerate(curves):
        color = PALETTE[i % len(PALETTE)]
        name = curve_label(c, curves)
        if cost and c.usd_per_gpu_hour is None:
            continue
        lx, ly = front_line(c.points, value, c.usd_per_gpu_hour if cost else None)
        out.append(Series(f"{name} · front", lx, ly, color=color))
        marked = mark_pareto(c.points)
        fr = [p for p in marked if p.pareto]
        off = [p for p in marked if not p.pareto and p.interactivity is not None]
        out.append(Series(f"{name} · Pareto points", [p.interactivity for p in fr],
                          [_y(p, value, c.usd_per_gpu_hour, cost) for p in fr], color=color,
                          line=False))
        if off:
            out.append(Series(f"{name} · other points", [p.interactivity for p in off],
                              [_y(p, value, c.usd_per_gpu_hour, cost) for p in off],
                              color=color, line=False, hollow=True))
    return out


def _table(curves: Sequence[Curve], target: float) -> str:
    head = ("GPU", "instance", "configuration", "$/1M out", "$/1M total", "out tok/s/GPU",
            "tot tok/s/GPU", "read")
    rows = []
    for row in rows_at_target(curves, target):
        at = row.at
        c = row.curve
        if at is None:  # the curve stops short of the target: nothing to read there
            values = ['<td class="num"><span class="nm">not reached</span></td>'] * 4
        else:
            values = [cell(v) for v in (at.usd_per_million_output_tokens,
                                        at.usd_per_million_total_tokens,
                                        at.output_tok_s_per_gpu, at.total_tok_s_per_gpu)]
        rows.append(
            f"<tr><td>{esc(c.gpu)}</td><td>{esc(c.instance)}</td><td>{esc(c.configuration)}</td>"
            + "".join(values) + f'<td class="wrap">{esc(row.note)}</td></tr>'
        )
    return (f"<h3>At {target:g} tokens/s per user, cheapest first</h3>"
            '<div class="table-wrap"><table class="frontier-at-target"><thead><tr>'
            + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>")


def frontier_section(
    runs: Sequence[RunData], plots: list[Plot], target: float | None = None,
    predicted: Sequence[Curve] = (),
) -> str:
    """The section: two charts and, with a target (given, or a frontier result's own), the
    table at it; "not measured" without any frontier among the runs. ``predicted`` curves
    (``infer-prof estimate``'s) are drawn dashed beside the measured ones, in the colour of
    the same GPU's measured curve, and left out of the table."""
    parts = ['<section id="frontier"><h2>Cost-interactivity frontier</h2>']
    curves = [c for c in curves_from_results([(r.source, r.result) for r in runs])
              if sum(p.interactivity is not None for p in c.points) >= 2]
    predicted = [c for c in predicted if sum(p.interactivity is not None for p in c.points) >= 2]
    if predicted:
        parts.append(
            '<p class="note">Dashed: frontiers predicted by <code>infer-prof estimate</code> '
            "from spec sheets and fitted factors, not measured.</p>")
    if not curves and not predicted:
        parts.append(not_measured(
            "no frontier among these results",
            "a frontier is a run --frontier result, or two or more load points of one "
            "configuration with a measured TPOT"))
        return "".join(parts) + "</section>"
    t = _target(runs, target)
    vlines = [(t, f"target {t:g} tok/s/user")] if t is not None else []
    parts.append(
        '<p class="note">Each curve is one GPU and configuration: its Pareto front (points no '
        "other point beats on both axes, filled) joined by a monotone (Steffen) curve that never "
        "overshoots its points and is never extended past them; rings are measured points off "
        "the front. Throughput and cost count the GPUs the engine used.</p>")
    charts = [
        line_chart("frontier_throughput", "Throughput per GPU vs interactivity",
                   _series(curves, cost=False, predicted=predicted), Axis(X_LABEL),
                   Axis("total tokens/s per GPU", zero=True), marks=Marks(vlines=vlines)),
    ]
    priced = _series(curves, cost=True, predicted=predicted)
    if priced:
        charts.append(line_chart("frontier_cost", "$ per 1M output tokens vs interactivity",
                                 priced, Axis(X_LABEL),
                                 Axis("USD per 1M output tokens", zero=True),
                                 marks=Marks(vlines=vlines)))
    plots.extend(charts)
    parts.append('<div class="plots">' + "".join(figure(p) for p in charts) + "</div>")
    if not priced:
        parts.append(not_measured("$ per 1M tokens", "no run has a price per GPU-hour"))
    if t is not None and curves:
        parts.append(_table(curves, t))
    return "".join(parts) + "</section>"
