"""Small pure-Python charts as inline SVG, and their PNG rendering with headless Chromium.

No plotting library: a chart is a string of SVG built from its data, so the HTML report carries
it inline and needs nothing from the network. Honesty rules the drawing:

- every axis is labelled with its unit (the caller names it, e.g. ``"TTFT (ms)"``);
- a ``None`` value is never drawn as 0: a line breaks at it, a lone point between two gaps is
  drawn as a dot, and a bar with no value reads "not measured";
- a chart with nothing to draw says "not measured" in its plot area;
- throughput, cost and counts start their value axis at 0 (``zero=True``); latency axes span the
  data.

PNG: :func:`render_pngs` renders each SVG in one headless Chromium (Debian package
``chromium``) driven over the DevTools protocol (:class:`DevTools`, standard library only), so
the PNG is the same drawing as the report's, at 2x pixel density.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import json
import math
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

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
class Plot:
    """A rendered chart: ``name`` is file-name safe and unique within a report."""

    name: str
    title: str
    svg: str
    width: int
    height: int


@dataclass
class _Canvas:
    width: int
    height: int
    parts: list[str] = field(default_factory=list)

    def add(self, s: str) -> None:
        self.parts.append(s)

    def text(
        self,
        x: float,
        y: float,
        s: str,
        size: int = 11,
        anchor: str = "start",
        color: str = "#333",
        weight: str = "normal",
        extra: str = "",
        hover: str | None = None,
    ) -> None:
        tip = f"<title>{html.escape(hover)}</title>" if hover else ""
        self.add(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{color}" font-weight="{weight}"{extra}>{tip}{html.escape(s)}</text>'
        )

    def svg(self, name: str, title: str) -> str:
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


def _tick_label(v: float, step: float, log: bool) -> str:
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


def _text_w(s: str, size: int) -> float:
    return len(s) * size * CHAR_W


@dataclass(frozen=True)
class _Scale:
    lo: float
    hi: float
    p0: float  # pixel of lo
    p1: float  # pixel of hi
    log: bool
    ticks: tuple[float, ...]

    def __call__(self, v: float) -> float:
        if self.log:
            a, b, x = math.log10(self.lo), math.log10(self.hi), math.log10(v)
        else:
            a, b, x = self.lo, self.hi, v
        return self.p0 + (x - a) / (b - a) * (self.p1 - self.p0)

    def shows(self, v: float | None) -> bool:
        return v is not None and math.isfinite(v) and (not self.log or v > 0)


def _fit_axis(axis: Axis, values: list[float]) -> tuple[float, float, list[float], bool]:
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
    if axis.integer and _step(ticks) < 1:
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


def _step(ticks: Sequence[float]) -> float:
    return (ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0


# --------------------------------------------------------------------------- line charts


def _style(i: int, s: Series) -> tuple[str, str | None]:
    color = s.color or PALETTE[i % len(PALETTE)]
    dash = "6 3" if s.dashed else DASHES[(i // len(PALETTE)) % len(DASHES)]
    return color, dash


def _segments(s: Series, xs: _Scale, ys: _Scale) -> list[list[tuple[float, float, float, float]]]:
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
        w = 28 + _text_w(n, size) + 16
        if rows[-1] and used + w > width:
            rows.append([])
            used = 0.0
        rows[-1].append(i)
        used += w
    return rows if rows[0] else []


def line_chart(
    name: str,
    title: str,
    series: Sequence[Series],
    x: Axis,
    y: Axis,
    *,
    width: int = 720,
    height: int = 330,
    band: tuple[float, float, str] | None = None,
    hlines: Sequence[tuple[float, str]] = (),
    note: str | None = None,
) -> Plot:
    """A line chart of ``series`` (gaps where values are None).

    ``band``: a shaded x interval with a label (e.g. the measured window); ``hlines``: dashed
    horizontal reference lines with labels (e.g. p50, p99 on a CDF); ``note``: a line of small
    text under the title (e.g. what the axis leaves out).
    """
    xs_all = [float(v) for s in series for v in s.x if v is not None and math.isfinite(v)]
    ys_all = [float(v) for s in series for v in s.y if v is not None and math.isfinite(v)]
    if ys_all:  # reference lines (a power limit, p99) stay in view
        ys_all += [float(v) for v, _ in hlines if math.isfinite(v)]
    drawable = any(
        a is not None and b is not None for s in series for a, b in zip(s.x, s.y, strict=True)
    )
    xlo, xhi, xt, xlog = _fit_axis(x, xs_all)
    ylo, yhi, yt, ylog = _fit_axis(y, ys_all)
    ystep = _step(yt)
    ylabels = [_tick_label(t, ystep, ylog) for t in yt]
    names = [s.name for s in series]
    left = 30 + max(_text_w(lbl, 11) for lbl in ylabels) + 8
    right = 24
    legend_w = width - left - right
    rows = _legend_rows(names, legend_w) if len(series) > 1 or (series and series[0].name) else []
    top = 34 + (16 if note else 0)
    bottom = 50 + (8 if rows else 0) + 18 * len(rows)
    c = _Canvas(width, height + 18 * len(rows) + (16 if note else 0))
    ph0, ph1 = c.height - bottom, top
    xs = _Scale(xlo, xhi, left, width - right, xlog, tuple(xt))
    ys = _Scale(ylo, yhi, ph0, ph1, ylog, tuple(yt))
    c.text(12, 20, title, size=14, weight="bold", color="#222")
    if note:
        c.text(12, 38, note, size=11, color="#666")
    if band is not None and xs.shows(band[0]) and xs.shows(band[1]):
        b0 = min(max(xs(band[0]), left), width - right)
        b1 = min(max(xs(band[1]), left), width - right)
        if b1 > b0:
            c.add(
                f'<rect class="band" x="{b0:.1f}" y="{ph1:.1f}" width="{b1 - b0:.1f}" '
                f'height="{ph0 - ph1:.1f}" fill="#eef3f8"/>'
            )
            c.text((b0 + b1) / 2, ph1 + 12, band[2], size=10, anchor="middle", color="#6b7f95")
    # grid and ticks
    for t in yt:
        py = ys(t)
        c.add(
            f'<line x1="{left:.1f}" x2="{width - right:.1f}" y1="{py:.1f}" y2="{py:.1f}" '
            'stroke="#e6e6e6"/>'
        )
        c.text(left - 6, py + 4, _tick_label(t, ystep, ylog), anchor="end", color="#555")
    xstep = _step(xt)
    for t in xt:
        px = xs(t)
        c.add(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{ph1:.1f}" y2="{ph0:.1f}" stroke="#f0f0f0"/>')
        c.text(px, ph0 + 15, _tick_label(t, xstep, xlog), anchor="middle", color="#555")
    c.add(
        f'<line x1="{left:.1f}" x2="{width - right:.1f}" y1="{ph0:.1f}" y2="{ph0:.1f}" '
        'stroke="#888"/>'
        f'<line x1="{left:.1f}" x2="{left:.1f}" y1="{ph1:.1f}" y2="{ph0:.1f}" stroke="#888"/>'
    )
    c.text(
        (left + width - right) / 2,
        ph0 + 33,
        x.label + (" (log scale)" if xlog else ""),
        anchor="middle",
        size=12,
        color="#333",
    )
    ymid = (ph0 + ph1) / 2
    c.text(
        14,
        ymid,
        y.label + (" (log scale)" if ylog else ""),
        anchor="middle",
        size=12,
        color="#333",
        extra=f' transform="rotate(-90 14 {ymid:.1f})"',
    )
    for value, label in hlines:
        if ys.shows(value) and ylo <= value <= yhi:
            py = ys(value)
            c.add(
                f'<line x1="{left:.1f}" x2="{width - right:.1f}" y1="{py:.1f}" y2="{py:.1f}" '
                'stroke="#999" stroke-dasharray="3 3"/>'
            )
            c.text(width - right - 2, py - 3, label, anchor="end", size=10, color="#777")
    # data
    for i, s in enumerate(series):
        color, dash = _style(i, s)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        c.add(f'<g class="series" data-series="{html.escape(s.name)}">')
        for seg in _segments(s, xs, ys):
            if len(seg) == 1 or s.markers:
                for px, py, vx, vy in seg:
                    c.add(
                        f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}">'
                        f"<title>{html.escape(s.name)}: {fmt_number(vx)}, "
                        f"{fmt_number(vy)}</title></circle>"
                    )
            if len(seg) > 1:
                pts = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in seg)
                c.add(
                    f'<polyline points="{pts}" fill="none" stroke="{color}" '
                    f'stroke-width="1.8" stroke-linejoin="round"{dash_attr}/>'
                )
        c.add("</g>")
    if not drawable:
        c.text(
            (left + width - right) / 2,
            (ph0 + ph1) / 2,
            "not measured",
            anchor="middle",
            size=14,
            color="#999",
            extra=' class="not-measured"',
        )
    # legend
    for r, row in enumerate(rows):
        lx = left
        ly = c.height - 18 * len(rows) + 18 * r + 4
        for i in row:
            color, dash = _style(i, series[i])
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            c.add(
                f'<line x1="{lx:.1f}" x2="{lx + 22:.1f}" y1="{ly - 4:.1f}" y2="{ly - 4:.1f}" '
                f'stroke="{color}" stroke-width="2.5"{dash_attr}/>'
            )
            c.text(lx + 28, ly, names[i], color="#333")
            lx += 28 + _text_w(names[i], 11) + 16
    return Plot(name, title, c.svg(name, title), c.width, c.height)


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
    label_w = min(320.0, max((_text_w(lbl, 11) for lbl in labels), default=40.0) + 16)
    left, right = label_w + 8, 70
    top = 34 + (16 if note else 0)
    row_h = 24
    bottom = 46
    height = int(top + row_h * max(1, len(labels)) + bottom)
    c = _Canvas(width, height)
    c.text(12, 20, title, size=14, weight="bold", color="#222")
    if note:
        c.text(12, 38, note, size=11, color="#666")
    vals = [float(v) for v in values if v is not None and math.isfinite(v)]
    lo, hi, ticks, _ = _fit_axis(Axis(value_axis.label, zero=True), vals)
    ph0 = height - bottom
    xs = _Scale(lo, hi, left, width - right, False, tuple(ticks))
    step = _step(ticks)
    for t in ticks:
        px = xs(t)
        c.add(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top:.1f}" y2="{ph0:.1f}" stroke="#e6e6e6"/>')
        c.text(px, ph0 + 15, _tick_label(t, step, False), anchor="middle", color="#555")
    c.text((left + width - right) / 2, ph0 + 33, value_axis.label, anchor="middle", size=12)
    for i, (lbl, v) in enumerate(zip(labels, values, strict=True)):
        y0 = top + i * row_h
        shown = (
            lbl if _text_w(lbl, 11) <= label_w - 8 else lbl[: int((label_w - 8) / 6.6) - 1] + "…"
        )
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


# --------------------------------------------------------------------------- PNG via Chromium


class PngError(RuntimeError):
    """PNG rendering failed (no Chromium, or Chromium failed)."""


CHROMIUM_INSTALL_HINT = "install Debian's Chromium: apt-get update && apt-get install -y chromium"
CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def find_chromium() -> str | None:
    """Path of a Chromium binary: /usr/bin/chromium, else chromium/chromium-browser on PATH."""
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


def safe_name(text: str) -> str:
    """A file-name-safe form of ``text`` (letters, digits, ``.-_``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:120] or "plot"


