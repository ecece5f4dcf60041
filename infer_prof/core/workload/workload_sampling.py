"""Drawing a workload's requests: the lengths and shared-prefix groups of each request, and the
send times of an open loop, reproducibly from the workload's seed. Pure.
"""

from __future__ import annotations

import math
import random

from infer_prof.core.workload.workloads import Workload

RequestSpec = tuple[int, int, int | None]



def sample_requests(workload: Workload, n: int | None = None) -> list[RequestSpec]:
    """Draw ``n`` requests ``(input_len, output_len, prefix_group | None)``, reproducibly.

    ``n`` defaults to ``warmup_requests + num_requests`` (the first ``warmup_requests`` are the
    warm-up); a duration-bound workload needs an explicit ``n``. Inputs, outputs and prefix
    groups come from three independent generators seeded ``"<seed>/input_len"``,
    ``"<seed>/output_len"`` and ``"<seed>/shared_prefix"``, so changing one field does not
    change the others' draws. Exactly ``round_half_up(fraction * n)`` requests, picked at random,
    get a prefix group, assigned round-robin ``0, 1, ..., groups - 1`` in request order.
    """
    if n is None:
        n = workload.total_requests()
        if n is None:
            raise ValueError(f"workload {workload.name!r} is bound by duration_s: say how many "
                             "requests to draw")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a whole number >= 0, got {n!r}")
    seed = workload.seed
    inputs = workload.input_len.sample(random.Random(f"{seed}/input_len"), n)
    outputs = workload.output_len.sample(random.Random(f"{seed}/output_len"), n)
    groups: list[int | None] = [None] * n
    sp = workload.shared_prefix
    if sp.fraction > 0 and n > 0:
        k = min(n, math.floor(sp.fraction * n + 0.5))
        chosen = sorted(random.Random(f"{seed}/shared_prefix").sample(range(n), k))
        for j, idx in enumerate(chosen):
            groups[idx] = j % sp.groups
    return list(zip(inputs, outputs, groups, strict=True))


def send_offsets(workload: Workload, n: int) -> list[float] | None:
    """Open loop: the send offsets in seconds of ``n`` requests (see
    :class:`~infer_prof.core.workload.arrivals.ArrivalProcess`), seeded ``"<seed>/arrival"``.
    Closed loop: None (a request goes when a slot frees)."""
    if workload.arrival.mode != "open":
        return None
    return workload.arrival.process_for().offsets(random.Random(f"{workload.seed}/arrival"), n)
