"""A run's summary at 80 columns, as a pipe shows it: ``run --endpoint`` against the built-in
synthetic server with ``COLUMNS=80``; no line past the edge, no word broken across lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from infer_prof.catalog.models import resolve_model

from .conftest import REPO

pytestmark = pytest.mark.integration


def test_run_summary_reads_at_80_columns(synthetic, tmp_path):
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=8)
    p = subprocess.run(
        [sys.executable, "-m", "infer_prof", "run", "--endpoint", server.url,
         "--model", resolve_model("tiny-llama").path, "-c", "2", "-n", "8", "--input-len", "16",
         "--output-len", "8", "--no-progress", "--no-history", "--results-dir", str(tmp_path)],
        env={**os.environ, "COLUMNS": "80"}, cwd=REPO, capture_output=True, text=True,
        timeout=120,
    )
    assert p.returncode in (0, 1), p.stdout + p.stderr  # 1: too short a run to be valid, by design
    out = p.stdout + p.stderr
    summary = out[: out.index("result: ")]
    lines = summary.splitlines()
    assert max(len(ln) for ln in lines) <= 80, summary
    tokens = {t for ln in lines for t in re.split(r"[\s│┃]+", ln) if t}
    for word in ("TTFT", "(/v1/completions)", "--price-per-hour)", "requests/s", "1,", "(C"):
        assert any(t.startswith(word) for t in tokens), (word, summary)
    keys = ("requests/s", "output tokens/s", "total tokens/s", "API", "cost", "energy")
    for key in keys:  # each key on one line, its value beside it
        assert any(ln.startswith(key + " ") for ln in lines), (key, summary)
