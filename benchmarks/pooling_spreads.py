"""Measure the two spreads the estimate's partial pooling stands on, on the shipped data.

``infer_prof.estimate.published_fit`` pulls a family's fit towards its parent's with the weight
``POOL_WEIGHT / S`` (``S`` its sources), where ``POOL_WEIGHT = sigma_s^2 / tau^2``:

- ``sigma_s`` (``SOURCE_SPREAD``): how far one source's setup moves all its measured throughputs
  together, in log. Measured as the standard deviation, across the sources with points in the
  goal's set (released vLLM >= 0.10), of each source's median held-out log error
  ``ln(predicted / measured)``, with every source held out in turn
  (``benchmarks/estimate_loso.py``'s computation, at the shipped constants);
- ``tau`` (``FAMILY_SPREAD``): how far one GPU architecture family's factors lie from another's,
  in log. Measured as the root mean square of ``ln(mbu_F / mbu_parent)`` over the families
  ``F`` other than the parent (the family the most sources measured), each family fitted on its
  own points with no pull towards the parent (``POOL_WEIGHT`` at 1e-6).

It prints both, the ``POOL_WEIGHT`` they imply, and the constants shipped. The two are a fixed
point: ``sigma_s`` is measured with the pooling its own value sets, so a change of the data is
followed by measuring again with the new constants until they agree to two digits.

    python benchmarks/pooling_spreads.py            # ~1 minute on one core
    python benchmarks/pooling_spreads.py --json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

import estimate_loso  # noqa: E402

from infer_prof.estimate import published_fit  # noqa: E402
from infer_prof.estimate.published_fit import Case, fit_cases  # noqa: E402


class Spreads(msgspec.Struct, frozen=True):
    """The measured spreads (log units), what they imply, and what is shipped."""

    sources: int
    source_spread: float
    source_medians: dict[str, float]
    families: dict[str, float]
    parent: str
    family_spread: float
    implied_pool_weight: float
    shipped_source_spread: float
    shipped_family_spread: float
    shipped_pool_weight: float


def source_spread(rows: Iterable[estimate_loso.Held]) -> tuple[float, dict[str, float]]:
    """``sigma_s``: the sample standard deviation of the per-source median of
    ``ln(predicted / measured)`` over the goal set's sources, ``rows`` predicted held out by
    source (``estimate_loso.held_out``); and those medians by source title."""
    by_source: dict[str, list[float]] = {}
    for r in rows:
        if r.goal_set:
            by_source.setdefault(r.source, []).append(math.log(r.predicted / r.measured))
    medians = {s: statistics.median(v) for s, v in sorted(by_source.items())}
    return statistics.stdev(medians.values()), medians


def family_spread(cases: list[Case]) -> tuple[float, dict[str, float], str]:
    """``tau``: the root mean square of ``ln(mbu_F / mbu_parent)`` over the families fitted on
    their own points with no pull (``POOL_WEIGHT`` 1e-6); the families' ``mbu``; the parent."""
    shipped = published_fit.POOL_WEIGHT
    published_fit.POOL_WEIGHT = 1e-6
    try:
        alone = fit_cases(cases, "alone").families
    finally:
        published_fit.POOL_WEIGHT = shipped
    sources: dict[str, set[str]] = {}
    for c in cases:
        sources.setdefault(c.family, set()).add(c.point.source.title)
    parent = max(alone, key=lambda k: (len(sources[k]), k))
    logs = [math.log(f.mbu / alone[parent].mbu) for k, f in alone.items() if k != parent]
    tau = math.sqrt(sum(x * x for x in logs) / len(logs))
    return tau, {k: f.mbu for k, f in sorted(alone.items())}, parent


def measure() -> Spreads:
    """Both spreads on ``published_results.json``'s vLLM closed-loop cases."""
    cases, _ = estimate_loso.cases()
    sigma, medians = source_spread(estimate_loso.held_out(cases))
    tau, mbus, parent = family_spread(cases)
    return Spreads(
        sources=len(medians), source_spread=round(sigma, 3),
        source_medians={k: round(v, 3) for k, v in medians.items()},
        families={k: round(v, 3) for k, v in mbus.items()}, parent=parent,
        family_spread=round(tau, 3), implied_pool_weight=round(sigma ** 2 / tau ** 2, 2),
        shipped_source_spread=published_fit.SOURCE_SPREAD,
        shipped_family_spread=published_fit.FAMILY_SPREAD,
        shipped_pool_weight=round(published_fit.POOL_WEIGHT, 2))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args(argv)
    s = measure()
    if args.json:
        print(json.dumps(msgspec.to_builtins(s), indent=1))
        return 0
    print(f"sigma_s (SOURCE_SPREAD): {s.source_spread:.3f} measured over {s.sources} sources, "
          f"{s.shipped_source_spread} shipped")
    for title, m in sorted(s.source_medians.items(), key=lambda kv: kv[1]):
        print(f"  {m:+.3f}  {title[:80]}")
    print(f"tau (FAMILY_SPREAD): {s.family_spread:.3f} measured over {len(s.families) - 1} "
          f"families against {s.parent}, {s.shipped_family_spread} shipped")
    for family, mbu in s.families.items():
        print(f"  {family:14s} mbu {mbu:.3f}")
    print(f"POOL_WEIGHT = sigma_s^2 / tau^2: {s.implied_pool_weight:.2f} measured, "
          f"{s.shipped_pool_weight:.2f} shipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
