"""How right is the planner's memory model? Its predictions beside the figures a vLLM server logs.

Give it a vLLM server log (``infer-prof run`` keeps one beside each result as
``<run id>.server.log``). It reads what vLLM logged while starting:

- ``Model loading took 12.55 GiB memory and 5.1 seconds`` (GPU; older releases: ``took 12.5523
  GiB and 5.1 seconds``): weight memory;
- ``Available KV cache memory: 57.71 GiB`` (GPU): the budget left for the KV cache;
- ``GPU KV cache size: 118,192 tokens`` (vLLM-CPU: ``CPU KV cache size: ... tokens``) and
  ``Maximum concurrency for 640 tokens per request: 184.68x``;
- vLLM-CPU: ``Explicitly set (0.5/15.6) GiB for KV cache on node 0.``;
- the engine arguments from ``non-default args: {...}`` (quantization, load format, utilization,
  max_model_len, kv_cache_memory_bytes) and the vLLM version, where logged;

plans the same model and load, and prints the plan's figure, vLLM's and the error. On a GPU log
the plan budgets ``utilization x --memory-total-gib`` (default: the catalog's CUDA-visible figure
of ``--gpu``); on a CPU log, whose KV size vLLM takes as given, it predicts the tokens that size
holds as vLLM 0.32 counts them: the sequences of the log's longest length (``Maximum concurrency
for N tokens``) that fit in the planner's blocks, each taking the planner's blocks per sequence
(a sliding-window layer only its window; a hybrid model's linear layers their state pages), times
that length; without a model of many kinds of layer that is ``blocks x 16``. On a GPU log a
hybrid model's tokens are counted the same way, at the log's ``max_model_len``.

    .venv/bin/python benchmarks/planner_vs_vllm.py results/<run id>.server.log \\
        --model llama-2-70b --gpu H100-SXM --input-len 512 --output-len 128

Exit 0 when every KV-token error is within ``--tolerance`` percent (default 2), 1 otherwise, 2 on
bad input.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GIB = 1 << 30

_PATTERNS = {
    "weights_gib": re.compile(r"Model loading took ([0-9.]+) GiB(?: memory)? and"),
    "available_kv_gib": re.compile(r"Available KV cache memory: ([0-9.]+) GiB"),
    "kv_tokens": re.compile(r"\b(GPU|CPU|XPU|TPU)(?: \+ host)? KV cache size: ([0-9,]+) tokens"),
    "concurrency": re.compile(
        r"Maximum concurrency for ([0-9,]+) tokens per request: ([0-9.]+)x"),
    "cpu_kv_gib": re.compile(r"(?:Explicitly|Auto) set \(([0-9.]+)/([0-9.]+)\) GiB for KV cache"),
    "version": re.compile(
        r"(?:API server version |LLM engine \(v|\u2588 +version )([0-9]+\.[0-9]+\.[0-9]+)"),
    "args": re.compile(r"non-default args: (\{.*\})\s*$"),
}


@dataclass
class VllmLog:
    """What a vLLM server log says about memory (None where it says nothing)."""

    device: str | None = None
    version: str | None = None
    weights_gib: float | None = None
    available_kv_gib: float | None = None
    kv_tokens: int | None = None
    max_model_len: int | None = None
    max_concurrency: float | None = None
    cpu_kv_gib: float | None = None
    args: dict[str, Any] = field(default_factory=dict)


def _literal_args(text: str) -> dict[str, Any]:
    try:
        value = ast.literal_eval(text)
        return dict(value) if isinstance(value, dict) else {}
    except (ValueError, SyntaxError):
        out: dict[str, Any] = {}
        for m in re.finditer(r"'(\w+)': ('[^']*'|[0-9.eE+-]+|True|False|None)", text):
            try:
                out[m.group(1)] = ast.literal_eval(m.group(2))
            except (ValueError, SyntaxError):
                continue
        return out


def parse_log(text: str) -> VllmLog:
    """Read the memory figures of one vLLM start-up from a server log (the first of each)."""
    log = VllmLog()
    for line in text.splitlines():
        if log.weights_gib is None and (m := _PATTERNS["weights_gib"].search(line)):
            log.weights_gib = float(m.group(1))
        if log.available_kv_gib is None and (m := _PATTERNS["available_kv_gib"].search(line)):
            log.available_kv_gib = float(m.group(1))
        if log.kv_tokens is None and (m := _PATTERNS["kv_tokens"].search(line)):
            log.device, log.kv_tokens = m.group(1), int(m.group(2).replace(",", ""))
        if log.max_concurrency is None and (m := _PATTERNS["concurrency"].search(line)):
            log.max_model_len = int(m.group(1).replace(",", ""))
            log.max_concurrency = float(m.group(2))
        if log.cpu_kv_gib is None and (m := _PATTERNS["cpu_kv_gib"].search(line)):
            log.cpu_kv_gib = float(m.group(1))
        if log.version is None and (m := _PATTERNS["version"].search(line)):
            log.version = m.group(1)
        if not log.args and (m := _PATTERNS["args"].search(line)):
            log.args = _literal_args(m.group(1))
    return log


def _err(plan_value: float, vllm_value: float) -> float:
    return (plan_value - vllm_value) / vllm_value * 100.0


#: vLLM-CPU's KV block size in tokens (its default ``--block-size`` on CPU)
CPU_BLOCK_SIZE = 128


def compare(log: VllmLog, *, model: str, gpu: str | None, memory_total_gib: float | None,
            input_len: int, output_len: int, quantization: str | None,
            utilization: float | None) -> dict[str, Any]:
    """Plan what the log's server ran and pair each planner figure with vLLM's.

    Returns ``{"plan": {...}, "rows": [(name, plan, vllm, error %)], ...}``.
    """
    from infer_prof.catalog.gpus import find_gpu
    from infer_prof.catalog.models import resolve_model
    from infer_prof.core.planning.memory import (
        BLOCK_SIZE,
        default_scheduler_limits,
        kv_bytes_per_sequence,
        kv_bytes_per_token,
        pool_layout,
    )
    from infer_prof.core.planning.planner import PlanRequest, plan
    from infer_prof.core.planning.precisions import EngineCaps, normalize_precision

    spec = resolve_model(model).spec
    if spec is None:
        raise ValueError(f"no architecture for {model!r}")
    args = log.args
    quant = quantization or str(args.get("quantization") or "bf16")
    precision = normalize_precision(quant)
    kv_dtype = "fp8" if str(args.get("kv_cache_dtype", "auto")).startswith("fp8") else "auto"
    rows: list[tuple[str, float | None, float | None, float | None]] = []
    on_gpu = log.device in (None, "GPU") and log.cpu_kv_gib is None
    if on_gpu:
        g = find_gpu(gpu or "H100-SXM")
        total = int((memory_total_gib or g.cuda_visible_gib or g.memory_gib) * GIB)
        util = utilization or float(args.get("gpu_memory_utilization") or 0.9)
        version = tuple(int(x) for x in log.version.split(".")) if log.version else None
        p = plan(PlanRequest(spec, g, concurrency=1, input_len=input_len, output_len=output_len,
                 gpu_memory_utilization=util, quantization=precision,
                 memory_per_gpu_bytes=total, memory_source="--memory-total-gib",
                 kv_cache_dtype=kv_dtype, load_format=args.get("load_format"),
                 caps=EngineCaps(build="cuda", vllm_version=version, checked=True)))
        assert p.memory is not None
        m = p.memory
        weights = m.weights_bytes / GIB
        kv_avail = m.kv_cache_bytes / GIB
        rows.append(("weights (GiB)", weights, log.weights_gib,
                     _err(weights, log.weights_gib) if log.weights_gib else None))
        if log.weights_gib is not None and log.available_kv_gib is not None:
            vllm_over = p.budget_per_gpu_bytes / GIB - log.weights_gib - log.available_kv_gib
            over = m.overhead_bytes / GIB
            rows.append(("activation + non-torch (GiB)", over, vllm_over, _err(over, vllm_over)))
        rows.append(("available KV cache (GiB)", kv_avail, log.available_kv_gib,
                     _err(kv_avail, log.available_kv_gib) if log.available_kv_gib else None))
        tokens = m.kv_tokens
        _, _, paging = pool_layout(spec, 1, 1 if kv_dtype == "fp8" else 2)
        if paging is not None and log.max_model_len:
            # a hybrid's capacity is per sequence of vLLM's max_model_len: its KV and states
            per_seq = paging.sequence_bytes(log.max_model_len) / m.block_bytes
            tokens = int(m.kv_blocks / per_seq * log.max_model_len)
        summary = {"precision": p.precision, "budget_gib": p.budget_per_gpu_bytes / GIB,
                   "overhead_model": p.assumptions["overhead_model"],
                   "memory_total_gib": total / GIB, "gpu": g.key, "utilization": util}
    else:
        explicit = args.get("kv_cache_memory_bytes")
        kv_bytes = int(explicit) if explicit else int(round((log.cpu_kv_gib or 0) * GIB))
        kv_dtype_bytes = 1 if kv_dtype == "fp8" else 2
        per_token = kv_bytes_per_token(spec, 1, kv_dtype_bytes)
        # vLLM-CPU pages its cache in blocks of 128 tokens (16 for MLA's latent cache); a hybrid
        # model's blocks are aligned to its linear layers' state pages
        block = BLOCK_SIZE if spec.mla is not None else CPU_BLOCK_SIZE
        blocks = kv_bytes // (block * per_token)
        tokens = blocks * block
        _, pool_block, paging = pool_layout(spec, 1, kv_dtype_bytes, on_cpu=True)
        if paging is not None and log.max_model_len:
            # one pool of pages: a sequence takes its attention blocks and its state pages
            pool_blocks = kv_bytes // pool_block
            per_seq = paging.sequence_bytes(log.max_model_len) / pool_block
            tokens = int(pool_blocks / per_seq * log.max_model_len)
        elif log.max_model_len:
            # vLLM 0.32 logs its capacity as max_model_len x the sequences of that length the
            # blocks hold; the planner's sequence takes its own blocks (sliding layers: the
            # window plus the tokens one scheduler step brings in, max_num_batched_tokens)
            in_flight = int(args.get("max_num_batched_tokens") or
                            default_scheduler_limits(None, 0)[0])
            # (each group of layers pages its own blocks: a sequence's share of the pool is its
            # bytes, not a whole number of all-layer blocks)
            per_seq = kv_bytes_per_sequence(spec, log.max_model_len, 1, kv_dtype_bytes,
                                            in_flight, block) / (block * per_token)
            tokens = int(blocks / per_seq * log.max_model_len)
        rows.append(("KV cache given (GiB)", kv_bytes / GIB, log.cpu_kv_gib,
                     _err(kv_bytes / GIB, log.cpu_kv_gib) if log.cpu_kv_gib else None))
        summary = {"precision": precision, "kv_cache_memory_bytes": kv_bytes,
                   "kv_bytes_per_token": per_token}
    rows.append(("KV cache (tokens)", float(tokens), float(log.kv_tokens or 0) or None,
                 _err(tokens, log.kv_tokens) if log.kv_tokens else None))
    if log.max_model_len and log.max_concurrency:
        seqs = tokens / log.max_model_len
        rows.append((f"sequences of {log.max_model_len} tokens", seqs, log.max_concurrency,
                     _err(seqs, log.max_concurrency)))
    return {"model": model, "vllm_version": log.version, "device": log.device or "GPU",
            "plan": summary, "rows": rows}


def _fmt(v: float | None, name: str) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if "tokens)" in name else f"{v:,.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="vLLM server log")
    ap.add_argument("--model", required=True, help="model alias or local folder the server ran")
    ap.add_argument("--gpu", default=None, help="catalog GPU (default H100-SXM) for a GPU log")
    ap.add_argument("--memory-total-gib", type=float, default=None,
                    help="GiB CUDA reported as the device total (default: the catalog's "
                    "cuda_visible_gib for --gpu)")
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--quantization", default=None,
                    help="precision the server ran (default: the log's non-default args, or bf16)")
    ap.add_argument("--gpu-memory-utilization", type=float, default=None)
    ap.add_argument("--tolerance", type=float, default=2.0, help="KV-token error allowed, %%")
    ap.add_argument("--json", action="store_true", help="print JSON")
    a = ap.parse_args(argv)
    path = Path(a.log)
    if not path.is_file():
        print(f"error: no log file {path}; give the path of a vLLM server log", file=sys.stderr)
        return 2
    log = parse_log(path.read_text(errors="replace"))
    if log.kv_tokens is None:
        print(f"error: {path} has no 'KV cache size: N tokens' line; give the log of a server "
              "that finished starting", file=sys.stderr)
        return 2
    try:
        out = compare(log, model=a.model, gpu=a.gpu, memory_total_gib=a.memory_total_gib,
                      input_len=a.input_len, output_len=a.output_len,
                      quantization=a.quantization, utilization=a.gpu_memory_utilization)
    except (ValueError, LookupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        summary = {k: v for k, v in out["plan"].items() if k != "overhead_model"}
        print(f"{out['model']} on {out['device']} (vLLM {out['vllm_version'] or '?'}); plan: "
              + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in summary.items()))
        if "overhead_model" in out["plan"]:
            print(f"overhead model: {out['plan']['overhead_model']}")
        print(f"{'quantity':34} {'plan':>14} {'vLLM':>14} {'error':>9}")
        for name, mine, theirs, err in out["rows"]:
            e = "-" if err is None else f"{err:+.2f} %"
            print(f"{name:34} {_fmt(mine, name):>14} {_fmt(theirs, name):>14} {e:>9}")
    kv_err = next((r[3] for r in out["rows"] if r[0] == "KV cache (tokens)"), None)
    return 0 if kv_err is not None and abs(kv_err) <= a.tolerance else 1


if __name__ == "__main__":
    raise SystemExit(main())
