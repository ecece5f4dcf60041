"""The cost-interactivity frontier: its axes, its Pareto front, and a value read off it.

Pure. A frontier is a set of load points of one server (one GPU type, one configuration), each
placed on two axes (issue 23; SemiAnalysis InferenceX, vLLM ``bench sweep plot_pareto``):

- **interactivity** (tokens/s/user) = 1000 / TPOT (ms): how fast one user sees tokens arrive.
  From TPOT p50 (InferenceX's choice) and, for the slower users, from TPOT p90.
- **throughput per GPU** (tokens/s/GPU) = tokens/s / GPUs the engine used (tensor x pipeline x
  data parallel), for output, input (prompt) and total (input + output) tokens.

and priced: $ per 1M tokens = $/GPU-hour / (tokens/s/GPU x 3600 / 1e6), separately for output,
input and total tokens (each divides the whole price by one kind of token; they do not add up).

The **Pareto front** is the points no other point beats on both interactivity and total
throughput per GPU. Between its points a value at a target interactivity is read with Steffen's
monotone cubic (:func:`steffen`), which never overshoots its neighbours, and never extrapolated
past the measured points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

#: Seconds per hour over tokens per million: tok/s x 3600 / 1e6 = millions of tokens per hour.
_MTOK_PER_HOUR_PER_TOK_S = 3600.0 / 1e6


@dataclass(frozen=True)
class FrontierPoint:
    """One load point on the frontier.

    ``concurrency``: closed loop, the number of streams; open loop, the requests/s offered.
    ``interactivity`` / ``interactivity_p90``: tokens/s/user from TPOT p50 / p90 (None when TPOT
    is unknown). Throughputs in tokens/s per GPU; costs in $ per 1M tokens (None without a price).
    """

    concurrency: float
    interactivity: float | None
    interactivity_p90: float | None
    output_tok_s_per_gpu: float
    input_tok_s_per_gpu: float
    total_tok_s_per_gpu: float
    usd_per_million_output_tokens: float | None
    usd_per_million_input_tokens: float | None
    usd_per_million_total_tokens: float | None
    pareto: bool = False


def interactivity(tpot_ms: float | None) -> float | None:
    """Tokens/s one user sees = 1000 / TPOT (ms); None when TPOT is unknown or not positive."""
    if tpot_ms is None or not math.isfinite(tpot_ms) or tpot_ms <= 0:
        return None
    return 1000.0 / tpot_ms


def per_gpu(tok_s: float, gpus: int) -> float:
    """Tokens/s per GPU = ``tok_s`` / ``gpus`` (``gpus`` >= 1: tensor x pipeline x data
    parallel)."""
    if gpus < 1:
        raise ValueError(f"gpus must be at least 1, got {gpus}")
    return tok_s / gpus


def usd_per_million(usd_per_gpu_hour: float | None, tok_s_per_gpu: float) -> float | None:
    """$ per 1M tokens = $/GPU-hour / (tokens/s/GPU x 3600 / 1e6).

    None when there is no price or no throughput (``tok_s_per_gpu`` <= 0): a cost that was not
    measured is null, never 0 or infinity.
    """
    if usd_per_gpu_hour is None or not tok_s_per_gpu > 0:
        return None
    return usd_per_gpu_hour / (tok_s_per_gpu * _MTOK_PER_HOUR_PER_TOK_S)


def make_point(
    concurrency: float,
    tpot_p50_ms: float | None,
    tpot_p90_ms: float | None,
    output_tok_s: float,
    input_tok_s: float,
    gpus: int,
    usd_per_gpu_hour: float | None,
) -> FrontierPoint:
    """A point from what a run measures for the whole server: TPOT p50/p90 (ms) and output and
    input tokens/s; total = output + input, each divided by ``gpus``, each priced."""
    out = per_gpu(output_tok_s, gpus)
    inp = per_gpu(input_tok_s, gpus)
    tot = out + inp
    return FrontierPoint(
        concurrency=concurrency,
        interactivity=interactivity(tpot_p50_ms),
        interactivity_p90=interactivity(tpot_p90_ms),
        output_tok_s_per_gpu=out,
        input_tok_s_per_gpu=inp,
        total_tok_s_per_gpu=tot,
        usd_per_million_output_tokens=usd_per_million(usd_per_gpu_hour, out),
        usd_per_million_input_tokens=usd_per_million(usd_per_gpu_hour, inp),
        usd_per_million_total_tokens=usd_per_million(usd_per_gpu_hour, tot),
    )


def pareto_indices(xy: Sequence[tuple[float, float]]) -> list[int]:
    """Indices (ascending) of the points no other point beats on both axes, both maximized.

    Point j dominates i iff x_j >= x_i and y_j >= y_i and (x_j > x_i or y_j > y_i). Equal points
    do not dominate each other, so both stay. O(n log n): sweep by x descending, keeping the best
    y seen at strictly greater x.
    """
    order = sorted(range(len(xy)), key=lambda i: (-xy[i][0], -xy[i][1]))
    keep: list[int] = []
    best_y_right = -math.inf  # best y among points with strictly greater x
    k = 0
    while k < len(order):
        # one group of equal x: within it only the highest y (and its equals) survive
        x = xy[order[k]][0]
        group = []
        while k < len(order) and xy[order[k]][0] == x:
            group.append(order[k])
            k += 1
        top = xy[group[0]][1]
        keep += [i for i in group if xy[i][1] == top and xy[i][1] > best_y_right]
        best_y_right = max(best_y_right, top)
    return sorted(keep)


def mark_pareto(points: Sequence[FrontierPoint]) -> list[FrontierPoint]:
    """The points, in order, with ``pareto`` set on (interactivity, total tokens/s/GPU).

    A point whose interactivity is None is never on the front (and takes no part in it).
    """
    known = [i for i, p in enumerate(points) if p.interactivity is not None]
    xy = [(float(points[i].interactivity or 0.0), points[i].total_tok_s_per_gpu) for i in known]
    front = {known[j] for j in pareto_indices(xy)}
    return [replace(p, pareto=i in front) for i, p in enumerate(points)]


def _sign(v: float) -> float:
    return 1.0 if v > 0 else (-1.0 if v < 0 else 0.0)


def _steffen_slopes(xs: Sequence[float], ys: Sequence[float]) -> list[float]:
    """Steffen's derivative at each knot (M. Steffen 1990, A&A 239, 443, eqs. 11, 26-27)."""
    n = len(xs)
    h = [xs[i + 1] - xs[i] for i in range(n - 1)]
    s = [(ys[i + 1] - ys[i]) / h[i] for i in range(n - 1)]
    if n == 2:
        return [s[0], s[0]]
    d = [0.0] * n
    for i in range(1, n - 1):
        p = (s[i - 1] * h[i] + s[i] * h[i - 1]) / (h[i - 1] + h[i])
        d[i] = (_sign(s[i - 1]) + _sign(s[i])) * min(abs(s[i - 1]), abs(s[i]), 0.5 * abs(p))

    def end(s_near: float, s_far: float, h_near: float, h_far: float) -> float:
        # slope of the parabola through the three end knots, limited (eqs. 26-27)
        p = s_near * (1 + h_near / (h_near + h_far)) - s_far * h_near / (h_near + h_far)
        if p * s_near <= 0:
            return 0.0
        return 2 * s_near if abs(p) > 2 * abs(s_near) else p

    d[0] = end(s[0], s[1], h[0], h[1])
    d[-1] = end(s[-1], s[-2], h[-1], h[-2])
    return d


