"""Debian's real nginx in front of the synthetic server (9 ms to first token, then 3.5 ms per
token): each configuration a rented endpoint is found behind, and the verdict infer-prof must
give on it. nginx runs as a non-daemon child on 127.0.0.1 (tests/integration/gateways.py);
scripts/install_nginx.sh installs it (run by `make test`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infer_prof.servers.certs import make_certs
from tests.integration.conftest import cli
from tests.integration.gateways import KEY, Nginx


@pytest.fixture
def gateway(synthetic, tmp_path):
    started: list[Nginx] = []
    upstream = synthetic(ttft_ms=9.0, itl_ms=3.5, tokens=64)
    port = int(upstream.url.rsplit(":", 1)[1])

    def start(name: str, **options) -> Nginx:
        n = Nginx(tmp_path / name, port, **options)
        started.append(n)
        return n

    yield start
    for n in started:
        n.stop()


def run(url: str, out: Path, *extra: str, n: int = 40):
    return cli("run", "--model", "llama-2-7b", "--no-progress", "--endpoint", url, "-c", "4",
               "-n", str(n), "--input-len", "16", "--output-len", "64", "--results-dir",
               str(out), *extra, timeout=240)


def result(out: Path) -> dict:
    (path,) = [p for p in out.glob("*.json") if not p.name.endswith(".sweep.json")]
    return json.loads(path.read_text())


def stream_reasons(res: dict) -> list[str]:
    return [r.split(":")[0] for r in res["validity"]["reasons"]
            if r.split(":")[0] in ("buffered_stream", "first_token_unknown")]


def test_a_well_set_tls_nginx_is_transparent_and_defaults_are_buffered_stream(
        gateway, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # the console's rows on one line each
    certs = make_certs(tmp_path / "certs")
    well = gateway("well", tls=(certs.cert, certs.key), buffering=False, http11=True, key=None)
    p = run(well.url, tmp_path / "well", "--ca-bundle", str(certs.ca))
    assert p.returncode == 0, p.stderr
    res = result(tmp_path / "well")
    assert not res["stream"]["bunched"] and stream_reasons(res) == []
    assert res["stream"]["events_per_request"]["p50"] == 64
    assert res["summary"]["ttft_ms"]["p50"] < 20  # the engine's 9 ms, not a proxy's flush

    buffered = gateway("defaults", tls=None, buffering=True, http11=False, key=None)
    p = run(buffered.url, tmp_path / "defaults")
    res = result(tmp_path / "defaults")
    shape = res["stream"]
    assert shape["bunched"] and shape["close_gap_share"] > 0.5 and shape["bursts_per_request"] >= 1
    assert res["validity"]["valid"] is False and res["validity"]["stream_problem"] is True
    assert stream_reasons(res) == ["buffered_stream"]
    assert res["validity"]["client_overloaded"] is False  # the client read in time: not blamed
    console = p.stdout + p.stderr
    assert "INVALID (server or proxy)" in console
    assert "delivered late or in bursts" in " ".join(console.split())
    assert "proxy_buffering off" in console and "not the engine" in console
    assert "tokens arrived as" in console and "bursts/request" in console


def test_a_wrong_key_on_a_gateway_guarding_every_path_is_one_line_exit_4(gateway, tmp_path):
    guard = gateway("all", tls=None, buffering=False, http11=True, key="all")
    p = run(guard.url, tmp_path / "wrong", "--api-key", "sk-wrong")
    assert p.returncode == 4, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "401" in lines[0] and "--api-key" in lines[0], p.stderr
    assert "OPENAI_API_KEY" in lines[0]
    p = cli("run", "--model", "llama-2-7b", "--no-progress", "--endpoint", guard.url, "-c", "2",
            "-n", "10", "--input-len", "8", "--output-len", "8", "--results-dir",
            str(tmp_path / "none"), timeout=120)  # no key at all (OPENAI_API_KEY unset)
    assert p.returncode == 4 and "no API key was sent" in p.stderr
    ok = run(guard.url, tmp_path / "right", "--api-key", KEY, n=12)
    assert ok.returncode == 0, ok.stderr


def test_a_key_only_on_inference_paths_stops_after_the_warm_up(gateway, tmp_path):
    """/v1/models is open, so the refusal comes with the first requests: the warm-up fails
    whole, and the run stops there instead of sending the load."""
    half = gateway("inference", tls=None, buffering=False, http11=True, key="inference")
    p = run(half.url, tmp_path / "half", n=400)
    assert p.returncode == 4, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert "every warm-up request failed" in line and "http_401" in line
    assert "--api-key" in line
    res = result(tmp_path / "half")
    assert res["incomplete_reason"] == "warmup_failed"
    assert res["warmup"]["ended_by"] == "every_request_failed"
    assert res["summary"]["requests_failed"] < 40  # not 400 requests spent on the refusal


def test_http_on_a_tls_port_says_use_https(gateway, tmp_path):
    certs = make_certs(tmp_path / "certs")
    tls = gateway("tls", tls=(certs.cert, certs.key), buffering=False, http11=True, key=None)
    plain = tls.url.replace("https://", "http://")
    p = run(plain, tmp_path / "plain")
    assert p.returncode == 1
    assert "this port speaks TLS: use https://" in p.stderr and "<html" not in p.stderr
