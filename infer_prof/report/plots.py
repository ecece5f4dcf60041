"""The report's charts as inline SVG: line charts (with gaps), empirical CDF points, bar charts.

A chart is a string of SVG built from its data (primitives in :mod:`infer_prof.report.svg`), so
the HTML report carries it inline and needs nothing from the network. Honesty rules the drawing:

- every axis is labelled with its unit (the caller names it, e.g. ``"TTFT (ms)"``);
- a ``None`` value is never drawn as 0: a line breaks at it, a lone point between two gaps is
  drawn as a dot, and a bar with no value reads "not measured";
- a chart with nothing to draw says "not measured" in its plot area;
- throughput, cost and counts start their value axis at 0 (``zero=True``); latency axes span the
  data.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from infer_prof.report.svg import (
    DASHES,
    PALETTE,
    Axis,
    Canvas,
    Marks,
    Plot,
    Scale,
    Series,
    fit_axis,
    fmt_number,
    text_w,
    tick_label,
    tick_step,
)

# --------------------------------------------------------------------------- line charts


def _style(i: int, s: Series) -> tuple[str, str | None]:
    color = s.color or PALETTE[i % len(PALETTE)]
    dash = "6 3" if s.dashed else DASHES[(i // len(PALETTE)) % len(DASHES)]
    return color, dash


def _segments(s: Series, xs: Scale, ys: Scale) -> list[list[tuple[float, float, float, float]]]:
    """Runs of consecutive drawable points: (px, py, x, y); a None or off-axis value breaks."""
    out: list[list[tuple[float, float, float, float]]] = []
    cur: list[tuple[float, float, float, float]] = []
    for x, y in zip(s.x, s.y, strict=True):
        if x is not None and y is not None and xs.shows(float(x)) and ys.shows(float(y)):
            cur.append((xs(float(x)), ys(float(y)), float(x), float(y)))
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def _legend_rows(names: list[str], width: float, size: int = 11) -> list[list[int]]:
    rows: list[list[int]] = [[]]
    used = 0.0
    for i, n in enumerate(names):
        w = 28 + text_w(n, size) + 16
        if rows[-1] and used + w > width:
            rows.append([])
            used = 0.0
        rows[-1].append(i)
        used += w
    return rows if rows[0] else []


@dataclass(frozen=True)
class _Frame:
    """A line chart's plot area: the canvas, the plot's left and right x and its bottom (``ph0``)
    and top (``ph1``) y in px, the scales and their ticks, and the legend's rows."""

    c: Canvas
    left: float
    right: float
    ph0: float
    ph1: float
    xs: Scale
    ys: Scale
    xlog: bool
    ylog: bool
    rows: list[list[int]]


def line_chart(
    name: str,
    title: str,
    series: Sequence[Series],
    x: Axis,
    y: Axis,
    *,
    width: int = 720,
    height: int = 330,
    marks: Marks = Marks(),
) -> Plot:
    """A line chart of ``series`` (gaps where values are None), with the band, reference lines
    and note of ``marks``."""
    f = _frame(series, x, y, width, height, marks)
    f.c.title(title)
    if marks.note:
        f.c.text(12, 38, marks.note, size=11, color="#666")
    if marks.band is not None:
        _band(f, marks.band)
    _grid(f, x, y)
    _reference_lines(f, marks)
    for i, s in enumerate(series):
        _draw_series(f, i, s)
    drawable = any(
        a is not None and b is not None for s in series for a, b in zip(s.x, s.y, strict=True)
    )
    if not drawable:
        f.c.text(
            (f.left + f.right) / 2,
            (f.ph0 + f.ph1) / 2,
            "not measured",
            anchor="middle",
            size=14,
            color="#999",
            extra=' class="not-measured"',
        )
    _legend(f, series)
    return Plot(name, title, f.c.svg(name, title), f.c.width, f.c.height)


