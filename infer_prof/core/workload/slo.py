"""Service-level objectives (SLOs): parsing, the run-level check, and goodput.

Pure. An SLO is ``<metric>_<stat> = <milliseconds>``: metric one of ``ttft``, ``tpot``, ``itl``,
``e2e`` (as :mod:`infer_prof.core.measurement.metrics` defines them) and stat ``pNN`` (0 < NN < 100,
e.g. ``p99`` or ``p99.9``), ``mean`` or ``max``. On the command line:
``ttft_p99=2000,tpot_p99=200``; in a workload file: an ``[slo]`` table of the same keys (the same
grammar as
:mod:`infer_prof.core.workload.workloads`).

Two checks, deliberately different:

- **Run level** (does this load point meet its SLOs?): for each SLO the run's statistic of that
  metric, pooled over completed measured requests exactly as the run summary pools it (linear
  interpolation percentiles, :mod:`infer_prof.core.measurement.stats`), must be ``<=`` the limit.
  ``ttft_p99 = 2000`` passes when the run's TTFT p99 is at most 2000 ms. A metric with no samples
  fails (nothing was measured, so nothing was met).
- **Per request** (goodput): a request is *good* when it completed and, for every SLO, its own
  value of the metric is ``<=`` the limit, whatever the SLO's stat: ``ttft_p99 = 2000`` asks
  each request's TTFT to be at most 2000 ms. A request's own value is its TTFT, TPOT or E2E; for
  ITL, the request's own gaps summarized with the SLO's stat (its pNN, mean or max of its
  inter-token gaps). A metric that is undefined for a request (TPOT or ITL of a one-token
  answer) does not count against it.

Goodput (requests/s) = good requests / measured window (s), the same window as request
throughput (:func:`infer_prof.core.measurement.metrics.measured_window_ns`), so goodput <=
throughput.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infer_prof.core.measurement.metric_table import Metric, metric_by_column, metrics_at
from infer_prof.core.measurement.metrics import (
    NS_PER_MS,
    NS_PER_S,
    RequestRecord,
    measured_window_ns,
)
from infer_prof.core.measurement.stats import percentile
from infer_prof.core.workload.slo_record import SloCheckOutcome, SloOutcome

#: The metrics an SLO can name (the metric table's ``slo`` place), by their short keys.
SLO_METRICS = tuple(m.column for m in metrics_at("slo"))
#: ``<metric>_<stat>``: group 1 the metric, group 2 the stat, group 3 a percentile's number.
SLO_KEY_RE = re.compile(rf"^({'|'.join(map(re.escape, SLO_METRICS))})_(mean|max|p(\d+(?:\.\d+)?))$")
_ALLOWED = (
    f"<metric>_<stat>=<ms> with metric one of {', '.join(SLO_METRICS)} and stat pNN "
    "(0 < NN < 100), mean or max, e.g. ttft_p99=2000,tpot_p99=200"
)


class SloError(ValueError):
    """A malformed SLO specification; the message names the offending part."""


@dataclass(frozen=True)
class Slo:
    """One objective: ``stat`` of ``metric`` at most ``limit_ms`` milliseconds."""

    metric: str  # a short key of SLO_METRICS: ttft | tpot | itl | e2e
    stat: str  # "p99", "p99.9", "mean", "max"
    limit_ms: float

    @property
    def key(self) -> str:
        return f"{self.metric}_{self.stat}"

    @property
    def quantile(self) -> float | None:
        """The percentile (0-100) for ``pNN`` stats; None for mean and max."""
        return float(self.stat[1:]) if self.stat.startswith("p") else None

    def statistic(self, values_ns: Sequence[float]) -> float | None:
        """This SLO's statistic of ``values_ns``, in ms; None for no values."""
        if not values_ns:
            return None
        q = self.quantile
        if q is not None:
            v = percentile(values_ns, q)
            return None if v is None else v / NS_PER_MS
        if self.stat == "mean":
            return math.fsum(values_ns) / len(values_ns) / NS_PER_MS
        return max(values_ns) / NS_PER_MS


