"""Reading the fields of a parsed workload or suite file: one-line :class:`WorkloadError`s that
name the file, the field and what is allowed, and :class:`FieldReader`, whose methods check one
value each (a table's allowed keys, whole numbers, numbers, names, length distributions, lists of
load points). Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from infer_prof.core.messages import one_line
from infer_prof.core.workload.distributions import (
    DistributionError,
    LengthDistribution,
    distribution_from_dict,
)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class WorkloadError(ValueError):
    """A workload or suite that is not valid: ``"<source>: field '<field>': <problem>"``."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        where = f"field {field!r}: " if field else ""
        super().__init__(one_line(f"{source}: {where}{problem}"))



def type_name(value: Any) -> str:
    """What ``value`` is, in the words of a TOML file (string, number, integer, table, ...)."""
    return {bool: "boolean", str: "string", float: "number", int: "integer", list: "list",
            dict: "table"}.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class FieldReader:
    source: str

    def err(self, field: str, problem: str) -> WorkloadError:
        return WorkloadError(self.source, field, problem)

    def table(self, value: Any, field: str, allowed: Iterable[str]) -> Mapping[str, Any]:
        allowed = tuple(allowed)
        if not isinstance(value, Mapping):
            raise self.err(field, f"must be a table, got {type_name(value)} {value!r}")
        for key in value:
            if key not in allowed:
                where = f"{field}.{key}" if field else str(key)
                raise self.err(where, f"unknown field; allowed: {', '.join(allowed)}")
        return value

    def integer(self, value: Any, field: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.err(field, f"must be a whole number >= {minimum}, got "
                                  f"{type_name(value)} {value!r}")
        if value < minimum:
            raise self.err(field, f"must be a whole number >= {minimum}, got {value}")
        return value

    def number(self, value: Any, field: str, *, minimum: float, strict: bool,
               allow_inf: bool = False) -> float:
        op = ">" if strict else ">="
        what = f"a number {op} {minimum:g}" + (" (or inf)" if allow_inf else "")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.err(field, f"must be {what}, got {type_name(value)} {value!r}")
        v = float(value)
        if math.isnan(v) or (math.isinf(v) and not (allow_inf and v > 0)):
            raise self.err(field, f"must be {what}, got {value!r}")
        if v < minimum or (strict and v == minimum):
            raise self.err(field, f"must be {what}, got {value!r}")
        return v

    def string(self, value: Any, field: str) -> str:
        if not isinstance(value, str):
            raise self.err(field, f"must be a string, got {type_name(value)} {value!r}")
        return value

    def name(self, value: Any, field: str) -> str:
        text = self.string(value, field)
        if not _NAME_RE.match(text):
            raise self.err(field, "must start with a letter or digit and hold only letters, "
                                  f"digits, '.', '_' and '-'; got {text!r}")
        return text

    def length_dist(self, value: Any, field: str) -> LengthDistribution:
        if isinstance(value, LengthDistribution):
            return value
        try:
            return distribution_from_dict(value)
        except DistributionError as exc:
            raise self.err(f"{field}.{exc.field}", exc.problem) from None

    def int_list(self, value: Any, field: str, minimum: int) -> tuple[int, ...]:
        if not isinstance(value, list) or not value:
            raise self.err(field, f"must be a non-empty list of whole numbers >= {minimum}, "
                                  f"got {type_name(value)} {value!r}")
        return tuple(self.integer(v, f"{field}[{i}]", minimum) for i, v in enumerate(value))

    def rate_list(self, value: Any, field: str) -> tuple[float, ...]:
        if not isinstance(value, list) or not value:
            raise self.err(field, "must be a non-empty list of rates in requests/s > 0 (inf "
                                  f"allowed), got {type_name(value)} {value!r}")
        return tuple(self.number(v, f"{field}[{i}]", minimum=0.0, strict=True, allow_inf=True)
                     for i, v in enumerate(value))