def steffen(xs: Sequence[float], ys: Sequence[float], x: float) -> float | None:
    """y at ``x`` on Steffen's monotone cubic through the knots (``xs`` strictly increasing).

    M. Steffen, "A simple method for monotonic interpolation in one dimension", Astronomy and
    Astrophysics 239, 443-450 (1990). With h_i = x_{i+1} - x_i and s_i = (y_{i+1} - y_i) / h_i,
    the slope at an interior knot is (eq. 11)

        y'_i = (sign(s_{i-1}) + sign(s_i)) * min(|s_{i-1}|, |s_i|, |p_i| / 2),
        p_i  = (s_{i-1} h_i + s_i h_{i-1}) / (h_{i-1} + h_i)

    (0 at a local extremum of the data); at an end knot the slope of the parabola through the
    three end knots, p_1 = s_1 (1 + h_1 / (h_1 + h_2)) - s_2 h_1 / (h_1 + h_2), set to 0 when
    p_1 s_1 <= 0 and to 2 s_1 when |p_1| > 2 |s_1| (eqs. 26-27). Two knots give the straight line.
    On [x_i, x_{i+1}], with t = x - x_i, the Hermite cubic

        y = y_i + y'_i t + b t^2 + a t^3,
        a = (y'_i + y'_{i+1} - 2 s_i) / h_i^2,   b = (3 s_i - 2 y'_i - y'_{i+1}) / h_i.

    Between two knots the curve stays within their y values (it never overshoots), it is exact at
    the knots, and its slope is continuous. None when ``x`` lies outside [xs[0], xs[-1]]: it never
    extrapolates.
    """
    n = len(xs)
    if n != len(ys) or n == 0:
        raise ValueError(f"steffen needs as many ys as xs (>= 1), got {n} xs and {len(ys)} ys")
    if any(xs[i + 1] <= xs[i] for i in range(n - 1)):
        raise ValueError("steffen needs strictly increasing xs")
    if not xs[0] <= x <= xs[-1]:
        return None
    if n == 1:
        return float(ys[0])
    # the interval [xs[i], xs[i+1]] holding x; a knot returns its own y exactly
    i = 0
    while i < n - 2 and x >= xs[i + 1]:
        i += 1
    if x == xs[i]:
        return float(ys[i])
    if x == xs[i + 1]:
        return float(ys[i + 1])
    d = _steffen_slopes(xs, ys)
    h = xs[i + 1] - xs[i]
    s = (ys[i + 1] - ys[i]) / h
    a = (d[i] + d[i + 1] - 2 * s) / (h * h)
    b = (3 * s - 2 * d[i] - d[i + 1]) / h
    t = x - xs[i]
    y = ys[i] + t * (d[i] + t * (b + t * a))
    return y


