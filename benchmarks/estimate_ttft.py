"""How right is the TTFT ``infer-prof estimate`` prints? Predicted against published TTFT.

The estimate's factors are fitted on output tokens/s alone (``benchmarks/estimate_accuracy.py
--write``); its TTFT follows from the same step model and the closed loop's queue
(``core/estimate/frontier_model.py``: the median request waits for half the other streams'
prompts, the waves a loop of equal lengths keeps). This benchmark predicts every vLLM
closed-loop point of ``infer_prof/catalog/data/published_results.json`` that has a TTFT, with
the shipped factors (:func:`infer_prof.estimate.published_fit.shipped_factors`), and prints
``predicted / measured - 1`` of TTFT: overall, by source and by concurrency band. The measured
figure is the source's median, or its mean where it publishes no median (``latency_stat``); the
prediction is a median. Not held out: the factors saw these points' throughput, not their TTFT.

    .venv/bin/python benchmarks/estimate_ttft.py          # the tables
    .venv/bin/python benchmarks/estimate_ttft.py --json   # one JSON document
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from infer_prof.catalog.published_results import PublishedPoint, published_results
from infer_prof.core.estimate.calibration import percentile
from infer_prof.estimate.published_fit import Case, predict_case, prepare, shipped_factors

BANDS = ((1, 4, "1-4 streams"), (5, 32, "5-32 streams"), (33, 10**9, "over 32 streams"))
"""Concurrency bands: the queue ahead of a prompt grows with the streams."""


@dataclass(frozen=True)
class TtftRow:
    """One point: measured and predicted TTFT (ms) and ``error_pct`` = predicted / measured - 1
    (%)."""

    id: str
    source: str
    gpu: str
    concurrency: int
    input_len: int
    measured_ms: float
    predicted_ms: float
    error_pct: float


@dataclass(frozen=True)
class TtftStats:
    """``n`` points: median and 90th percentile of |error| (%), and the median signed error
    (%: positive when predicted too long)."""

    n: int
    median_abs_error_pct: float
    p90_abs_error_pct: float
    median_error_pct: float


def rows(points: Iterable[PublishedPoint]) -> list[TtftRow]:
    """A :class:`TtftRow` for every vLLM closed-loop point with a TTFT the estimate predicts."""
    out = []
    for p in points:
        if p.engine != "vllm" or p.load != "closed-loop" or not p.ttft_ms:
            continue
        case = prepare(p)
        if not isinstance(case, Case):
            continue
        try:
            pred = predict_case(shipped_factors(p.gpu), case).ttft_ms_p50
        except ValueError:
            continue
        out.append(TtftRow(p.id, p.source.title.split(" (")[0][:60], p.gpu,
                           p.concurrency or 0, p.input_len, p.ttft_ms, pred,
                           (pred / p.ttft_ms - 1.0) * 100.0))
    return out


def stats(errors: list[float]) -> TtftStats | None:
    """Median / p90 of |error| and the median signed error, or None without points."""
    if not errors:
        return None
    absolute = sorted(abs(e) for e in errors)
    return TtftStats(len(errors), round(statistics.median(absolute), 1),
                     round(percentile(absolute, 90), 1), round(statistics.median(errors), 1))


def grouped(found: list[TtftRow], key: Callable[[TtftRow], str]) -> dict[str, TtftStats]:
    """:func:`stats` per group."""
    keys = sorted({key(r) for r in found})
    return {k: s for k in keys if (s := stats([r.error_pct for r in found if key(r) == k]))}


def band(r: TtftRow) -> str:
    """The :data:`BANDS` label of ``r``'s concurrency."""
    return next(label for low, high, label in BANDS if low <= r.concurrency <= high)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args(argv)
    found = rows(published_results().points)
    overall = stats([r.error_pct for r in found])
    by_band = grouped(found, band)
    by_source = grouped(found, lambda r: r.source)
    if args.json:
        json.dump({"overall": overall and asdict(overall),
                   "by_band": {k: asdict(v) for k, v in by_band.items()},
                   "by_source": {k: asdict(v) for k, v in by_source.items()},
                   "rows": [asdict(r) for r in found]}, sys.stdout, indent=1)
        print()
        return 0
    print("TTFT, predicted / measured - 1, shipped factors (fitted on throughput, not TTFT):")

    def line(name: str, s: TtftStats | None) -> None:
        if s is not None:
            print(f"  {name[:44]:<44} n={s.n:<4} median |err| {s.median_abs_error_pct:>6.1f} %"
                  f"   p90 {s.p90_abs_error_pct:>7.1f} %"
                  f"   median signed {s.median_error_pct:+7.1f} %")

    line("every vLLM closed-loop point with a TTFT", overall)
    print(" by concurrency:")
    for k, s in by_band.items():
        line(k, s)
    print(" by source:")
    for k, s in by_source.items():
        line(k, s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
