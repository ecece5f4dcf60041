"""Start vLLM (offline ``LLM``, this machine's build) on a model folder with LoRA slots and print
the LoRA buffers its worker allocated, one JSON line: ``[[module, class, attribute, shape,
dtype, bytes], ...]``.

``python -m tests.e2e.lora_buffer_probe MODEL_DIR MAX_LORAS MAX_RANK`` from the repository root.
The worker runs :func:`buffers` on the model (``LLM.apply_model``; the function is pickled by
name, so it lives in an importable module, and vLLM needs
``VLLM_ALLOW_INSECURE_SERIALIZATION=1`` to send a function). Weights are random
(``--load-format dummy``): the buffers depend on the shapes alone.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

#: The buffer attributes of vLLM 0.32's LoRA layers (vllm/lora/layers/): per slice A and B, and
#: the fused-MoE layer's per-expert w13 / w2 tensors.
ATTRIBUTES = ("lora_a_stacked", "lora_b_stacked", "w13_lora_a_stacked", "w13_lora_b_stacked",
              "w2_lora_a_stacked", "w2_lora_b_stacked")


def buffers(model: Any) -> list[list[Any]]:
    """Every LoRA buffer tensor of ``model``: (module, class, attribute, shape, dtype, bytes).
    A fused-MoE layer's ``lora_a_stacked``/``lora_b_stacked`` are views into its w13/w2
    tensors and are left out."""
    import torch

    out: list[list[Any]] = []
    for name, module in model.named_modules():
        kind = type(module).__name__
        for attr in ATTRIBUTES:
            value = getattr(module, attr, None)
            if value is None or (kind.startswith("FusedMoE") and not attr.startswith("w")):
                continue
            tensors = [value] if isinstance(value, torch.Tensor) else [
                t for t in value if isinstance(t, torch.Tensor)]
            out += [[name, kind, attr, list(t.shape), str(t.dtype),
                     t.numel() * t.element_size()] for t in tensors]
    return out


def main() -> None:
    model, max_loras, rank = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    from vllm import LLM

    # by its module's name: run as __main__, the function would not pickle to the worker
    from tests.e2e.lora_buffer_probe import buffers as listed

    llm = LLM(model=model, load_format="dummy", enforce_eager=True, max_model_len=512,
              kv_cache_memory_bytes=64 << 20, enable_lora=True, max_loras=max_loras,
              max_lora_rank=rank)
    print("LORA_BUFFERS " + json.dumps(llm.apply_model(listed)[0]), flush=True)


if __name__ == "__main__":
    main()
