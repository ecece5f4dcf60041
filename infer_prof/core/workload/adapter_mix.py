"""How a run's requests are spread over LoRA adapters (``run --lora-mix``): the mix as given,
its shares, and the adapter of each request.

A mix is one of

- ``a=0.5,b=0.3,base=0.2``: explicit weights per adapter name, ``base`` meaning the served
  model without an adapter; weights are normalised to shares (they need not sum to 1);
- ``uniform``: equal shares over the named adapters (not the base model);
- ``zipf:ALPHA``: the k-th named adapter (in the order they were named, k = 1, 2, ...) gets a
  share proportional to ``1 / k^ALPHA`` (ALPHA > 0), as a few popular adapters and a long tail.

Each request's adapter is a function of its index and the seed alone (so the mix is the same
whatever the driver, the client processes or the order requests end in):
``u_i = frac(start + i * phi)`` with ``phi = (sqrt(5) - 1) / 2`` and ``start`` drawn from the
seed, the adapter being the one whose slice of the cumulative shares holds ``u_i``. This
golden-ratio (Kronecker) sequence is spread so evenly that every run of consecutive requests
holds each adapter's share to within a request or two (its discrepancy grows as log n), where
independent random draws of 40 requests would stray by about sqrt(40 x 0.5 x 0.5) = 3 from a
0.5 share; consecutive requests still alternate between adapters, not in a fixed cycle.
"""

from __future__ import annotations

import bisect
import functools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from infer_prof.core.measurement.adapter_figures import BASE  # the served model's name in a mix

#: The golden ratio's fractional part: the step of the low-discrepancy sequence.
PHI = (math.sqrt(5.0) - 1.0) / 2.0


class MixError(ValueError):
    """A ``--lora-mix`` that cannot be read or names an adapter that was not given (one line
    naming the fix)."""


@dataclass(frozen=True)
class AdapterMix:
    """A resolved mix: the text given (``spec``), each name with its share (shares sum to 1,
    ``base`` for the served model) and the seed that places the sequence's start."""

    spec: str
    names: tuple[str, ...]
    shares: tuple[float, ...]
    seed: int = 0

    @property
    def adapters(self) -> tuple[str, ...]:
        """The adapter names with a share above 0 (``base`` left out)."""
        return tuple(n for n, s in zip(self.names, self.shares, strict=True)
                     if n != BASE and s > 0)

    def share_of(self, name: str) -> float:
        """The share of requests ``name`` was asked to get (0 when it is not in the mix)."""
        return dict(zip(self.names, self.shares, strict=True)).get(name, 0.0)

    def pick(self, index: int) -> str:
        """The mix name request ``index`` goes to (``base`` or an adapter): the slice of the
        cumulative shares that holds ``frac(start + index * phi)``."""
        u = (self.start + index * PHI) % 1.0
        k = bisect.bisect_right(self.edges, u)
        return self.names[min(k, len(self.names) - 1)]

    @functools.cached_property
    def start(self) -> float:
        """The sequence's start in [0, 1), drawn from the seed."""
        return random.Random(f"lora-mix:{self.seed}").random()

    @functools.cached_property
    def edges(self) -> list[float]:
        """The upper edge of each name's slice of [0, 1) (:func:`_cumulative`)."""
        return _cumulative(self.shares)

    def counts(self, indices: Sequence[int]) -> dict[str, int]:
        """How many of ``indices`` each name gets (every name of the mix, 0 included)."""
        out = dict.fromkeys(self.names, 0)
        for i in indices:
            out[self.pick(i)] += 1
        return out


def _cumulative(shares: Sequence[float]) -> list[float]:
    """The upper edge of each share's slice of [0, 1) (the last one is 1)."""
    edges: list[float] = []
    total = 0.0
    for s in shares:
        total += s
        edges.append(total)
    if edges:
        edges[-1] = 1.0
    return edges


def parse_mix(text: str, adapters: Sequence[str], seed: int = 0,
              flag: str = "--lora-mix") -> AdapterMix:
    """The mix ``text`` over ``adapters`` (the names the run serves, in the order given):
    ``a=0.5,b=0.3,base=0.2``, ``uniform`` or ``zipf:ALPHA`` (module docstring). Raises
    :class:`MixError` (one line) for text it cannot read, a weight that is not a number of 0 or
    more, a name not among ``adapters`` (nor ``base``), a name given twice, weights summing to
    0, or ``uniform``/``zipf`` without adapters."""
    t = text.strip()
    low = t.lower()
    if low == "uniform" or low.startswith("zipf:"):
        if not adapters:
            raise MixError(f"{flag} {t}: no adapters to spread over; name them with "
                           "--lora-modules NAME=PATH (or serve them on the --endpoint)")
        if low == "uniform":
            weights = [1.0] * len(adapters)
        else:
            alpha = _number(t.split(":", 1)[1], t, flag)
            if alpha <= 0:
                raise MixError(f"{flag} {t}: the zipf exponent must be above 0, e.g. zipf:1.0")
            weights = [1.0 / (k ** alpha) for k in range(1, len(adapters) + 1)]
        return _normalised(t, list(adapters), weights, seed)
    names: list[str] = []
    weights = []
    for part in t.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise MixError(f"{flag} {t!r} is not NAME=WEIGHT,...; write e.g. "
                           f"{flag} a=0.5,b=0.3,base=0.2, uniform or zipf:1.0")
        if name != BASE and name not in adapters:
            known = ", ".join([*adapters, BASE])
            raise MixError(f"{flag}: {name!r} is not an adapter of this run (known: {known}); "
                           "add it with --lora-modules NAME=PATH or fix the name")
        if name in names:
            raise MixError(f"{flag}: {name!r} is given twice")
        w = _number(value, t, flag)
        if w < 0:
            raise MixError(f"{flag}: the weight of {name!r} must be 0 or more, got {value.strip()}")
        names.append(name)
        weights.append(w)
    return _normalised(t, names, weights, seed)


def _number(value: str, text: str, flag: str) -> float:
    try:
        x = float(value.strip())
    except ValueError:
        raise MixError(f"{flag} {text!r}: {value.strip()!r} is not a number") from None
    if not math.isfinite(x):
        raise MixError(f"{flag} {text!r}: {value.strip()!r} is not a finite number")
    return x


def _normalised(spec: str, names: list[str], weights: list[float], seed: int) -> AdapterMix:
    total = sum(weights)
    if total <= 0:
        raise MixError(f"--lora-mix {spec!r}: the weights sum to 0; give at least one a weight "
                       "above 0")
    return AdapterMix(spec, tuple(names), tuple(w / total for w in weights), seed)
