"""How a configuration field is given on the command line: :class:`Opt`, declared once on the
field with ``typing.Annotated`` (:class:`infer_prof.run.config.RunConfig`), and the parse
functions that turn what the user types into the field's value.

An :class:`Opt` holds the flag(s), the help, the group it is shown in, the type the user types
when it differs from the field's (``--concurrency 1,8,32`` is text, the field a ``list[int]``),
the parse function from one to the other, the allowed range or choices, and whether the flag
negates the field (``--no-history`` sets ``history`` to False). It knows no command-line
library: ``infer_prof.cli`` builds the typer command from these declarations by field name
(:mod:`infer_prof.cli.run`), and :func:`infer_prof.run.config.validate` checks the ranges and
choices.

To add an option to ``infer-prof run``: add the field to ``RunConfig`` with its ``Opt``
(docs/development.md, "Adding a run option").
"""

from __future__ import annotations

import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass, fields
from typing import Any

# the groups ``run --help`` shows the options in, in this order
SERVER = "Server and engine"
LOAD = "Load"
PROMPTS = "Prompts"
COST = "Cost"
OUTPUT = "Output and history"
GROUPS = (SERVER, LOAD, PROMPTS, COST, OUTPUT)


@dataclass(frozen=True)
class Range:
    """The values a number (or each number of a list) may take, and how the error says it:
    ``{flag} must be {says}, got {value}``. ``low``/``high`` are inclusive unless ``*_open``."""

    says: str  # e.g. "a positive integer", "positive seconds", "0 or more"
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def holds(self, value: float) -> bool:
        """Whether ``value`` is allowed (NaN never is)."""
        if math.isnan(value):
            return False
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)


POSITIVE_INT = Range("a positive integer", low=1)
POSITIVE_S = Range("positive seconds", low=0, low_open=True)


@dataclass(frozen=True)
class Opt:
    """One command-line option of a configuration field (see the module docstring). A field
    whose type is a ``Literal`` (``Literal["completions", "chat"] | None``) is typed as text
    and its values checked by :func:`check_declared`, which names them in its message."""

    flags: tuple[str, ...]  # e.g. ("--num-requests", "-n"); a bool pair as "--x/--no-x"
    help: str
    group: str | None = None  # run's: one of GROUPS (its help panel); None: the one panel
    typed: Any = None  # the type the user types, when not the field's (e.g. str, list[str])
    parse: Callable[[Any, str], Any] | None = None  # (user's value, flag) -> field value
    range: Range | None = None  # (the allowed texts of a Literal field: its Literal's values)
    negate: bool = False  # a bool field the flag sets to False (--no-history -> history)
    repeat: bool = False  # given once per --endpoint: the CLI takes a list, the field the first
    envvar: str | None = None
    chosen_default: bool = False  # not given: chosen when the run starts (the help says how)
    positional: bool = False  # an argument, not an option (``compare RESULTS...``)

    @property
    def flag(self) -> str:
        """The flag error messages name: the first long one."""
        return self.flags[0].split("/")[0]


@dataclass(frozen=True)
class Internal:
    """Marks a configuration field that has no flag: set by the program, not the user."""

    why: str


@dataclass(frozen=True)
class Field:
    """One field of a configuration class as declared: its name, its type, its default and its
    :class:`Opt` (None for an :class:`Internal` field)."""

    name: str
    hint: Any  # the field's type, without the Annotated metadata
    default: Any  # dataclasses.MISSING when the field has none
    opt: Opt | None


def declared_fields(cls: type) -> Iterator[Field]:
    """The dataclass ``cls``'s fields with their :class:`Opt` (or None for an
    :class:`Internal` one), in declaration order. A field with neither raises TypeError."""
    hints = typing.get_type_hints(cls, include_extras=True)
    for f in fields(cls):
        hint = hints[f.name]
        meta = getattr(hint, "__metadata__", ())
        opts = [m for m in meta if isinstance(m, Opt)]
        if not opts and not any(isinstance(m, Internal) for m in meta):
            raise TypeError(f"{cls.__name__}.{f.name} has no Opt (or Internal) declaration")
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)
        yield Field(f.name, typing.get_args(hint)[0] if meta else hint, default,
                    opts[0] if opts else None)


