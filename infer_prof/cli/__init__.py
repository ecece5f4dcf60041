"""The ``infer-prof`` command line: a thin layer that parses, calls the library, and prints.

Each command's module is imported only when that command runs (or its own ``--help`` is asked):
the modules reach the run machinery, the result documents and the load drivers, and
``infer-prof --help`` lists the commands from :data:`COMMANDS` without importing any of them
(plain click formatting there: rich's help renderer alone costs ~0.1 s of start-up).
"""

from __future__ import annotations

import importlib
from difflib import get_close_matches
from typing import Any

import typer
from typer import _click
from typer.core import TyperCommand, TyperGroup

from infer_prof import __version__

#: name -> (module, attribute: a command function or a ``typer.Typer`` group, the one line
#: ``infer-prof --help`` lists it with; the command's own ``--help`` says the rest).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("infer_prof.cli.run", "run_command",
            "Profile a model on vLLM: latency, throughput, cost."),
    "plan": ("infer_prof.cli.plan", "plan_command",
             "Precision, parallelism and memory for a model and load."),
    "estimate": ("infer_prof.cli.estimate", "estimate_command",
                 "Predict which GPU to rent: frontiers, priced and ranked."),
    "models": ("infer_prof.cli.models", "models_command",
               "List the known model aliases."),
    "prices": ("infer_prof.cli.prices", "prices_command",
               "List GPU prices, cheapest per GPU-hour first."),
    "calibrate": ("infer_prof.cli.calibrate", "calibrate_command",
                  "Check the load generator against a known server."),
    "compare": ("infer_prof.cli.compare", "compare_command",
                "Compare runs side by side."),
    "regress": ("infer_prof.cli.regress", "regress_command",
                "Is the current run worse than the baseline?"),
    "history": ("infer_prof.cli.history", "history_app",
                "Recorded runs and one metric's trend; import, export."),
    "report": ("infer_prof.cli.report", "report_command",
               "Write one self-contained HTML report of runs."),
    "matrix": ("infer_prof.cli.matrix", "matrix_command",
               "Run a comparison matrix, here or on Ray."),
    "quality": ("infer_prof.cli.quality", "quality_command",
                "Check the answers: accuracy, perplexity, vs a reference."),
}


def load_command(name: str) -> _click.Command:
    """The click command ``name`` of :data:`COMMANDS`, its module imported now."""
    module, attribute, _ = COMMANDS[name]
    target: Any = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        group = typer.main.get_group(target)
        group.name = name
        return group
    holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    holder.command(name)(target)
    return typer.main.get_command(holder)


class LazyGroup(TyperGroup):
    """The root group: lists :data:`COMMANDS` by their one line, loads a command on use."""

    _listing = False

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return [*COMMANDS, *(n for n in self.commands if n not in COMMANDS)]

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            if self._listing:  # the root's --help: the line, not the module
                return TyperCommand(name=cmd_name, help=COMMANDS[cmd_name][2])
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: _click.Context, args: list[str]
                        ) -> tuple[str | None, _click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except _click.exceptions.UsageError as exc:  # suggest among all, not only those loaded
            matches = get_close_matches(args[0], list(COMMANDS)) if args else []
            if matches and "Did you mean" not in exc.message:
                exc.message = (f"{exc.message.rstrip('.')}. Did you mean "
                               f"{', '.join(repr(m) for m in matches)}?")
            raise

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="infer-prof",
    cls=LazyGroup,
    rich_markup_mode=None,
    help="Profile LLM inference on vLLM: latency (TTFT, TPOT, ITL, E2E), throughput, GPU "
    "telemetry, and cost per million tokens.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"infer-prof {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """infer-prof: what LLM serving really costs, measured."""


def main() -> None:
    """Console-script entry point."""
    app()
