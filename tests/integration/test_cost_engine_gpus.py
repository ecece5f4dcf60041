"""The cost block charges the GPUs the engine used, as the frontier's per-GPU axes do.

A client machine with eight H100s (NVML's answer replaced in the child process) measuring an
``--endpoint`` without ``--gpus``: the endpoint is one GPU's worth (``--gpus`` default 1), not
the client box's eight, so the cost block and the frontier's $/1M agree.
"""

import json
import subprocess
import sys

import pytest

from .conftest import REPO

pytestmark = pytest.mark.integration

_EIGHT_H100 = """
import sys
from infer_prof.catalog.gpus import DetectedGpu, find_gpu
from infer_prof.run import engine_setup
h100 = find_gpu("H100-SXM")
engine_setup.detect_gpus = lambda: [DetectedGpu("NVIDIA H100 80GB HBM3", h100, 85_520_809_984)] * 8
from infer_prof.cli import main
sys.argv = ["infer-prof", *sys.argv[1:]]
main()
"""


def test_an_endpoint_on_a_box_of_eight_gpus_is_charged_for_one(synthetic, tmp_path):
    server = synthetic(ttft_ms=10.0, itl_ms=4.0, tokens=16)
    out = tmp_path / "r.json"
    p = subprocess.run(
        [sys.executable, "-c", _EIGHT_H100, "run", "--model", "llama-2-7b", "--no-progress",
         "--endpoint", server.url, "-c", "2", "-n", "8", "--input-len", "16",
         "--output-len", "16", "--warmup-requests", "1", "--price-per-hour", "2.0",
         "--json", "--output", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    result = json.loads(out.read_text())
    assert result["gpu"]["key"] == "H100-SXM" and result["gpu"]["count"] == 8  # detected
    assert result["gpu"]["engine_gpus"] == 1
    cost = result["cost"]
    assert cost["gpus"] == 1 and cost["usd_per_hour"] == pytest.approx(2.0)
    assert cost["usd_per_million_output_tokens"] == pytest.approx(
        2.0 / (summary["output_throughput"] * 3600) * 1e6)
    # one figure, whichever table shows it
    assert summary["usd_per_million_output_tokens"] == pytest.approx(
        cost["usd_per_million_output_tokens"])
    assert result["roofline"]["gpus"] == 1
