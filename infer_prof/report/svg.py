"""SVG drawing primitives for the report's charts: series and axis specs, the canvas, number
formatting, tick choice and value-to-pixel scales.

No plotting library: a chart is a string of SVG built from its data (:mod:`infer_prof.report.plots`
draws the charts from these pieces). Honesty rules the axes: every axis is labelled with its unit,
throughput, cost and counts start their value axis at 0 (``zero=True``), latency axes span the data.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

# Tableau 10: distinguishable, and readable on white.
PALETTE: tuple[str, ...] = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
DASHES: tuple[str | None, ...] = (None, "6 3", "2 3", "8 3 2 3")
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
CHAR_W = 0.6  # average glyph width / font size for the sans font, for layout estimates

Number = float | int


@dataclass(frozen=True)
class Series:
    """One line of a chart. ``x`` and ``y`` have the same length; ``None`` marks a gap."""

    name: str
    x: Sequence[Number | None]
    y: Sequence[Number | None]
    color: str | None = None  # None: taken from PALETTE by position
    dashed: bool = False
    markers: bool = False  # a dot (with a hover title) at every point
    line: bool = True  # False: the points alone, no line between them (a scatter)
    hollow: bool = False  # markers as rings (e.g. measured points off a Pareto front)


@dataclass(frozen=True)
class Axis:
    """An axis: ``label`` names the quantity and its unit, e.g. ``"power (W)"``."""

    label: str
    log: bool = False
    zero: bool = False  # include 0 in the range (quantities whose size matters)
    lo: float | None = None  # fixed bounds, or None to fit the data
    hi: float | None = None
    ticks: tuple[float, ...] | None = None  # explicit tick values (e.g. the sweep's levels)
    integer: bool = False  # counts: ticks at whole numbers only


@dataclass(frozen=True)
class Marks:
    """What a line chart draws besides its data: ``band`` a shaded x interval with a label (e.g.
    the measured window); ``hlines`` dashed horizontal reference lines with labels (e.g. p50,
    p99 on a CDF); ``vlines`` dashed vertical ones (e.g. a target interactivity), kept in view;
    ``note`` a line of small text under the title (e.g. what the axis leaves out)."""

    band: tuple[float, float, str] | None = None
    hlines: Sequence[tuple[float, str]] = ()
    vlines: Sequence[tuple[float, str]] = ()
    note: str | None = None


@dataclass(frozen=True)
class Plot:
    """A rendered chart: ``name`` is file-name safe and unique within a report."""

    name: str
    title: str
    svg: str
    width: int
    height: int


@dataclass
class Canvas:
    """An SVG drawing being built: its pixel size and the element strings added so far."""

    width: int
    height: int
    parts: list[str] = field(default_factory=list)

    def add(self, s: str) -> None:
        """Append an SVG element string."""
        self.parts.append(s)

    def text(
        self,
        x: float,
        y: float,
        s: str,
        size: int = 11,
        anchor: str = "start",
        color: str = "#333",
        extra: str = "",
        hover: str | None = None,
    ) -> None:
        """Add escaped text ``s`` at (x, y) px; ``hover``: a tooltip (SVG ``<title>``)."""
        tip = f"<title>{html.escape(hover)}</title>" if hover else ""
        self.add(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{color}" font-weight="normal"{extra}>{tip}{html.escape(s)}</text>'
        )

    def title(self, s: str) -> None:
        """Add the chart's title ``s`` at its top left, 14 px bold."""
        self.add(
            '<text x="12.0" y="20.0" font-size="14" text-anchor="start" fill="#222" '
            f'font-weight="bold">{html.escape(s)}</text>'
        )

    def svg(self, name: str, title: str) -> str:
        """The finished ``<svg>`` element on a white background, labelled ``title``."""
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-plot="{html.escape(name)}" '
            f'width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" font-family="{FONT}" role="img" '
            f'aria-label="{html.escape(title)}">'
            f'<rect width="100%" height="100%" fill="#ffffff"/>' + "".join(self.parts) + "</svg>"
        )


# --------------------------------------------------------------------------- numbers and ticks


def fmt_number(v: float | None) -> str:
    """A value for people: 3 significant figures, thousands separated; ``None`` -> "not measured".

    ``fmt_number(1234.5) == "1,234"``, ``fmt_number(12.345) == "12.3"``,
    ``fmt_number(0.01234) == "0.0123"``.
    """
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "not measured"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a == 0:
        return "0"
    return f"{v:.3g}"


def nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 x 10^k apart) covering ``[lo, hi]``.

    The first tick is <= lo and the last >= hi, so the ticks are the axis range.
    ``nice_ticks(0, 97) == [0, 20, 40, 60, 80, 100]``.
    """
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"tick range must be finite, got {lo}..{hi}")
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(1, target)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step + 1e-9) * step
    ticks = []
    k = 0
    while True:
        t = first + k * step
        ticks.append(round(t, 12))
        if t >= hi - 1e-9 * step:
            break
        k += 1
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    """Decade ticks (with 2 and 5 between when the range spans few decades), covering
    ``[lo, hi]``, both > 0."""
    if lo <= 0 or hi <= 0:
        raise ValueError("a log axis needs positive bounds")
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if b == a:
        b = a + 1
    mults = (1, 2, 5) if b - a <= 3 else (1,)
    ticks = [m * 10.0**e for e in range(a, b + 1) for m in mults]
    ticks = [t for t in ticks if t <= 10.0**b]
    lo_t = max(t for t in ticks if t <= lo)
    hi_t = min(t for t in ticks if t >= hi)
    return [t for t in ticks if lo_t <= t <= hi_t]


def tick_label(v: float, step: float, log: bool) -> str:
    """A tick value as printed on an axis: as many decimals as ``step`` needs, ``k`` for
    thousands from 10,000; on a log axis ``%g`` (exponent form outside 1e-3..1e5)."""
    if log:
        return f"{v:g}" if (v < 1e5 and v >= 1e-3) else f"{v:.0e}"
    if v == 0:
        return "0"
    if abs(v) >= 10000:
        return f"{v / 1000:g}k"
    decimals = 0
    while decimals < 6 and abs(step * 10**decimals - round(step * 10**decimals)) > 1e-6:
        decimals += 1
    return f"{v:,.{decimals}f}"


def text_w(s: str, size: int) -> float:
    """Estimated width (px) of ``s`` at font ``size`` (px), for layout."""
    return len(s) * size * CHAR_W


@dataclass(frozen=True)
class Scale:
    """Maps a value in ``[lo, hi]`` to a pixel in ``[p0, p1]`` (linear, or linear in log10)."""

    lo: float
    hi: float
    p0: float  # pixel of lo
    p1: float  # pixel of hi
    log: bool
    ticks: tuple[float, ...]

    def __call__(self, v: float) -> float:
        """The pixel of value ``v``."""
        if self.log:
            a, b, x = math.log10(self.lo), math.log10(self.hi), math.log10(v)
        else:
            a, b, x = self.lo, self.hi, v
        return self.p0 + (x - a) / (b - a) * (self.p1 - self.p0)

    def shows(self, v: float | None) -> bool:
        """Whether ``v`` can be drawn on this scale (finite; > 0 on a log scale)."""
        return v is not None and math.isfinite(v) and (not self.log or v > 0)


def fit_axis(axis: Axis, values: list[float]) -> tuple[float, float, list[float], bool]:
    """(lo, hi, ticks, log) for an axis over ``values`` (finite; may be empty)."""
    log = axis.log
    vals = [v for v in values if not log or v > 0]
    if not vals:
        log = False
        vals = [v for v in values] or [0.0, 1.0]
    lo = axis.lo if axis.lo is not None else min(vals)
    hi = axis.hi if axis.hi is not None else max(vals)
    if axis.ticks and len(axis.ticks) > 1 and (not log or min(axis.ticks) > 0):
        ticks = sorted(axis.ticks)
        lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
        if lo == hi:
            hi = lo + 1.0
        return lo, hi, ticks, log
    if log:
        ticks = log_ticks(lo, hi)
        return ticks[0], ticks[-1], ticks, True
    if axis.zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    ticks = nice_ticks(lo, hi)
    if axis.integer and tick_step(ticks) < 1:
        ticks = [float(v) for v in range(math.floor(lo), math.ceil(hi) + 1)]
        if len(ticks) < 2:
            ticks.append(ticks[0] + 1.0)
    if axis.lo is not None:
        ticks = [t for t in ticks if t >= axis.lo]
        ticks = ticks if ticks and ticks[0] == axis.lo else [axis.lo, *ticks]
    if axis.hi is not None:
        ticks = [t for t in ticks if t <= axis.hi]
        ticks = ticks if ticks and ticks[-1] == axis.hi else [*ticks, axis.hi]
    return ticks[0], ticks[-1], ticks, False


def tick_step(ticks: Sequence[float]) -> float:
    """The distance between consecutive ``ticks`` (1.0 for fewer than two)."""
    return (ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0


def safe_name(text: str) -> str:
    """A file-name-safe form of ``text`` (letters, digits, ``.-_``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:120] or "plot"