def literal_choices(hint: Any) -> tuple[str, ...]:
    """The values of a ``Literal[...]`` type (or ``Literal[...] | None``); () for another type."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    for part in typing.get_args(hint) if union else (hint,):
        if typing.get_origin(part) is typing.Literal:
            return typing.get_args(part)
    return ()


def check_declared(obj: object) -> None:
    """Check each field's value of the dataclass ``obj`` against its Opt's range and choices
    (raises ValueError naming the flag, e.g. ``--turns must be a positive integer, got 0``)."""
    for f in declared_fields(type(obj)):
        value = getattr(obj, f.name)
        if f.opt is None or value is None:
            continue
        opt, choices = f.opt, literal_choices(f.hint)
        if choices and value not in choices:
            raise ValueError(f"{opt.flag} must be {' or '.join(choices)}, got {value!r}")
        if opt.range is not None:
            for v in value if isinstance(value, list) else [value]:
                if not opt.range.holds(v):
                    raise ValueError(f"{opt.flag} must be {opt.range.says}, got {v}")


# --- parse functions: (what the user typed, the flag) -> the field's value; ValueError on bad

_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "kib": 2**10,
    "m": 10**6, "mb": 10**6, "mib": 2**20,
    "g": 10**9, "gb": 10**9, "gib": 2**30,
    "t": 10**12, "tb": 10**12, "tib": 2**40,
}


def parse_size(text: str, flag: str) -> int:
    """Bytes from ``512MiB``, ``24GiB``, ``1.5GB`` or a plain integer (binary units are powers
    of 1024, decimal ones of 1000)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"{flag} {text!r} is not a size; write e.g. 512MiB, 24GiB or 1073741824")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def parse_reasoning_parser(text: str, flag: str) -> str:
    """``auto``, ``none`` or a vLLM reasoning parser's name (lower-case letters, digits and
    ``_``, as vLLM registers them: ``deepseek_r1``, ``qwen3``, ``openai_gptoss``)."""
    value = text.strip()
    if not re.fullmatch(r"[a-z0-9_]+", value):
        raise ValueError(f"{flag} {text!r} is not a parser name; write auto, none, or a vLLM "
                         "reasoning parser such as deepseek_r1, qwen3 or openai_gptoss")
    return value


def parse_labels(items: list[str], flag: str = "--label") -> dict[str, str]:
    """``KEY=VALUE`` pairs into a dict (whitespace around each stripped)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} {item!r} is not KEY=VALUE; write e.g. --label "
                             "instance=a100-spot")
        out[key.strip()] = value.strip()
    return out


def split_engine_args(items: list[str], flag: str = "--engine-arg") -> list[str]:
    """``--engine-arg`` values as engine argv: ``"--seed 1"`` (a flag and its value in one
    quoted argument) becomes ``["--seed", "1"]``; anything else is kept verbatim."""
    out: list[str] = []
    for a in items:
        out += a.split(" ", 1) if a.startswith("--") and " " in a else [a]
    return out


def parse_json_object(text: str, flag: str) -> str:
    """A JSON object given on the command line (``--speculative-config``), as canonical JSON
    text (sorted keys, no spaces), so that the same settings spelt two ways record and
    fingerprint alike."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{flag} is not JSON ({exc}); write e.g. {flag} "
                         '\'{"method":"ngram","num_speculative_tokens":3}\'') from None
    if not isinstance(value, dict) or not value:
        raise ValueError(f"{flag} must be a JSON object with the engine's settings, got {text!r}")
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def parse_warmup(text: str, flag: str = "--warmup") -> tuple[str, int | None]:
    """``--warmup``: ``auto`` -> ("steady", None); ``none`` or ``0`` -> ("requests", 0);
    ``N`` -> ("requests", N); ``Ns`` (seconds) -> ("Ns", None)."""
    t = text.strip().lower()
    if t in ("auto", "steady"):
        return "steady", None
    if t in ("none", "0", "off"):
        return "requests", 0
    if re.fullmatch(r"\d+", t):
        return "requests", int(t)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*s", t)
    if m and float(m.group(1)) > 0:
        return f"{m.group(1)}s", None
    raise ValueError(f"{flag} {text!r} is not a warm-up; give auto, none, a request count (e.g. "
                     "16) or a duration (e.g. 30s)")
