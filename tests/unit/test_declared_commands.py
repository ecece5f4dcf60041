"""The commands built from declared options (:mod:`infer_prof.cli.declared`): each option is
its options class's field, by name and in order, typed as the field (None where it may be None),
and the command hands the parsed values to its body as one typed object."""

from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from infer_prof.cli import app
from infer_prof.cli.calibrate import CalibrateOptions, calibrate_command
from infer_prof.cli.compare import CompareOptions, compare_command
from infer_prof.cli.declared import declared_command
from infer_prof.cli.history import (
    ExportOptions,
    HistoryOptions,
    ImportOptions,
    export_command,
    history_command,
    import_command,
)
from infer_prof.cli.matrix import MatrixOptions, matrix_command
from infer_prof.cli.plan import PlanOptions, plan_command
from infer_prof.cli.prices import PricesOptions, prices_command
from infer_prof.cli.regress import RegressOptions, regress_command
from infer_prof.cli.report import ReportOptions, report_command
from infer_prof.config.options import POSITIVE_INT, Opt, declared_fields

COMMANDS = [
    ("plan", PlanOptions, plan_command),
    ("regress", RegressOptions, regress_command),
    ("compare", CompareOptions, compare_command),
    ("history", HistoryOptions, history_command),
    ("prices", PricesOptions, prices_command),
    ("calibrate", CalibrateOptions, calibrate_command),
    ("matrix", MatrixOptions, matrix_command),
    ("report", ReportOptions, report_command),
    ("history export", ExportOptions, export_command),
    ("history import", ImportOptions, import_command),
]


@pytest.mark.parametrize(("name", "options", "command"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_command_takes_its_declared_fields(name, options, command) -> None:
    params = [p for p in inspect.signature(command).parameters.values() if p.name != "ctx"]
    assert [p.name for p in params] == [f.name for f in declared_fields(options)]
    for p in params:
        if p.default is None:  # the hint says None where the value can be None
            hint = typing.get_args(p.annotation)[0]
            assert isinstance(hint, types.UnionType) and type(None) in hint.__args__, p.name
    result = CliRunner().invoke(app, [*name.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert command.__doc__.split()[0] in result.output  # the body's docstring is the help


def test_no_command_declares_its_options_apart() -> None:
    """Every command with options beyond one takes them from a declaration: the only
    ``typer.Option`` calls left are the builder's and the app's and ``models``' single flag."""
    import ast
    from pathlib import Path

    import infer_prof.cli as cli

    calls = {}
    for path in Path(cli.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        n = sum(isinstance(c, ast.Call) and getattr(c.func, "attr", None) == "Option"
                for c in ast.walk(tree))
        if n:
            calls[path.name] = n
    assert set(calls) <= {"declared.py", "__init__.py", "models.py"}, calls


def test_the_body_gets_parsed_checked_values() -> None:
    @dataclass(frozen=True)
    class Opts:
        count: Annotated[int, Opt(("--count",), "How many.", range=POSITIVE_INT)] = 1
        words: Annotated[list[str] | None, Opt(
            ("--word",), "Words.", parse=lambda v, flag: [w.upper() for w in v])] = None
        loud: Annotated[bool, Opt(("--quiet",), "Quieter.", negate=True)] = True

    seen: list[Opts] = []

    def body(o: Opts) -> None:
        """Test body."""
        seen.append(o)

    cli = typer.Typer()
    cli.command()(declared_command(Opts, body))
    runner = CliRunner()
    assert runner.invoke(cli, ["--count", "3", "--word", "a", "--word", "b", "--quiet"]) \
        .exit_code == 0
    assert seen == [Opts(count=3, words=["A", "B"], loud=False)]
    bad = runner.invoke(cli, ["--count", "0"])
    assert bad.exit_code == 2 and "--count must be a positive integer, got 0" in bad.output
    assert len(seen) == 1  # a bad value never reaches the body
