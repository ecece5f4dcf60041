"""How right is the planner's weight-memory estimate? Load a model in vLLM and compare.

For each precision given, loads the model in-process with vLLM (CPU or GPU, whichever is
installed), sums the bytes of every tensor the loaded model holds (parameters, buffers, and
bitsandbytes' quantization state: packed weights, absmax and the nested statistics), and prints
them beside ``infer_prof.core.planning.memory.weight_bytes`` for the same precision.

    .venv/bin/python benchmarks/planner_weights.py --model tiny-llama --precision bf16 bnb-nf4
"""

from __future__ import annotations

import argparse
import os
from typing import Any

VLLM_QUANTIZATION = {"bf16": None, "bnb-nf4": "bitsandbytes", "fp8": "fp8_per_tensor"}


def loaded_bytes(worker: Any) -> dict[str, Any]:
    """Weight bytes the worker's model holds (runs inside the worker).

    Parameters only (buffers such as the rotary cos/sin cache are not weights), plus
    bitsandbytes' quantization state (absmax, nested statistics). On CPU, vLLM repacks 16-bit
    linear weights into oneDNN objects and leaves an empty parameter behind; those are counted
    at their unpacked size (input x output x dtype bytes), which oneDNN's packing keeps.
    """
    import torch

    model = worker.model_runner.model
    seen: set[int] = set()
    total = 0
    absmax_dtypes: set[str] = set()
    repacked = 0

    def add(t: Any) -> None:
        nonlocal total
        if isinstance(t, torch.Tensor) and t.numel() and t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()

    for module in model.modules():
        weight = getattr(module, "weight", None)
        if (isinstance(weight, torch.Tensor) and weight.numel() == 0
                and hasattr(module, "cpu_linear")):
            rows = module.output_size_per_partition
            cols = module.input_size_per_partition
            repacked += rows * cols * module.params_dtype.itemsize
    for t in model.parameters():
        add(t)
        state = getattr(t, "bnb_quant_state", None)  # {shard index: QuantState}
        for qs in (state or {}).values():
            absmax = getattr(qs, "absmax", None)
            if absmax is not None:
                absmax_dtypes.add(str(absmax.dtype))
            add(absmax)
            nested = getattr(qs, "state2", None)
            if nested is not None:
                add(getattr(nested, "absmax", None))
                add(getattr(nested, "code", None))
    return {"bytes": total + repacked, "repacked_bytes": repacked,
            "absmax_dtypes": sorted(absmax_dtypes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-llama")
    parser.add_argument("--precision", nargs="+", default=["bf16", "bnb-nf4"],
                        choices=sorted(VLLM_QUANTIZATION))
    args = parser.parse_args()
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from vllm import LLM

    from infer_prof.catalog.models import resolve_model
    from infer_prof.core.planning.memory import weight_bytes

    model = resolve_model(args.model)
    assert model.spec is not None
    print(f"{'precision':10} {'planner (B)':>14} {'vLLM loaded (B)':>16} {'error':>8}")
    for precision in args.precision:
        llm = LLM(model=model.path, quantization=VLLM_QUANTIZATION[precision],
                  max_model_len=256, kv_cache_memory_bytes=64 * 1024 * 1024,
                  enforce_eager=True)
        got = llm.collective_rpc(loaded_bytes)[0]
        actual = got["bytes"]
        planned = weight_bytes(model.spec, precision)
        parts = [f"absmax {','.join(got['absmax_dtypes']) or 'none'}"]
        if got["repacked_bytes"]:
            parts.insert(0, f"oneDNN-repacked {got['repacked_bytes']:,} B")
        extra = f"  ({'; '.join(parts)})"
        print(f"{precision:10} {planned:>14,} {actual:>16,} "
              f"{100 * (planned / actual - 1):>+7.2f}%{extra}", flush=True)
        del llm


if __name__ == "__main__":
    main()
