"""When an open-loop run sends each request: send offsets in seconds from the start of the run.

Pure: stdlib ``random.Random`` only; a seed reproduces the schedule exactly.

For a rate ``R`` requests/s the gaps between consecutive sends are independent draws of:

- ``poisson``: exponential with mean ``1/R`` (coefficient of variation CV = 1);
- ``gamma``: gamma with shape ``b`` (the burstiness factor) and scale ``1/(R*b)``, so the mean
  stays ``1/R`` and ``CV = 1/sqrt(b)``: ``b = 1`` is Poisson, ``b < 1`` burstier (b = 0.25 gives
  CV = 2), ``b > 1`` smoother;
- ``constant``: exactly ``1/R`` (CV = 0).

``R = inf`` means every request is sent at once (all offsets 0), whatever the kind.

The first request goes at offset 0 and request ``i`` at the sum of the first ``i`` gaps, so ``n``
requests span ``n - 1`` gaps and the achieved rate of a schedule is ``(n - 1) / offsets[-1]``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

ARRIVAL_KINDS = ("poisson", "gamma", "constant")


@dataclass(frozen=True)
class ArrivalProcess:
    """A renewal process of request sends.

    ``rate`` in requests/s (> 0, may be ``inf``); ``kind`` one of :data:`ARRIVAL_KINDS`;
    ``burstiness`` the gamma shape ``b`` (> 0; must be 1 for ``poisson``, and is ignored by
    ``constant`` only when it is 1).
    """

    rate: float
    kind: str = "poisson"
    burstiness: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.rate, bool) or not isinstance(self.rate, int | float) or not (
            self.rate > 0
        ):
            raise ValueError(f"rate must be a number of requests/s > 0 (or inf), got "
                             f"{self.rate!r}")
        if self.kind not in ARRIVAL_KINDS:
            raise ValueError(f"unknown arrival kind {self.kind!r}; allowed: "
                             f"{', '.join(ARRIVAL_KINDS)}")
        b = self.burstiness
        if isinstance(b, bool) or not isinstance(b, int | float) or not (
            math.isfinite(b) and b > 0
        ):
            raise ValueError(f"burstiness must be a finite number > 0, got {b!r}")
        if self.kind != "gamma" and b != 1:
            raise ValueError(f"burstiness {b} needs kind 'gamma' (kind {self.kind!r} has "
                             "fixed burstiness 1)")

    @property
    def mean_gap_s(self) -> float:
        """Expected gap between sends, ``1/R`` seconds (0 for ``R = inf``)."""
        return 0.0 if math.isinf(self.rate) else 1.0 / self.rate

    @property
    def cv(self) -> float:
        """Coefficient of variation of the gaps: 1 (poisson), ``1/sqrt(b)`` (gamma),
        0 (constant)."""
        if self.kind == "constant" or math.isinf(self.rate):
            return 0.0
        if self.kind == "gamma":
            return 1.0 / math.sqrt(self.burstiness)
        return 1.0

    def gaps(self, rng: random.Random, n: int) -> list[float]:
        """``n`` gaps in seconds: ``rng.expovariate(R)`` (poisson),
        ``rng.gammavariate(b, 1/(R*b))`` (gamma), ``1/R`` (constant); all 0 for ``R = inf``."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be a whole number >= 0, got {n!r}")
        if math.isinf(self.rate):
            return [0.0] * n
        if self.kind == "constant":
            return [1.0 / self.rate] * n
        if self.kind == "poisson":
            return [rng.expovariate(self.rate) for _ in range(n)]
        b = self.burstiness
        scale = 1.0 / (self.rate * b)
        return [rng.gammavariate(b, scale) for _ in range(n)]

    def offsets(self, rng: random.Random, n: int) -> list[float]:
        """Send offsets in seconds for ``n`` requests: ``0, g1, g1+g2, ...`` (``n - 1`` gaps)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be a whole number >= 0, got {n!r}")
        if n == 0:
            return []
        out = [0.0]
        t = 0.0
        for gap in self.gaps(rng, n - 1):
            t += gap
            out.append(t)
        return out

    def offsets_within(self, rng: random.Random, duration_s: float,
                       max_requests: int = 10_000_000) -> list[float]:
        """Send offsets ``< duration_s`` seconds (a duration-bound run): ``0`` then running sums of
        gaps, stopping at the first that reaches ``duration_s``. ``R = inf`` is refused (it would
        be unbounded); ``max_requests`` caps the list as a guard."""
        if not (isinstance(duration_s, int | float) and duration_s > 0
                and math.isfinite(duration_s)):
            raise ValueError(f"duration_s must be a finite number > 0, got {duration_s!r}")
        if math.isinf(self.rate):
            raise ValueError("an infinite rate sends everything at once: give a number of "
                             "requests, not a duration")
        out: list[float] = []
        t = 0.0
        while t < duration_s and len(out) < max_requests:
            out.append(t)
            t += self.gaps(rng, 1)[0]
        return out


def arrival_offsets(n: int, rate: float, *, burstiness: float = 1.0, kind: str | None = None,
                    seed: int = 0) -> list[float]:
    """Send offsets (s) for ``n`` requests at ``rate`` req/s, seeded.

    ``kind`` defaults to ``poisson`` when ``burstiness == 1`` and ``gamma`` otherwise.
    """
    chosen = kind or ("poisson" if burstiness == 1 else "gamma")
    return ArrivalProcess(rate, chosen, burstiness).offsets(random.Random(seed), n)
