"""Which load levels a frontier measures, chosen before it runs from a predicted curve.

Pure. Two questions, both on predictions:

- :func:`expected_levels`: of the levels a frontier may try (doubling), how many it is expected
  to measure: its stop rules (:mod:`infer_prof.run.frontier_run`) applied to predicted
  throughput. Used to say the expected cost before it starts.
- :func:`levels_around_target`: ``run --frontier --concurrency-from-estimate``: the few
  concurrencies worth measuring for an answer at a target interactivity, read off the predicted
  curve, instead of doubling from 1 to the ceiling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infer_prof.core.analysis.frontier import plateaued


def expected_levels(
    levels: Sequence[float],
    total_tok_s: Sequence[float],
    max_sequences: int | None = None,
    min_gain: float = 0.05,
    closed: bool = True,
    explicit: bool = False,
) -> int:
    """How many of a frontier's ``levels`` (in order) are expected to be measured, with
    ``total_tok_s[i]`` the predicted total (prompt + output) tokens/s at ``levels[i]``.

    The frontier's stop rules, on predictions: a closed-loop level above ``max_sequences`` is
    not run; after each level past the first, a gain under ``min_gain`` over the level before
    (:func:`~infer_prof.core.analysis.frontier.plateaued`) ends the frontier with that level
    measured. ``explicit`` (a list given, or a suite): every level is run, no plateau stop.
    Returns 0 when even the first level is above ``max_sequences`` (nothing is measured)."""
    if len(levels) != len(total_tok_s):
        raise ValueError("one predicted throughput per level")
    n = 0
    for i, level in enumerate(levels):
        if closed and max_sequences and level > max_sequences:
            break
        n += 1
        if not explicit and i > 0 and plateaued(total_tok_s[i - 1], total_tok_s[i], min_gain):
            break
    return n


@dataclass(frozen=True)
class LevelChoice:
    """The concurrencies to measure (``levels``, ascending) and why: ``at_target`` the
    predicted concurrency at the target (None when even one stream is predicted below it),
    ``limit`` the highest allowed, ``reachable`` whether the predicted curve crosses the target
    within ``limit`` (False: even one stream is below it, or ``limit`` streams still above it,
    so the measured front is not expected to bracket it), ``why`` in words."""

    levels: tuple[int, ...]
    at_target: int | None
    limit: int
    reachable: bool
    why: str


def levels_around_target(
    interactivity_at: Callable[[int], float], target: float, limit: int
) -> LevelChoice:
    """The concurrencies to measure for an answer at ``target`` tokens/s/user, from the
    predicted ``interactivity_at(c)`` of ``c`` streams (decreasing in ``c``), up to ``limit``
    (the KV cache's limit, or ``--max-concurrency``).

    ``c*`` = the highest ``c`` in ``[1, limit]`` predicted at or above the target (bisection:
    the curve falls as streams are added). Measured: ``{1, c*/2, c*, 2 c*, limit}`` within
    ``[1, limit]``:

    - ``c*/2`` and ``2 c*`` bracket the target even when the prediction is off by up to 2x in
      concurrency (the predictor's throughput error is 15-30 %; at a fixed interactivity the
      concurrency it gives moves by about as much), so the answer is read between two measured
      points (interpolated, never extrapolated), with ``c*`` itself in between;
    - ``1`` is the front's fast end (the best interactivity the server gives): a target above
      it is known to be out of reach, not guessed;
    - ``limit`` is the front's throughput end: the highest throughput per GPU and lowest $/1M,
      what a user would run at without a target.

    At most 5 points, where doubling from 1 to 256 measures up to 9. When even one stream is
    predicted below the target, ``{1, 2}`` (the top of the front, to measure how far off it is);
    when ``limit`` streams are still above it, ``c* = limit``.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if target <= 0:
        raise ValueError(f"target must be positive, got {target}")
    if interactivity_at(1) < target:
        levels = tuple(sorted({1, min(2, limit)}))
        return LevelChoice(levels, None, limit, False,
                           f"one stream is predicted at {interactivity_at(1):.1f} tokens/s/user, "
                           f"below the target {target:g}: measuring the top of the front")
    lo, hi = 1, limit  # interactivity_at(lo) >= target; find the last such c
    if interactivity_at(hi) >= target:
        lo = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if interactivity_at(mid) >= target:
            lo = mid
        else:
            hi = mid
    star = lo
    levels = tuple(sorted({1, max(1, star // 2), star, min(limit, 2 * star), limit}))
    listed = ", ".join(str(c) for c in levels)
    if star == limit:
        why = (f"even the limit of {limit} streams is predicted above the target {target:g} "
               f"tokens/s/user ({interactivity_at(limit):.1f}); measuring {listed}")
    else:
        why = (f"{star} streams predicted at the target {target:g} tokens/s/user "
               f"({interactivity_at(star):.1f}; {star + 1} streams: "
               f"{interactivity_at(star + 1):.1f}); measuring {listed} (1, half, at and twice "
               f"the predicted, the limit {limit})")
    return LevelChoice(levels, star, limit, star < limit, why)
