"""The tables read at 80 columns (a pipe, or a narrow terminal): no line past the edge, no word
broken across lines. Each command runs as a user's pipe would show it (``COLUMNS=80``, stdout
not a terminal) and every identifier the table shows is found whole on one line. The ``models``
table is tests/integration/test_models_command.py's (the command imports transformers)."""

from __future__ import annotations

import json
import re

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from infer_prof.cli import app
from infer_prof.report.fit import fit_table, share

WIDTH = 80


def invoke(*args: str, columns: int = WIDTH) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def assert_reads_at_80(text: str, words: set[str], cut_ok: set[str] = frozenset()) -> None:
    """No line over 80 columns; each of ``words`` whole on a line (those of ``cut_ok`` may be
    cut short with '…' instead, never broken across lines)."""
    lines = text.splitlines()
    assert lines and max(len(ln) for ln in lines) <= WIDTH, text
    tokens = {t for ln in lines for t in re.split(r"[\s│┃]+", ln) if t}
    for w in words:
        if w in tokens or (" " in w and any(w in ln for ln in lines)):
            continue  # a name with spaces in it (GCP's "1x T4 (attached)") whole on its line
        if w in cut_ok and any(t.endswith("…") and w.startswith(t[:-1]) for t in tokens):
            continue
        raise AssertionError(f"{w!r} is not whole on any line:\n{text}")


def test_plan_at_80_columns():
    text = invoke("plan", "--model", "llama-2-70b", "--gpu", "H100-SXM")
    plan = json.loads(invoke("plan", "--model", "llama-2-70b", "--gpu", "H100-SXM", "--json"))
    assert len(plan["candidates"]) == 7
    assert_reads_at_80(text, {"bf16", "fp8", "int8", "bnb-nf4", '"fp8_per_tensor",', "chosen",
                              "rejected", "unavailable", "(--kv-cache-dtype"})


@pytest.mark.parametrize("args", [(), ("--gpu", "H100"), ("--gpu", "L40S", "--spot")])
def test_prices_at_80_columns(args):
    text = invoke("prices", *args)
    rows = [r for r in json.loads(invoke("prices", *args, "--json")) if r["kind"] == "instance"]
    assert rows
    clouds = {r["provider"] for r in rows}
    instances = {r["instance_type"] for r in rows}
    assert_reads_at_80(text, clouds | instances, cut_ok=instances)
    assert "$/GPU-h" in text  # the price per GPU-hour is never what is left out


def test_fit_leaves_out_in_order_then_shares_the_room():
    console = Console(width=30)
    t = Table("name", "a long header", "note", box=None)
    t.add_row("identifier-of-twenty", "1", "a few words that wrap")
    dropped, cut = fit_table(console, t, ("note", "a long header"))
    assert (dropped, cut) == (["note"], [])
    assert [(c.header, c.width) for c in t.columns] == [("name", 20), ("a long header", 6)]
    assert share([3, 10, 0], 8) == [3, 5, 0] and share([2, 2], 9) == [2, 2]