def _frame(series: Sequence[Series], x: Axis, y: Axis, width: int, height: int,
           marks: Marks) -> _Frame:
    """Fit both axes to the data (and the reference lines, kept in view), and size the canvas:
    the y tick labels set the left margin, the legend's rows and the note its height."""
    xs_all = [float(v) for s in series for v in s.x if v is not None and math.isfinite(v)]
    ys_all = [float(v) for s in series for v in s.y if v is not None and math.isfinite(v)]
    if ys_all:  # reference lines (a power limit, p99) stay in view
        ys_all += [float(v) for v, _ in marks.hlines if math.isfinite(v)]
    if xs_all:
        xs_all += [float(v) for v, _ in marks.vlines if math.isfinite(v)]
    xlo, xhi, xt, xlog = fit_axis(x, xs_all)
    ylo, yhi, yt, ylog = fit_axis(y, ys_all)
    ystep = tick_step(yt)
    ylabels = [tick_label(t, ystep, ylog) for t in yt]
    names = [s.name for s in series]
    left = 30 + max(text_w(lbl, 11) for lbl in ylabels) + 8
    right = 24
    legend_w = width - left - right
    rows = _legend_rows(names, legend_w) if len(series) > 1 or (series and series[0].name) else []
    note = marks.note
    top = 34 + (16 if note else 0)
    bottom = 50 + (8 if rows else 0) + 18 * len(rows)
    c = Canvas(width, height + 18 * len(rows) + (16 if note else 0))
    ph0, ph1 = c.height - bottom, top
    return _Frame(
        c=c, left=left, right=width - right, ph0=ph0, ph1=ph1,
        xs=Scale(xlo, xhi, left, width - right, xlog, tuple(xt)),
        ys=Scale(ylo, yhi, ph0, ph1, ylog, tuple(yt)),
        xlog=xlog, ylog=ylog, rows=rows,
    )


def _band(f: _Frame, band: tuple[float, float, str]) -> None:
    """The shaded x interval, clipped to the plot, with its label at the top."""
    xs, c = f.xs, f.c
    if not (xs.shows(band[0]) and xs.shows(band[1])):
        return
    b0 = min(max(xs(band[0]), f.left), f.right)
    b1 = min(max(xs(band[1]), f.left), f.right)
    if b1 > b0:
        c.add(
            f'<rect class="band" x="{b0:.1f}" y="{f.ph1:.1f}" width="{b1 - b0:.1f}" '
            f'height="{f.ph0 - f.ph1:.1f}" fill="#eef3f8"/>'
        )
        c.text((b0 + b1) / 2, f.ph1 + 12, band[2], size=10, anchor="middle", color="#6b7f95")


