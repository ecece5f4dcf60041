"""The warm-up phase of a run: how many warm-up requests a load point draws, whether it warms up
under the load itself (the closed loop's streams never pause; each stream's first request after
the warm-up is measured) or before it, and the gate that ends a warm-up under load.

The requests themselves are sent by the drivers in :mod:`infer_prof.loadgen` (a warm-up under
the load cannot be a separate step: it is the load); what the warm-up did is summarized by
:mod:`infer_prof.core.measurement.warmup`.
"""

from __future__ import annotations

from infer_prof.core.workload.workloads import Workload, warmup_seconds
from infer_prof.loadgen.closed_loop import WarmupGate

#: A duration-bound point draws this many request shapes up front (enough for hours of load at
#: the rates a single server reaches; drawing is cheap, prompts are built lazily).
DURATION_DRAWS = 200_000


def warmup_pool_size(wl: Workload) -> int:
    """How many warm-up request shapes a point draws: ``warmup_requests`` for a counted warm-up;
    for a warm-up under the load itself (closed loop), 4 x concurrency for ``steady`` (each
    stream finishes its first request once; the fastest may start a few more before the slowest
    does) and :data:`DURATION_DRAWS` / 4 for a duration; an open loop's ``steady`` warm-up is
    :data:`OPEN_LOOP_STEADY_WARMUP` requests (a warm-up at the rate itself is not built yet)."""
    if wl.warmup == "requests":
        return wl.warmup_requests
    if wl.arrival.mode != "closed":
        return OPEN_LOOP_STEADY_WARMUP
    if wl.warmup == "steady":
        return 4 * (wl.arrival.concurrency or 1)
    return DURATION_DRAWS // 4


#: Warm-up requests of an open-loop point whose warm-up is ``steady``.
OPEN_LOOP_STEADY_WARMUP = 8


def continuous_warmup(wl: Workload) -> bool:
    """Whether the point warms up under the load itself (closed loop, ``steady`` or a
    duration): the streams never pause, each one's next request after the warm-up is measured.
    Otherwise the warm-up requests all finish before the measured phase starts."""
    return wl.arrival.mode == "closed" and wl.warmup != "requests"


def warmup_gate(wl: Workload, sessions: bool) -> WarmupGate | None:
    """The gate that ends a warm-up under the load itself: open once every stream has finished a
    warm-up request (``steady``) or the warm-up's seconds have passed; ``None`` when the point
    warms up before the load (counted requests, open loop) or runs multi-turn ``sessions``
    (whose warm-up is single requests, all finished before the sessions start)."""
    if not continuous_warmup(wl) or sessions:
        return None
    return WarmupGate(wl.arrival.concurrency or 1, warmup_seconds(wl.warmup))