def slo_from_key(key: str, limit_ms: float) -> Slo:
    """One SLO from a ``<metric>_<stat>`` key and a limit in ms (> 0, finite)."""
    m = SLO_KEY_RE.match(key.strip())
    if m is None or (m.group(3) is not None and not 0 < float(m.group(3)) < 100):
        raise SloError(f"unknown SLO {key!r}; allowed: {_ALLOWED}")
    if isinstance(limit_ms, bool) or not isinstance(limit_ms, int | float):
        raise SloError(f"SLO {key}: limit must be a number of milliseconds, got {limit_ms!r}")
    if not (math.isfinite(limit_ms) and limit_ms > 0):
        raise SloError(f"SLO {key}: limit must be a finite number of milliseconds > 0, "
                       f"got {limit_ms!r}")
    return Slo(m.group(1), m.group(2), float(limit_ms))


def parse_slos(text: str) -> list[Slo]:
    """Parse ``ttft_p99=2000,tpot_p99=200`` (milliseconds) into SLOs, in the order given.

    Raises :class:`SloError` for an empty list, a part without ``=``, an unknown key, a limit that
    is not a positive number, or a key given twice.
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise SloError(f"--slo {text!r} is empty; allowed: {_ALLOWED}")
    out: list[Slo] = []
    for part in parts:
        key, eq, value = part.partition("=")
        if not eq:
            raise SloError(f"SLO {part!r} has no '=<ms>'; allowed: {_ALLOWED}")
        try:
            limit = float(value.strip())
        except ValueError:
            raise SloError(f"SLO {key.strip()}: {value.strip()!r} is not a number of "
                           "milliseconds") from None
        slo = slo_from_key(key, limit)
        if any(s.key == slo.key for s in out):
            raise SloError(f"SLO {slo.key} is given twice")
        out.append(slo)
    return out


def slos_from_mapping(mapping: Mapping[str, float]) -> list[Slo]:
    """SLOs from a workload file's ``[slo]`` table (``{"ttft_p99": 2000.0, ...}``)."""
    return [slo_from_key(k, v) for k, v in mapping.items()]


def format_slos(slos: Iterable[Slo]) -> str:
    """The command-line form, ``ttft_p99=2000,tpot_p99=200``."""
    return ",".join(f"{s.key}={s.limit_ms:g}" for s in slos)


def _metric(slo: Slo) -> Metric:
    m = metric_by_column(slo.metric)
    assert m.samples_ns is not None, f"{m.key} has no per-request formula"
    return m


def _run_values_ns(records: Sequence[RequestRecord], slo: Slo) -> list[float]:
    """A metric's samples pooled over completed requests, as the run summary pools them."""
    samples = _metric(slo).samples_ns
    assert samples is not None
    return [v for r in records for v in samples(r)]


def request_value_ms(record: RequestRecord, slo: Slo) -> float | None:
    """A request's own value for ``slo`` in ms (see the module docstring); None if undefined.

    The SLO's statistic of the request's own samples: its one value (TTFT, TPOT, E2E: any
    statistic of one value is that value), or its inter-token gaps summarized (ITL)."""
    samples = _metric(slo).samples_ns
    assert samples is not None
    return slo.statistic(samples(record))


def request_violations(record: RequestRecord, slos: Sequence[Slo]) -> list[str]:
    """Why one request is not good: ``["not completed"]``, or each SLO it exceeds."""
    if not record.ok:
        return ["not completed"]
    out = []
    for s in slos:
        v = request_value_ms(record, s)
        if v is not None and v > s.limit_ms:
            out.append(f"{s.metric} {v:.3f} ms > {s.limit_ms:g} ms")
    return out


def request_is_good(record: RequestRecord, slos: Sequence[Slo]) -> bool:
    """Completed and within every SLO's limit (per-request reading)."""
    return not request_violations(record, slos)


