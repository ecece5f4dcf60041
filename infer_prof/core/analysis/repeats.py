"""Statistics of one metric across repeated runs of one configuration (``run --repeat N``).

Pure arithmetic, no I/O. Each repeat is one run and gives one value of each metric (a
throughput, a latency percentile); the run, not the request, is the unit here. For the ``n``
values ``x_1 .. x_n`` of a metric:

- mean ``m = sum(x) / n``;
- sample standard deviation ``s = sqrt(sum((x - m)^2) / (n - 1))`` (the spread between runs);
- coefficient of variation ``cv = s / |m|`` (a fraction: 0.05 is 5 %; None when ``m`` is 0);
- the interval of the mean, Student t with ``n - 1`` degrees of freedom:
  ``m ± t_{1 - alpha/2, n-1} x s / sqrt(n)`` (95 % by default; ``t_{0.975,1}`` = 12.71,
  ``t_{0.975,4}`` = 2.776). It assumes the runs are independent and their values roughly
  normal; with 2 or 3 repeats it is wide, as it should be.

One value has no spread: ``sd``, ``cv`` and the interval are None (never 0).

The metrics a repeated run reports this way (:data:`REPEAT_COLUMNS`) are the metric table's
``gate`` columns, then the ``compare`` columns the gate lacks, each named as the history names
it (:func:`metric_name`: ``ttft_ms.p50``, ``output_throughput``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from infer_prof.core.analysis.significance import mean_var, t_quantile
from infer_prof.core.measurement.metric_table import Column, columns_at

#: The interval's confidence level unless another is asked for.
DEFAULT_CONFIDENCE = 0.95


def metric_name(path: str) -> str:
    """The name a column of result ``path`` (dotted, ``|`` alternatives) has in the history
    and the result's ``repeats`` section: the first alternative less ``summary.``
    (``ttft_ms.p50``, ``output_throughput``, ``cost.usd_per_million_output_tokens``)."""
    return path.split("|")[0].removeprefix("summary.")


def _metric_columns() -> tuple[Column, ...]:
    """The gate's columns, then compare's that the gate lacks, one per :func:`metric_name`."""
    seen: set[str] = set()
    out: list[Column] = []
    for col in columns_at("gate") + columns_at("compare"):
        name = metric_name(col.path)
        if name not in seen:
            seen.add(name)
            out.append(col)
    return tuple(out)


#: The columns a repeated run gives statistics of, in table order.
REPEAT_COLUMNS: tuple[Column, ...] = _metric_columns()


@dataclass(frozen=True)
class RepeatStats:
    """One metric across ``n`` repeats: its ``mean``, sample standard deviation ``sd``,
    coefficient of variation ``cv`` (fraction), and the Student-t interval of the mean
    ``[low, high]`` at ``confidence`` (module docstring). ``values`` are the per-run values,
    in run order."""

    values: tuple[float, ...]
    mean: float
    sd: float | None
    cv: float | None
    low: float | None
    high: float | None
    confidence: float

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def half_width(self) -> float | None:
        """Half the interval's width, in the metric's unit (None with one value)."""
        return None if self.low is None or self.high is None else (self.high - self.low) / 2


def repeat_stats(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> RepeatStats:
    """Mean, sample SD (n - 1), CV = SD / |mean| and the Student-t interval of the mean
    (``n - 1`` dof) of one metric's per-run ``values`` (module docstring for the formulas).

    Raises ValueError for no values, a value that is not finite, or ``confidence`` outside
    (0, 1)."""
    if not values:
        raise ValueError("repeat_stats needs at least one value")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    xs = tuple(float(v) for v in values)
    if not all(math.isfinite(x) for x in xs):
        raise ValueError(f"repeat_stats needs finite values, got {list(xs)}")
    mean, var = mean_var(xs)
    n = len(xs)
    if n < 2:
        return RepeatStats(xs, mean, None, None, None, None, confidence)
    sd = math.sqrt(var)
    cv = sd / abs(mean) if mean != 0 else None
    half = t_quantile(1.0 - (1.0 - confidence) / 2.0, n - 1) * sd / math.sqrt(n)
    return RepeatStats(xs, mean, sd, cv, mean - half, mean + half, confidence)


def format_spread(stats: RepeatStats, digits: int = 2) -> str:
    """``"12.34 ± 0.56 (cv 4.5 %, 95 % CI 11.80-12.88, n=5)"``; one value: ``"12.34 (n=1)"``."""
    if stats.sd is None or stats.low is None or stats.high is None:
        return f"{stats.mean:,.{digits}f} (n={stats.n})"
    cv = "n/a" if stats.cv is None else f"{100 * stats.cv:.1f} %"
    level = f"{100 * stats.confidence:g} %"
    return (f"{stats.mean:,.{digits}f} ± {stats.sd:,.{digits}f} (cv {cv}, {level} CI "
            f"{stats.low:,.{digits}f}-{stats.high:,.{digits}f}, n={stats.n})")