def _grid(f: _Frame, x: Axis, y: Axis) -> None:
    """Grid lines and tick labels of both axes, the axis lines, and the axis labels."""
    c, left, right, ph0, ph1 = f.c, f.left, f.right, f.ph0, f.ph1
    ystep = tick_step(f.ys.ticks)
    for t in f.ys.ticks:
        py = f.ys(t)
        c.add(
            f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{py:.1f}" y2="{py:.1f}" '
            'stroke="#e6e6e6"/>'
        )
        c.text(left - 6, py + 4, tick_label(t, ystep, f.ylog), anchor="end", color="#555")
    xstep = tick_step(f.xs.ticks)
    for t in f.xs.ticks:
        px = f.xs(t)
        c.add(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{ph1:.1f}" y2="{ph0:.1f}" stroke="#f0f0f0"/>')
        c.text(px, ph0 + 15, tick_label(t, xstep, f.xlog), anchor="middle", color="#555")
    c.add(
        f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{ph0:.1f}" y2="{ph0:.1f}" '
        'stroke="#888"/>'
        f'<line x1="{left:.1f}" x2="{left:.1f}" y1="{ph1:.1f}" y2="{ph0:.1f}" stroke="#888"/>'
    )
    c.text(
        (left + right) / 2,
        ph0 + 33,
        x.label + (" (log scale)" if f.xlog else ""),
        anchor="middle",
        size=12,
        color="#333",
    )
    ymid = (ph0 + ph1) / 2
    c.text(
        14,
        ymid,
        y.label + (" (log scale)" if f.ylog else ""),
        anchor="middle",
        size=12,
        color="#333",
        extra=f' transform="rotate(-90 14 {ymid:.1f})"',
    )


def _reference_lines(f: _Frame, marks: Marks) -> None:
    """The dashed horizontal and vertical reference lines in view, with their labels."""
    c = f.c
    for value, label in marks.hlines:
        if f.ys.shows(value) and f.ys.lo <= value <= f.ys.hi:
            py = f.ys(value)
            c.add(
                f'<line x1="{f.left:.1f}" x2="{f.right:.1f}" y1="{py:.1f}" y2="{py:.1f}" '
                'stroke="#999" stroke-dasharray="3 3"/>'
            )
            c.text(f.right - 2, py - 3, label, anchor="end", size=10, color="#777")
    for value, label in marks.vlines:
        if f.xs.shows(value) and f.xs.lo <= value <= f.xs.hi:
            px = f.xs(value)
            c.add(
                f'<line class="vline" x1="{px:.1f}" x2="{px:.1f}" y1="{f.ph1:.1f}" '
                f'y2="{f.ph0:.1f}" stroke="#555" stroke-dasharray="5 4"/>'
            )
            c.text(px + 4, f.ph1 + 12, label, size=10, color="#555", extra=' class="vline-label"')


def _draw_series(f: _Frame, i: int, s: Series) -> None:
    """One series: its lines between consecutive points, and dots where asked for or alone."""
    c = f.c
    color, dash = _style(i, s)
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    c.add(f'<g class="series" data-series="{html.escape(s.name)}">')
    fill = f'fill="#ffffff" stroke="{color}" stroke-width="1.5"' if s.hollow \
        else f'fill="{color}"'
    for seg in _segments(s, f.xs, f.ys):
        if len(seg) == 1 or s.markers or not s.line:
            for px, py, vx, vy in seg:
                c.add(
                    f'<circle cx="{px:.1f}" cy="{py:.1f}" r="{3.5 if s.hollow else 3}" '
                    f"{fill}><title>{html.escape(s.name)}: {fmt_number(vx)}, "
                    f"{fmt_number(vy)}</title></circle>"
                )
        if len(seg) > 1 and s.line:
            pts = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in seg)
            c.add(
                f'<polyline points="{pts}" fill="none" stroke="{color}" '
                f'stroke-width="1.8" stroke-linejoin="round"{dash_attr}/>'
            )
    c.add("</g>")


def _legend(f: _Frame, series: Sequence[Series]) -> None:
    """The legend under the plot: each series' line (or marker, for a scatter) and name."""
    c, rows = f.c, f.rows
    for r, row in enumerate(rows):
        lx = f.left
        ly = c.height - 18 * len(rows) + 18 * r + 4
        for i in row:
            color, dash = _style(i, series[i])
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            if series[i].line:
                c.add(
                    f'<line x1="{lx:.1f}" x2="{lx + 22:.1f}" y1="{ly - 4:.1f}" '
                    f'y2="{ly - 4:.1f}" stroke="{color}" stroke-width="2.5"{dash_attr}/>'
                )
            else:  # a scatter: its marker
                fill = f'fill="#ffffff" stroke="{color}" stroke-width="1.5"' \
                    if series[i].hollow else f'fill="{color}"'
                c.add(f'<circle cx="{lx + 11:.1f}" cy="{ly - 4:.1f}" r="3.5" {fill}/>')
            name = series[i].name
            c.text(lx + 28, ly, name, color="#333")
            lx += 28 + text_w(name, 11) + 16


