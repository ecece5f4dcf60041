"""Helpers shared by the subcommands: one-line errors and size parsing."""

from __future__ import annotations

import re
from typing import NoReturn

import typer

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "kib": 2**10,
    "m": 10**6,
    "mb": 10**6,
    "mib": 2**20,
    "g": 10**9,
    "gb": 10**9,
    "gib": 2**30,
    "t": 10**12,
    "tb": 10**12,
    "tib": 2**40,
}


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code`` (2 = bad input)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def parse_size(text: str, flag: str) -> int:
    """Bytes from ``512MiB``, ``24GiB``, ``1.5GB`` or a plain integer."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        fail(f"{flag} {text!r} is not a size; write e.g. 512MiB, 24GiB or 1073741824")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def parse_labels(items: list[str] | None) -> dict[str, str]:
    """``KEY=VALUE`` pairs into a dict; a malformed one is a bad-input error."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--label {item!r} is not KEY=VALUE; write e.g. --label instance=a100-spot")
        out[key.strip()] = value.strip()
    return out


def parse_warmup(text: str) -> tuple[str, int | None]:
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
    fail(f"--warmup {text!r} is not a warm-up; give auto, none, a request count (e.g. 16) or "
         "a duration (e.g. 30s)")
