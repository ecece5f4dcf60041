"""Real ``run --endpoint --quality`` results for the tests of the quality figures' outputs
(compare, history, the gate, ``--json``, the HTML report): the load and the check both through
real HTTP to :class:`tests.integration.quality_server.QualityServer`, priced with
``--price-per-hour``, recorded in a SQLite history."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.integration.quality_server import Behaviour, QualityServer

LOAD = ("-c", "1", "-n", "4", "--input-len", "16", "--output-len", "8", "--warmup", "none")


def _prompts(n: int) -> set[str]:
    from infer_prof.catalog.trained_tiny import ADDITION_TASKS

    return {json.loads(ln)["prompt"] for ln in ADDITION_TASKS.read_text().splitlines()[:n]}


@dataclass(frozen=True)
class QualityRuns:
    """The result files: ``ref`` (every sum right, $16/h), ``cheap_bad`` (10 of 100 wrong, $1/h,
    below a 0.99 floor of ``ref``), ``mid_good`` (every sum right, $4/h, against ``ref``),
    ``unchecked`` (no --quality, $0.25/h); the history they are recorded in; and what each run
    printed (``stdout`` by name: ``--json`` for all but ``ref``). The prices are 4x apart, so
    that a loaded machine's throughput swings between runs cannot reorder their $/1M tokens."""

    folder: Path
    history: str
    stdout: dict[str, str]

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.json"


def run_once(folder: Path, name: str, price: float, wrong: int, *extra: str) -> str:
    """One run against a fresh server answering ``wrong`` sums wrong; its stdout."""
    server = QualityServer(Behaviour(model="tiny-adder", wrong=_prompts(wrong), p_char=0.5))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "infer_prof", "run", "--endpoint", server.url, "--model",
             "tiny-adder", *LOAD, "--price-per-hour", str(price), "--gpu", "H100-SXM",
             "--label", f"variant={name}", "--results-dir", str(folder), "--output",
             str(folder / f"{name}.json"), "--history", f"sqlite:///{folder / 'h.db'}", *extra],
            capture_output=True, text=True, timeout=300)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    return done.stdout


def make_runs(folder: Path) -> QualityRuns:
    """The four runs of :class:`QualityRuns` in ``folder``."""
    ref = str(folder / "ref.json")
    out = {"ref": run_once(folder, "ref", 16.0, 0, "--quality", "addition")}
    floor = ("--quality", "addition", "--quality-reference", ref, "--min-quality", "0.99",
             "--json")
    out["cheap_bad"] = run_once(folder, "cheap_bad", 1.0, 10, *floor)
    out["mid_good"] = run_once(folder, "mid_good", 4.0, 0, *floor)
    out["unchecked"] = run_once(folder, "unchecked", 0.25, 0, "--json")
    return QualityRuns(folder, f"sqlite:///{folder / 'h.db'}", out)