@dataclass(frozen=True)
class SloCheck:
    """The run-level check of one SLO: the run's statistic against the limit."""

    slo: Slo
    value_ms: float | None  # None: the metric was not measured
    passed: bool

    def reason(self) -> str:
        if self.value_ms is None:
            return f"{self.slo.key} not measured (no completed request has it)"
        op = "<=" if self.passed else ">"
        return f"{self.slo.key} {self.value_ms:.3f} ms {op} {self.slo.limit_ms:g} ms"

    def section(self) -> SloCheckOutcome:
        """The check as the result's ``slo.checks[]`` holds it (milliseconds as floats)."""
        return SloCheckOutcome(slo=self.slo.key, limit_ms=float(self.slo.limit_ms),
                               passed=self.passed, value_ms=_float(self.value_ms))


@dataclass(frozen=True)
class SloReport:
    """Run-level pass/fail with reasons, and goodput."""

    checks: list[SloCheck]
    good_requests: int
    completed_requests: int
    duration_s: float | None
    goodput: float | None  # good requests / window, requests/s; None without a window
    failures: list[str] = field(default_factory=list)  # reasons of the failed checks

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def section(self) -> SloOutcome:
        """The report as the result's ``slo`` section."""
        return SloOutcome(
            passed=self.passed,
            slos=format_slos(c.slo for c in self.checks),
            checks=[c.section() for c in self.checks],
            failures=list(self.failures),
            good_requests=self.good_requests,
            completed_requests=self.completed_requests,
            goodput=_float(self.goodput),
            definition=(
                "run level: the run's statistic of each metric <= its limit; goodput: completed "
                "requests whose own value of every metric <= its limit, per second of window"
            ),
        )


def _float(value: float | None) -> float | None:
    """A figure as the section's float fields hold it (a whole number as a float, as the
    result file reads back); None stays None."""
    return None if value is None else float(value)


def evaluate_slos(
    records: Iterable[RequestRecord],
    slos: Sequence[Slo],
    window_ns: tuple[int, int] | None = None,
    rate_window_s: float | None = None,
) -> SloReport:
    """Check ``slos`` against a run's records (warm-up requests are left out).

    ``window_ns`` defaults to :func:`~infer_prof.core.measurement.metrics.measured_window_ns`;
    goodput is over ``rate_window_s`` where given (as the run's other rates are), else over the
    window.
    """
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    checks = []
    for s in slos:
        value = s.statistic(_run_values_ns(ok, s))
        checks.append(SloCheck(s, value, value is not None and value <= s.limit_ms))
    good = sum(1 for r in ok if request_is_good(r, slos))
    window = window_ns if window_ns is not None else measured_window_ns(measured)
    duration = (window[1] - window[0]) / NS_PER_S if window else None
    if rate_window_s:
        duration = rate_window_s
    return SloReport(
        checks=checks,
        good_requests=good,
        completed_requests=len(ok),
        duration_s=duration,
        goodput=good / duration if duration else None,
        failures=[c.reason() for c in checks if not c.passed],
    )


def check_summary(summary: Mapping[str, Any], slos: Sequence[Slo]) -> list[SloCheck]:
    """The run-level check from a result file's ``summary`` (``ttft_ms`` etc. distributions).

    Only stats the summary holds (p50, p90, p99, mean, max) can be checked this way; another
    pNN raises :class:`SloError` (use :func:`evaluate_slos` on the per-request records).
    """
    out = []
    for s in slos:
        if s.stat not in ("p50", "p90", "p99", "mean", "max"):
            raise SloError(f"{s.key}: a result summary holds p50, p90, p99, mean and max only")
        dist = summary.get(metric_by_column(s.metric).key)
        value = None if not dist else dist.get(s.stat)
        out.append(SloCheck(s, value, value is not None and value <= s.limit_ms))
    return out