class DevTools:
    """A minimal Chrome DevTools protocol client: one WebSocket (RFC 6455), JSON commands.

    Standard library only. Events that arrive while waiting for a reply are kept in
    ``events``, in order.
    """

    _GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    def __init__(self, ws_url: str, timeout_s: float = 60.0) -> None:
        u = urlparse(ws_url)
        if u.hostname is None or u.port is None:
            raise PngError(f"bad DevTools URL {ws_url!r}")
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout_s)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise PngError("DevTools closed the connection during the handshake")
            head += chunk
        head, self._buf = head.split(b"\r\n\r\n", 1)
        accept = base64.b64encode(hashlib.sha1((key + self._GUID).encode()).digest())
        if b" 101 " not in head.split(b"\r\n")[0] or accept not in head:
            raise PngError(f"DevTools refused the WebSocket: {head[:200]!r}")
        self.events: list[dict[str, Any]] = []
        self._id = 0

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise PngError("DevTools closed the connection")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _send(self, payload: bytes, opcode: int = 0x1) -> None:
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        mask = os.urandom(4)
        # client frames are masked: XOR with the 4-byte key repeated (done as one big integer)
        key = (mask * (n // 4 + 1))[:n]
        body = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
        self.sock.sendall(head + mask + body)

    def receive(self) -> dict[str, Any]:
        """The next message (a reply or an event), answering pings on the way."""
        data = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._read(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._read(8))
            payload = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 0x9:
                self._send(payload, 0xA)
                continue
            if opcode == 0x8:
                raise PngError("DevTools closed the WebSocket")
            data += payload
            if b0 & 0x80:
                message: dict[str, Any] = json.loads(data)
                return message

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command and return its result (events meanwhile go to ``events``)."""
        self._id += 1
        self._send(json.dumps({"id": self._id, "method": method, "params": params}).encode())
        while True:
            msg = self.receive()
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise PngError(f"DevTools {method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result
            self.events.append(msg)

    def wait_for(self, method: str) -> dict[str, Any]:
        """The first event named ``method`` (already received, or the next to arrive)."""
        for e in self.events:
            if e.get("method") == method:
                return e
        while True:
            msg = self.receive()
            self.events.append(msg)
            if msg.get("method") == method:
                return msg

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def chromium_devtools(
    chromium: str | None = None, extra_flags: Sequence[str] = (), timeout_s: float = 60.0
) -> Iterator[int]:
    """Run headless Chromium (:data:`CHROMIUM_FLAGS`, a throw-away profile) with remote
    debugging on a free local port; yields the port, and stops Chromium on exit."""
    binary = chromium or find_chromium()
    if binary is None:
        raise PngError(f"Chromium was not found; {CHROMIUM_INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="infer-prof-chromium-") as tmp:
        profile = Path(tmp) / "profile"
        try:
            proc = subprocess.Popen(
                [
                    binary,
                    *CHROMIUM_FLAGS,
                    *extra_flags,
                    f"--user-data-dir={profile}",
                    "--remote-debugging-port=0",
                    "about:blank",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise PngError(
                f"cannot start Chromium {binary}: {exc}; {CHROMIUM_INSTALL_HINT}"
            ) from None
        try:
            port_file = profile / "DevToolsActivePort"
            deadline = time.monotonic() + timeout_s
            while not (port_file.exists() and port_file.read_text().strip()):
                if proc.poll() is not None:
                    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                    tail = "\n".join(err.strip().splitlines()[-5:])
                    raise PngError(f"Chromium exited with {proc.returncode}: {tail}")
                if time.monotonic() > deadline:
                    raise PngError(f"Chromium opened no DevTools port in {timeout_s:.0f} s")
                time.sleep(0.05)
            yield int(port_file.read_text().split()[0])
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stderr:
                proc.stderr.close()


def open_page(port: int, timeout_s: float = 60.0) -> DevTools:
    """A DevTools connection to a new blank tab of the Chromium on ``port``."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        target = json.loads(resp.read())
    return DevTools(target["webSocketDebuggerUrl"], timeout_s)


def render_pngs(
    plots: Sequence[Plot],
    out_dir: str | Path,
    *,
    chromium: str | None = None,
    scale: int = 2,
    timeout_s: float = 60.0,
) -> list[Path]:
    """Write ``<out_dir>/<plot.name>.png`` for each plot, rendered by one headless Chromium at
    ``scale`` x pixel density (a 720 x 330 chart becomes 1440 x 660 pixels); returns the paths.

    Each SVG is put alone in a blank page whose viewport is the chart's size, and the page is
    captured (DevTools ``Page.captureScreenshot``): the PNG is the report's drawing exactly.
    Raises :class:`PngError` when no Chromium is found (with the install command) or it fails.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    with chromium_devtools(chromium, timeout_s=timeout_s) as port:
        page = open_page(port, timeout_s)
        try:
            page.call(
                "Runtime.evaluate",
                expression="document.documentElement.style.background='#fff';"
                "document.body.style.margin='0';",
            )
            for plot in plots:
                page.call(
                    "Emulation.setDeviceMetricsOverride",
                    width=plot.width,
                    height=plot.height,
                    deviceScaleFactor=scale,
                    mobile=False,
                )
                page.call(
                    "Runtime.evaluate",
                    expression=f"document.body.innerHTML = {json.dumps(plot.svg)};",
                )
                shot = page.call("Page.captureScreenshot", format="png")
                path = out / f"{safe_name(plot.name)}.png"
                path.write_bytes(base64.b64decode(shot["data"]))
                paths.append(path)
        finally:
            page.close()
    return paths
