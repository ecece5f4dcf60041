"""The ``infer-prof`` command line: a thin layer that parses, calls the library, and prints."""

from __future__ import annotations

import typer

from infer_prof import __version__
from infer_prof.cli.calibrate import calibrate_command
from infer_prof.cli.compare import compare_command
from infer_prof.cli.history import history_app
from infer_prof.cli.matrix import matrix_command
from infer_prof.cli.models import models_command
from infer_prof.cli.plan import plan_command
from infer_prof.cli.prices import prices_command
from infer_prof.cli.quality import quality_command
from infer_prof.cli.regress import regress_command
from infer_prof.cli.report import report_command
from infer_prof.cli.run import run_command

app = typer.Typer(
    name="infer-prof",
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


app.command("run")(run_command)
app.command("plan")(plan_command)
app.command("models")(models_command)
app.command("prices")(prices_command)
app.command("calibrate")(calibrate_command)
app.command("compare")(compare_command)
app.command("regress")(regress_command)
app.add_typer(history_app, name="history")
app.command("report")(report_command)
app.command("matrix")(matrix_command)
app.command("quality")(quality_command)


def main() -> None:
    """Console-script entry point."""
    app()