def plateaued(prev_total_tok_s: float, total_tok_s: float, min_gain: float = 0.05) -> bool:
    """True when a doubling of load gained less than ``min_gain`` (5 %) of total throughput:
    ``total_tok_s < prev_total_tok_s * (1 + min_gain)``."""
    return total_tok_s < prev_total_tok_s * (1 + min_gain)


@dataclass(frozen=True)
class AtTarget:
    """Throughput per GPU and costs read off a frontier at one interactivity.

    ``interpolated``: read between two measured points (their concurrencies in ``between``);
    False when a measured point sits exactly there (``between`` None).
    """

    interactivity: float
    output_tok_s_per_gpu: float
    input_tok_s_per_gpu: float
    total_tok_s_per_gpu: float
    usd_per_million_output_tokens: float | None
    usd_per_million_input_tokens: float | None
    usd_per_million_total_tokens: float | None
    interpolated: bool
    between: tuple[float, float] | None

    def to_dict(self) -> dict[str, Any]:
        """As the result JSON writes it (``frontier.at_target``; ``between`` a 2-list or null)."""
        d = asdict(self)
        d["between"] = list(self.between) if self.between is not None else None
        return d


def _priced(
    x: float, out: float, inp: float, tot: float, usd_per_gpu_hour: float | None,
    between: tuple[float, float] | None,
) -> AtTarget:
    return AtTarget(
        interactivity=x,
        output_tok_s_per_gpu=out,
        input_tok_s_per_gpu=inp,
        total_tok_s_per_gpu=tot,
        usd_per_million_output_tokens=usd_per_million(usd_per_gpu_hour, out),
        usd_per_million_input_tokens=usd_per_million(usd_per_gpu_hour, inp),
        usd_per_million_total_tokens=usd_per_million(usd_per_gpu_hour, tot),
        interpolated=between is not None,
        between=between,
    )


def front(points: Sequence[FrontierPoint]) -> list[FrontierPoint]:
    """The Pareto points (recomputed, whatever their ``pareto`` flags say), sorted by
    interactivity ascending, one per interactivity value (equal points: the first)."""
    out: list[FrontierPoint] = []
    for p in sorted((p for p in mark_pareto(points) if p.pareto),
                    key=lambda p: float(p.interactivity or 0.0)):
        if not out or p.interactivity != out[-1].interactivity:
            out.append(p)
    return out


def at_target(
    points: Sequence[FrontierPoint], target_interactivity: float, usd_per_gpu_hour: float | None,
) -> AtTarget | None:
    """Throughput per GPU (output, input, total) and $ per 1M tokens at ``target_interactivity``.

    Along the Pareto points sorted by interactivity, each per-GPU throughput is read with
    :func:`steffen`; the costs follow from the read throughputs (:func:`usd_per_million`). None
    when the target lies outside [min, max] interactivity of the front: never extrapolated.
    """
    f = front(points)
    if not f:
        return None
    xs = [float(p.interactivity or 0.0) for p in f]
    x = float(target_interactivity)
    if not xs[0] <= x <= xs[-1]:
        return None
    for p in f:
        if p.interactivity == x:
            return _priced(x, p.output_tok_s_per_gpu, p.input_tok_s_per_gpu,
                           p.total_tok_s_per_gpu, usd_per_gpu_hour, None)
    j = next(k for k in range(1, len(xs)) if xs[k] > x)
    vals = [
        steffen(xs, [getattr(p, name) for p in f], x) or 0.0
        for name in ("output_tok_s_per_gpu", "input_tok_s_per_gpu", "total_tok_s_per_gpu")
    ]
    return _priced(x, vals[0], vals[1], vals[2], usd_per_gpu_hour,
                   (f[j - 1].concurrency, f[j].concurrency))


def at_slo(
    points: Sequence[FrontierPoint], passes: Sequence[bool], usd_per_gpu_hour: float | None,
) -> AtTarget | None:
    """The measured point of highest total tokens/s/GPU among those meeting every SLO
    (``passes[i]`` for ``points[i]``), as an :class:`AtTarget` (``interpolated`` False); None
    when no point with a known interactivity meets them."""
    if len(passes) != len(points):
        raise ValueError(f"{len(points)} points but {len(passes)} SLO verdicts")
    ok = [p for p, good in zip(points, passes, strict=True)
          if good and p.interactivity is not None]
    if not ok:
        return None
    best = max(ok, key=lambda p: p.total_tok_s_per_gpu)
    return _priced(float(best.interactivity or 0.0), best.output_tok_s_per_gpu,
                   best.input_tok_s_per_gpu, best.total_tok_s_per_gpu, usd_per_gpu_hour, None)
