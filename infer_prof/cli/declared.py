"""Typer commands built from declared options: each option is declared once, on a field of an
options dataclass (``Annotated[type, Opt(...)]``, :mod:`infer_prof.config.options`), and the
command's parameters, their parsing and their checks follow from the declarations by name.

``run`` is built from :class:`~infer_prof.run.config.RunConfig` this way (its fields are the
run's configuration); the other commands with many options (``plan``, ``regress``,
``compare``, ``history``, ``prices``, ``calibrate``) declare theirs in a small dataclass beside
the command and get them as one typed object: :func:`declared_command`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import MISSING
from typing import Annotated, Any, TypeVar

import typer

from infer_prof.cli.common import fail
from infer_prof.config.options import Field, check_declared, declared_fields, literal_choices

T = TypeVar("T")


def command_parameter(f: Field) -> inspect.Parameter:
    """The typer parameter of one declared field: ``Annotated[the type the user types,
    typer.Option(flags, help, envvar, rich_help_panel=group)]`` (``typer.Argument`` for a
    positional one) with its default (None where the value is parsed, repeated or chosen at run
    time; False for a negating flag; none for a required one)."""
    opt = f.opt
    assert opt is not None
    typed: Any = opt.typed if opt.typed is not None else f.hint
    default = inspect.Parameter.empty if f.default is MISSING else f.default
    if literal_choices(typed):  # text: the check names the choices in its one-line error
        typed = str | None if default is None else str
    if opt.negate:
        typed, default = bool, False
    elif opt.repeat:
        typed, default = list[typed.__args__[0]] | None, None  # list[X] from X | None
    elif opt.parse is not None or opt.chosen_default:
        typed, default = typed | None, None
    if opt.positional:
        option = typer.Argument(help=opt.help, show_default=False)
    else:
        option = typer.Option(*opt.flags, help=opt.help, envvar=opt.envvar,
                              rich_help_panel=opt.group)
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[typed, option])


def parse_declared(cls: type[T], given: dict[str, Any]) -> T:
    """The options object of class ``cls`` from the command line's values by field name: each
    value parsed by its ``Opt.parse`` (a value not given keeps the field's default), then every
    field checked against its declared range and choices. Bad input: one-line error, exit 2."""
    values: dict[str, Any] = {}
    try:
        for f in declared_fields(cls):
            if f.opt is None or f.name not in given:
                continue
            value = given[f.name]
            if f.opt.negate:
                if value:
                    values[f.name] = False
            elif value is not None:
                values[f.name] = f.opt.parse(value, f.opt.flag) if f.opt.parse else value
        options = cls(**values)
        check_declared(options)
    except ValueError as exc:
        fail(str(exc))
    return options


def declared_command(cls: type[T], body: Callable[[T], None]) -> Callable[..., None]:
    """A typer command whose parameters are ``cls``'s declared fields; it parses and checks
    them (:func:`parse_declared`) and calls ``body`` with the options object. The command's
    help is ``body``'s docstring."""
    params = [command_parameter(f) for f in declared_fields(cls) if f.opt is not None]

    def command(**given: Any) -> None:
        body(parse_declared(cls, given))

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    command.__doc__ = body.__doc__
    command.__name__ = body.__name__
    return command


def declared_callback(cls: type[T],
                      body: Callable[[typer.Context, T], None]) -> Callable[..., None]:
    """:func:`declared_command` for a command group's callback: ``body`` also gets the typer
    context (to hand options to the group's subcommands)."""
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=typer.Context)]
    params += [command_parameter(f) for f in declared_fields(cls) if f.opt is not None]

    def callback(ctx: typer.Context, **given: Any) -> None:
        body(ctx, parse_declared(cls, given))

    callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    callback.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    callback.__doc__ = body.__doc__
    callback.__name__ = body.__name__
    return callback
