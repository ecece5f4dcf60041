"""What the `infer-prof estimate` tests share: the command run in-process at a set terminal
width (:func:`run`), and prices from the shipped snapshot (:func:`no_sky_home`, autouse where a
module imports it: ``from tests.unit.estimate_cli import no_sky_home, run``)."""

from __future__ import annotations

from functools import cache

import pytest
import typer
from click.testing import Result
from typer.testing import CliRunner

from infer_prof.cli.estimate import estimate_command


@pytest.fixture(autouse=True)
def no_sky_home(tmp_path, monkeypatch):
    """HOME in the test's own folder: no SkyPilot catalog of the user's, so the prices come
    from the shipped snapshot."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@cache
def estimate_app() -> typer.Typer:
    """``estimate`` alone, as a Typer app."""
    a = typer.Typer()
    a.command()(estimate_command)
    return a


def run(*args: str, columns: int = 200) -> Result:
    """``infer-prof estimate args...`` in-process, the terminal ``columns`` wide."""
    return CliRunner().invoke(estimate_app(), list(args), env={"COLUMNS": str(columns)})