def cdf_points(values: Sequence[float], max_points: int = 800) -> tuple[list[float], list[float]]:
    """The empirical CDF of ``values`` as (x, cumulative percent) points, at most about
    ``max_points`` of them.

    The i-th smallest of n values (0-based) is at (i + 1) / n * 100 percent. Long inputs are
    thinned evenly in rank, but the top 1% of ranks is kept densely (up to ``max_points // 4``
    points) so the tail a p99 reader looks at is drawn from real samples; min and max are
    always kept.
    """
    xs = sorted(v for v in values if v is not None and math.isfinite(v))
    n = len(xs)
    if n == 0:
        return [], []
    if n <= max_points:
        idx = list(range(n))
    else:
        body = {round(i * (n - 1) / (max_points * 3 // 4)) for i in range(max_points * 3 // 4 + 1)}
        tail_start = int(n * 0.99)
        tail_n = n - tail_start
        k = max(1, max_points // 4)
        tail = {tail_start + round(j * (tail_n - 1) / k) for j in range(k + 1)} if tail_n else set()
        idx = sorted(body | tail | {0, n - 1})
    return [xs[i] for i in idx], [(i + 1) / n * 100.0 for i in idx]


# --------------------------------------------------------------------------- bar charts


def bar_chart(
    name: str,
    title: str,
    labels: Sequence[str],
    values: Sequence[float | None],
    value_axis: Axis,
    *,
    width: int = 720,
    colors: Sequence[str] | None = None,
    note: str | None = None,
) -> Plot:
    """Horizontal bars, one per label, from 0. A ``None`` value gets no bar but the words
    "not measured"; the value is printed at the end of each bar."""
    label_w = min(320.0, max((text_w(lbl, 11) for lbl in labels), default=40.0) + 16)
    left, right = label_w + 8, 70
    top = 34 + (16 if note else 0)
    row_h = 24
    bottom = 46
    height = int(top + row_h * max(1, len(labels)) + bottom)
    c = Canvas(width, height)
    c.title(title)
    if note:
        c.text(12, 38, note, size=11, color="#666")
    vals = [float(v) for v in values if v is not None and math.isfinite(v)]
    lo, hi, ticks, _ = fit_axis(Axis(value_axis.label, zero=True), vals)
    ph0 = height - bottom
    xs = Scale(lo, hi, left, width - right, False, tuple(ticks))
    step = tick_step(ticks)
    for t in ticks:
        px = xs(t)
        c.add(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top:.1f}" y2="{ph0:.1f}" stroke="#e6e6e6"/>')
        c.text(px, ph0 + 15, tick_label(t, step, False), anchor="middle", color="#555")
    c.text((left + width - right) / 2, ph0 + 33, value_axis.label, anchor="middle", size=12)
    for i, (lbl, v) in enumerate(zip(labels, values, strict=True)):
        y0 = top + i * row_h
        shown = lbl if text_w(lbl, 11) <= label_w - 8 else lbl[: int((label_w - 8) / 6.6) - 1] + "…"
        c.text(
            left - 8,
            y0 + row_h / 2 + 4,
            shown,
            anchor="end",
            color="#333",
            hover=lbl if shown != lbl else None,
        )
        if v is None or not math.isfinite(v):
            c.text(
                left + 6,
                y0 + row_h / 2 + 4,
                "not measured",
                color="#999",
                extra=' font-style="italic" class="not-measured"',
            )
            continue
        color = (colors[i] if colors else None) or PALETTE[0]
        x1 = xs(float(v))
        c.add(
            f'<rect class="bar" x="{left:.1f}" y="{y0 + 4:.1f}" width="{max(0.5, x1 - left):.1f}" '
            f'height="{row_h - 8}" fill="{color}"><title>{html.escape(lbl)}: '
            f"{fmt_number(v)}</title></rect>"
        )
        c.text(x1 + 4, y0 + row_h / 2 + 4, fmt_number(v), color="#333")
    c.add(f'<line x1="{left:.1f}" x2="{left:.1f}" y1="{top:.1f}" y2="{ph0:.1f}" stroke="#888"/>')
    return Plot(name, title, c.svg(name, title), width, height)
