"""Helpers shared by the subcommands: one-line errors (the parse functions of ``run``'s options
are declared with them in :mod:`infer_prof.config.options`)."""

from __future__ import annotations

from typing import NoReturn

import typer

from infer_prof.config import options


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code`` (2 = bad input)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def parse_warmup(text: str) -> tuple[str, int | None]:
    """``--warmup`` as (mode, count) (:func:`infer_prof.config.options.parse_warmup`); bad text:
    one-line error, exit 2."""
    try:
        return options.parse_warmup(text)
    except ValueError as exc:
        fail(str(exc))
