"""LiteLLM's proxy server (PyPI, in its own virtual environment: scripts/install_litellm.sh)
in front of the synthetic server. LiteLLM drops the engine's per-chunk usage and its chunks
with empty text (a random-weight model streams many: partial UTF-8 sequences), so all of a
request's tokens reach the client in its last event: the first token's time is unknown, and
the run must say so instead of reporting TTFT = E2E and TPOT 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infer_prof.run.calibrate import start_synthetic
from tests.integration.conftest import cli
from tests.integration.gateways import LITELLM_KEY, LiteLLM, litellm_binary


@pytest.fixture(scope="module")
def upstream():
    s = start_synthetic(9.0, 3.5, 64, extra_args=("--empty-text",))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def litellm(upstream, tmp_path_factory):
    litellm_binary()  # skips, saying why, when it is not installed
    g = LiteLLM(tmp_path_factory.mktemp("litellm"), upstream.url, "synthetic",
                "text-completion-openai")
    yield g
    g.stop()


def run(url: str, out: Path, *extra: str):
    return cli("run", "--model", "llama-2-7b", "--no-progress", "--endpoint", url, "-c", "4",
               "-n", "40", "--input-len", "16", "--output-len", "64", "--results-dir",
               str(out), *extra, timeout=240)


def result(out: Path) -> dict:
    (path,) = [p for p in out.glob("*.json") if not p.name.endswith(".sweep.json")]
    return json.loads(path.read_text())


def test_requests_without_per_chunk_timing_are_left_out_and_counted(
        upstream, litellm, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    direct = run(upstream.url, tmp_path / "direct")
    d = result(tmp_path / "direct")
    assert d["api"]["token_count_sources"] == {"usage": 40}
    assert d["stream"]["first_token_unknown"] == 0 and d["summary"]["ttft_ms"]["p50"] < 20
    assert "first_token_unknown" not in json.dumps(d["validity"]["reasons"]), direct.stdout

    p = run(litellm.url, tmp_path / "litellm", "--api-key", LITELLM_KEY)
    assert p.returncode == 0, p.stderr
    r = result(tmp_path / "litellm")
    assert r["summary"]["requests_completed"] == 40
    assert r["summary"]["total_output_tokens"] == 40 * 64  # the usage total is still right
    assert r["stream"]["first_token_unknown"] == 40
    assert r["summary"]["first_token_unknown"] == 40
    assert r["summary"]["ttft_ms"] is None and r["summary"]["tpot_ms"] is None  # not 0
    assert r["summary"]["e2e_ms"]["p50"] > 0
    assert r["api"]["token_count_sources"] == {"usage_total": 40}  # usage at the end only
    reasons = r["validity"]["reasons"]
    assert not r["validity"]["valid"] and any(x.startswith("first_token_unknown: 40 of 40")
                                              for x in reasons)
    console = p.stdout + p.stderr
    assert "40 of 40 requests: all their tokens came in one event" in console
    assert "usage at the end only" in console and "mixed" not in console


def test_a_key_litellm_does_not_know_is_one_line(litellm, tmp_path):
    """Without a database LiteLLM answers a key other than its master key with HTTP 400 "No
    connected db." (not 401): infer-prof cannot call that a refused key, but says it in one
    line, before any load."""
    p = run(litellm.url, tmp_path / "wrong", "--api-key", "sk-wrong")
    assert p.returncode == 1, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "HTTP 400" in lines[0] and "No connected db" in lines[0]
    assert not (tmp_path / "wrong").exists() or not list((tmp_path / "wrong").glob("*.json"))
