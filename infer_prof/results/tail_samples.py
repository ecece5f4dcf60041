"""How many values a latency percentile rests on, and when that is too few to judge a change.

The p99 of 60 requests is nearly their maximum: one request decides it. A gate that calls such a
percentile's change significant calls chance significant, whether it compares pooled per-request
samples (:func:`infer_prof.results.gate.evaluate_within_run`) or one value per run
(:func:`infer_prof.results.gate.evaluate`). So a percentile above p50 with fewer than
:data:`MIN_TAIL_SAMPLES` values beyond it on a side (``n x (1 - q/100)``) is reported with its
change but never called significant: p99 needs 2,000 values, p90 200.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from infer_prof.core.measurement.metric_table import latencies

MIN_TAIL_SAMPLES = 20
"""Values beyond a percentile a side needs before its change can be called significant."""

MANY_PER_REQUEST: dict[str, bool] = {m.key: m.many_per_request for m in latencies()}
"""Each latency metric's key, and whether a request gives several of its values (ITL's gaps),
which are then not independent: such a metric counts its requests, not its values."""


def too_few_beyond(stat: str, n_baseline: int, n_current: int) -> bool:
    """True when ``stat`` is a percentile above p50 with fewer than :data:`MIN_TAIL_SAMPLES`
    values beyond it on a side (``n * (1 - q/100)``): too few to call its change significant."""
    if not stat.startswith("p"):
        return False
    try:
        q = float(stat[1:])
    except ValueError:
        return False
    return q > 50.0 and min(n_baseline, n_current) * (100.0 - q) / 100.0 < MIN_TAIL_SAMPLES


def tail_samples_per_run(runs: Sequence[Mapping[str, float]], name: str) -> int | None:
    """The fewest independent values one run of ``runs`` (each its flattened summary values)
    computed the latency percentile ``name`` (``ttft_ms.p99``) from: its
    ``requests_completed`` for a metric of several values a request (ITL: the gaps of one
    request are not independent), else its ``<metric>.count``; None when ``name`` is not a
    latency percentile or a run does not say."""
    base, _, stat = name.rpartition(".")
    if base not in MANY_PER_REQUEST or not stat.startswith("p"):
        return None
    key = "requests_completed" if MANY_PER_REQUEST[base] else f"{base}.count"
    counts = [r.get(key) for r in runs]
    if not counts or any(c is None or c <= 0 for c in counts):
        return None
    return int(min(c for c in counts if c is not None))


def thin_tail_note(baseline: Sequence[Mapping[str, float]], current: Sequence[Mapping[str, float]],
                   name: str) -> str:
    """Why the over-runs gate does not call a change of the latency percentile ``name``
    significant, or "": a run with fewer than :data:`MIN_TAIL_SAMPLES` values beyond it
    (:func:`tail_samples_per_run`, :func:`too_few_beyond`). Such a run's percentile is one or
    two extreme values, whose spread between runs is not the log-normal one the t-test assumes:
    two runs can agree by chance, and a third then looks far off."""
    nb, nc = tail_samples_per_run(baseline, name), tail_samples_per_run(current, name)
    stat = name.rpartition(".")[2]
    if nb is None or nc is None or not too_few_beyond(stat, nb, nc):
        return ""
    return (f"too few values beyond {stat} in a run (< {MIN_TAIL_SAMPLES}: {min(nb, nc)} a "
            "run) to call a change significant")
