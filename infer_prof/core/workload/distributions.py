"""Length distributions over positive whole token counts (prompt and output lengths).

Pure: stdlib ``random.Random`` only; the caller passes the generator, so a seed reproduces every
draw exactly. Five kinds, each a frozen dataclass with ``sample(rng, n)``, ``mean()``,
``support()``, ``scaled(factor)``, ``record()`` (the typed table a workload file writes,
:mod:`infer_prof.core.workload.workload_record`) and ``to_dict()`` (that record as JSON values):

- ``fixed``: every draw is ``value``.
- ``uniform``: integers ``min..max`` inclusive, each equally likely.
- ``normal``: ``round(N(mean, std))`` clipped to ``[min, max]``.
- ``lognormal``: ``round(median * exp(sigma * Z))``, ``Z ~ N(0, 1)``, clipped to ``[min, max]``.
  Given as the *median* of the lengths and *sigma*, the standard deviation of ``ln(length)``
  (so ``mu = ln(median)``). The median is what length tables usually quote and is robust to the
  tail; unclipped, the mean is ``median * exp(sigma**2 / 2)`` and the standard deviation is
  ``mean * sqrt(exp(sigma**2) - 1)``.
- ``empirical``: a histogram; ``bins`` is a list of ``[lo, hi, weight]`` (a bin is picked with
  probability weight / total weight, then a length uniformly from ``lo..hi`` inclusive) or
  ``[value, weight]`` (a bin of one value).

Rounding is half-up (``floor(x + 0.5)``) and happens before clipping; both bounds are whole tokens.
A mapping from a workload file becomes a distribution through :func:`distribution_from_dict`,
which validates every field and raises :class:`DistributionError` naming the field.
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import msgspec

from infer_prof.core.workload.workload_record import (
    EmpiricalLength,
    FixedLength,
    LengthRecord,
    LogNormalLength,
    NormalLength,
    UniformLength,
)

KINDS = ("fixed", "uniform", "normal", "lognormal", "empirical")


class DistributionError(ValueError):
    """A distribution spec that is not valid. ``field`` is the offending key (relative to the
    distribution's own table, e.g. ``"min"``), ``problem`` says what is allowed."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"field {field!r}: {problem}")


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def _phi_cdf(z: float) -> float:
    """Standard normal CDF, ``Phi(z) = (1 + erf(z / sqrt 2)) / 2``; handles +-inf."""
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def _phi_pdf(z: float) -> float:
    if math.isinf(z):
        return 0.0
    return math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a whole number >= 0, got {n!r}")


def _scale_len(x: float, factor: float) -> int:
    """A length parameter times ``factor``, rounded half-up, never below 1 token."""
    return max(1, _round_half_up(x * factor))


def _check_factor(factor: float) -> None:
    if not (isinstance(factor, int | float) and not isinstance(factor, bool)) or not (
        math.isfinite(factor) and factor > 0
    ):
        raise ValueError(f"scale factor must be a finite number > 0, got {factor!r}")


class LengthDistribution(ABC):
    """Base of the length distributions. Subclasses are frozen dataclasses."""

    kind: ClassVar[str] = ""

    @abstractmethod
    def sample(self, rng: random.Random, n: int) -> list[int]:
        """Draw ``n`` lengths (tokens, each >= 1) from ``rng``."""

    @abstractmethod
    def mean(self) -> float:
        """The expected length in tokens (see each kind for the formula)."""

    @abstractmethod
    def support(self) -> tuple[int, int]:
        """The smallest and largest length a draw can take, inclusive, in tokens."""

    @abstractmethod
    def scaled(self, factor: float) -> LengthDistribution:
        """The same shape with every length parameter multiplied by ``factor`` (min 1 token)."""

    @abstractmethod
    def record(self) -> LengthRecord:
        """The distribution as a workload file writes it (a typed ``input_len`` table)."""

    def to_dict(self) -> dict[str, Any]:
        """The mapping :func:`distribution_from_dict` turns back into this distribution: the
        :meth:`record` as JSON values."""
        out: dict[str, Any] = msgspec.to_builtins(self.record())
        return out


@dataclass(frozen=True)
class Fixed(LengthDistribution):
    """Every request has exactly ``value`` tokens."""

    value: int
    kind: ClassVar[str] = "fixed"

    def __post_init__(self) -> None:
        _want_int(self.value, "value", minimum=1)

    def sample(self, rng: random.Random, n: int) -> list[int]:
        """``n`` copies of ``value``; does not consume randomness."""
        _check_n(n)
        return [self.value] * n

    def mean(self) -> float:
        """``value``."""
        return float(self.value)

    def support(self) -> tuple[int, int]:
        return (self.value, self.value)

    def scaled(self, factor: float) -> Fixed:
        _check_factor(factor)
        return Fixed(_scale_len(self.value, factor))

    def record(self) -> FixedLength:
        return FixedLength(value=self.value)


@dataclass(frozen=True)
class Uniform(LengthDistribution):
    """Whole lengths ``min..max`` inclusive, each with probability ``1 / (max - min + 1)``."""

    min: int
    max: int
    kind: ClassVar[str] = "uniform"

    def __post_init__(self) -> None:
        _want_int(self.min, "min", minimum=1)
        _want_int(self.max, "max", minimum=self.min, what_min=f"min ({self.min})")

    def sample(self, rng: random.Random, n: int) -> list[int]:
        """``n`` draws of ``rng.randint(min, max)``."""
        _check_n(n)
        return [rng.randint(self.min, self.max) for _ in range(n)]

    def mean(self) -> float:
        """``(min + max) / 2`` (exact)."""
        return (self.min + self.max) / 2.0

    def support(self) -> tuple[int, int]:
        return (self.min, self.max)

    def scaled(self, factor: float) -> Uniform:
        _check_factor(factor)
        lo = _scale_len(self.min, factor)
        return Uniform(lo, max(lo, _scale_len(self.max, factor)))

    def record(self) -> UniformLength:
        return UniformLength(min=self.min, max=self.max)


@dataclass(frozen=True)
class Normal(LengthDistribution):
    """``round(N(mean, std))`` clipped to ``[min, max]`` (clipped, not re-drawn: out-of-range
    draws pile up on the bounds, so the bound values carry the tails' probability)."""

    mean_: float
    std: float
    min: int
    max: int
    kind: ClassVar[str] = "normal"

    def __post_init__(self) -> None:
        _want_number(self.mean_, "mean", positive=True)
        _want_number(self.std, "std", positive=True)
        _want_int(self.min, "min", minimum=1)
        _want_int(self.max, "max", minimum=self.min, what_min=f"min ({self.min})")

    def sample(self, rng: random.Random, n: int) -> list[int]:
        """``n`` draws of ``clip(round_half_up(rng.normalvariate(mean, std)), min, max)``."""
        _check_n(n)
        lo, hi = self.min, self.max
        return [
            min(hi, max(lo, _round_half_up(rng.normalvariate(self.mean_, self.std))))
            for _ in range(n)
        ]

    def mean(self) -> float:
        """Mean of the clipped continuous normal ``E[clip(X, a, b)]``, ``X ~ N(m, s)``:

        ``a*Phi(al) + b*(1 - Phi(be)) + m*(Phi(be) - Phi(al)) + s*(phi(al) - phi(be))`` with
        ``al = (a - m)/s``, ``be = (b - m)/s``. Rounding draws to whole tokens moves the mean of the
        samples from this by a small fraction of a token for any std above a couple of tokens.
        """
        m, s, a, b = self.mean_, self.std, float(self.min), float(self.max)
        al, be = (a - m) / s, (b - m) / s
        pa, pb = _phi_cdf(al), _phi_cdf(be)
        return a * pa + b * (1.0 - pb) + m * (pb - pa) + s * (_phi_pdf(al) - _phi_pdf(be))

    def support(self) -> tuple[int, int]:
        return (self.min, self.max)

    def scaled(self, factor: float) -> Normal:
        _check_factor(factor)
        lo = _scale_len(self.min, factor)
        return Normal(self.mean_ * factor, self.std * factor, lo,
                      max(lo, _scale_len(self.max, factor)))

    def record(self) -> NormalLength:
        return NormalLength(mean=self.mean_, std=self.std, min=self.min, max=self.max)


@dataclass(frozen=True)
class LogNormal(LengthDistribution):
    """``round(median * exp(sigma * Z))`` clipped to ``[min, max]``; ``sigma`` is the standard
    deviation of ``ln(length)``. Unclipped: mean ``median*exp(sigma^2/2)``."""

    median: float
    sigma: float
    min: int
    max: int
    kind: ClassVar[str] = "lognormal"

    def __post_init__(self) -> None:
        _want_number(self.median, "median", positive=True)
        _want_number(self.sigma, "sigma", positive=True)
        _want_int(self.min, "min", minimum=1)
        _want_int(self.max, "max", minimum=self.min, what_min=f"min ({self.min})")

    def sample(self, rng: random.Random, n: int) -> list[int]:
        """``n`` draws of
        ``clip(round_half_up(rng.lognormvariate(ln(median), sigma)), min, max)``."""
        _check_n(n)
        mu, lo, hi = math.log(self.median), self.min, self.max
        return [
            min(hi, max(lo, _round_half_up(rng.lognormvariate(mu, self.sigma))))
            for _ in range(n)
        ]

    def mean(self) -> float:
        """Mean of the clipped continuous lognormal ``E[clip(X, a, b)]``, ``ln X ~ N(mu, s)``:

        ``a*Phi(al) + b*(1 - Phi(be)) + exp(mu + s^2/2) * (Phi(be - s) - Phi(al - s))`` with
        ``al = (ln a - mu)/s``, ``be = (ln b - mu)/s``, ``mu = ln(median)``. Whole-token rounding
        moves the sample mean from this by a small fraction of a token.
        """
        mu, s = math.log(self.median), self.sigma
        al = (math.log(self.min) - mu) / s
        be = (math.log(self.max) - mu) / s
        middle = math.exp(mu + s * s / 2.0) * (_phi_cdf(be - s) - _phi_cdf(al - s))
        return self.min * _phi_cdf(al) + self.max * (1.0 - _phi_cdf(be)) + middle

    def support(self) -> tuple[int, int]:
        return (self.min, self.max)

    def scaled(self, factor: float) -> LogNormal:
        _check_factor(factor)
        lo = _scale_len(self.min, factor)
        return LogNormal(self.median * factor, self.sigma, lo,
                         max(lo, _scale_len(self.max, factor)))

    def record(self) -> LogNormalLength:
        return LogNormalLength(median=self.median, sigma=self.sigma, min=self.min, max=self.max)


@dataclass(frozen=True)
class Empirical(LengthDistribution):
    """A histogram: ``bins`` of ``(lo, hi, weight)``; a draw picks a bin with probability
    ``weight / sum(weights)`` and then a whole length uniformly in ``lo..hi`` inclusive."""

    bins: tuple[tuple[int, int, float], ...]
    kind: ClassVar[str] = "empirical"

    def __post_init__(self) -> None:
        if not self.bins:
            raise DistributionError("bins", "must list at least one bin [lo, hi, weight]")
        total = 0.0
        for i, (lo, hi, w) in enumerate(self.bins):
            _want_int(lo, f"bins[{i}].lo", minimum=1)
            _want_int(hi, f"bins[{i}].hi", minimum=lo, what_min=f"its lo ({lo})")
            _want_number(w, f"bins[{i}].weight", positive=False)
            total += w
        if total <= 0:
            raise DistributionError("bins", "weights must add up to more than 0")

    def sample(self, rng: random.Random, n: int) -> list[int]:
        """For each of ``n`` draws: ``rng.choices`` a bin by cumulative weight, then
        ``rng.randint(lo, hi)``."""
        _check_n(n)
        cum: list[float] = []
        acc = 0.0
        for _, _, w in self.bins:
            acc += w
            cum.append(acc)
        picks = rng.choices(self.bins, cum_weights=cum, k=n)
        return [lo if lo == hi else rng.randint(lo, hi) for lo, hi, _ in picks]

    def mean(self) -> float:
        """``sum(w_i * (lo_i + hi_i) / 2) / sum(w_i)`` (exact)."""
        total = sum(w for _, _, w in self.bins)
        return sum(w * (lo + hi) / 2.0 for lo, hi, w in self.bins) / total

    def support(self) -> tuple[int, int]:
        used = [(lo, hi) for lo, hi, w in self.bins if w > 0]
        return (min(lo for lo, _ in used), max(hi for _, hi in used))

    def scaled(self, factor: float) -> Empirical:
        _check_factor(factor)
        out = []
        for lo, hi, w in self.bins:
            slo = _scale_len(lo, factor)
            out.append((slo, max(slo, _scale_len(hi, factor)), w))
        return Empirical(tuple(out))

    def record(self) -> EmpiricalLength:
        return EmpiricalLength(bins=[[lo, hi, w] for lo, hi, w in self.bins])


# ---------------------------------------------------------------------------- validation


def _type_name(value: Any) -> str:
    return {bool: "boolean", str: "string", float: "number", int: "integer", list: "list",
            dict: "table"}.get(type(value), type(value).__name__)


def _want_int(value: Any, field: str, *, minimum: int, what_min: str | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DistributionError(field, f"must be a whole number of tokens, got "
                                       f"{_type_name(value)} {value!r}")
    if value < minimum:
        bound = what_min or str(minimum)
        raise DistributionError(field, f"must be >= {bound}, got {value}")


def _want_number(value: Any, field: str, *, positive: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DistributionError(field, f"must be a number, got {_type_name(value)} {value!r}")
    if not math.isfinite(value):
        raise DistributionError(field, f"must be finite, got {value!r}")
    if positive and value <= 0:
        raise DistributionError(field, f"must be > 0, got {value!r}")
    if not positive and value < 0:
        raise DistributionError(field, f"must be >= 0, got {value!r}")


_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # kind: (required, optional)
    "fixed": (("value",), ()),
    "uniform": (("min", "max"), ()),
    "normal": (("mean", "std", "max"), ("min",)),
    "lognormal": (("median", "sigma", "max"), ("min",)),
    "empirical": (("bins",), ()),
}


def distribution_from_dict(spec: Any) -> LengthDistribution:
    """Build a distribution from a workload file's value.

    A bare whole number ``n`` means ``fixed`` with ``value = n``. Otherwise a mapping with
    ``kind`` (one of :data:`KINDS`) and that kind's fields; ``min`` defaults to 1 for ``normal``
    and ``lognormal``, whose ``max`` is required (a long tail must end somewhere below the
    model's context). Raises :class:`DistributionError` naming the field and what it allows.
    """
    if isinstance(spec, int) and not isinstance(spec, bool):
        if spec < 1:
            raise DistributionError("value", f"a length must be >= 1 token, got {spec}")
        return Fixed(spec)
    if not isinstance(spec, Mapping):
        raise DistributionError("kind", "must be a whole number of tokens or a table with "
                                        f"kind = one of {', '.join(KINDS)}; got "
                                        f"{_type_name(spec)} {spec!r}")
    kind = spec.get("kind")
    if kind not in _FIELDS:
        shown = "missing" if kind is None else repr(kind)
        raise DistributionError("kind", f"unknown distribution {shown}; allowed: "
                                        f"{', '.join(KINDS)}")
    required, optional = _FIELDS[kind]
    for key in spec:
        if key != "kind" and key not in required and key not in optional:
            allowed = ", ".join(("kind", *required, *optional))
            raise DistributionError(str(key), f"unknown field for kind {kind!r}; allowed: "
                                              f"{allowed}")
    for key in required:
        if key not in spec:
            raise DistributionError(key, f"missing; kind {kind!r} needs "
                                         f"{', '.join(required)}")
    if kind == "fixed":
        return Fixed(spec["value"])
    if kind == "uniform":
        return Uniform(spec["min"], spec["max"])
    if kind == "normal":
        return Normal(spec["mean"], spec["std"], spec.get("min", 1), spec["max"])
    if kind == "lognormal":
        return LogNormal(spec["median"], spec["sigma"], spec.get("min", 1), spec["max"])
    return Empirical(_parse_bins(spec["bins"]))


def _parse_bins(raw: Any) -> tuple[tuple[int, int, float], ...]:
    if not isinstance(raw, list) or not raw:
        raise DistributionError("bins", "must be a non-empty list of [lo, hi, weight] or "
                                        f"[value, weight]; got {_type_name(raw)} {raw!r}")
    out: list[tuple[int, int, float]] = []
    for i, item in enumerate(raw):
        if not isinstance(item, list) or len(item) not in (2, 3):
            raise DistributionError(f"bins[{i}]", "must be [lo, hi, weight] or [value, weight],"
                                                  f" got {item!r}")
        if len(item) == 2:
            out.append((item[0], item[0], item[1]))
        else:
            out.append((item[0], item[1], item[2]))
    return tuple(out)
