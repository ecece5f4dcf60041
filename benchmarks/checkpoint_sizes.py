"""Planned weights against published checkpoints: one row per checkpoint with a published size
in ``tests/data/checkpoints.json`` (config: the alias's, or the file at ``config_path``) and per
folder of ``tests/data/model_checks`` (a reconstructed config.json, total_size, SOURCE).

    .venv/bin/python benchmarks/checkpoint_sizes.py            # Markdown table
    .venv/bin/python benchmarks/checkpoint_sizes.py --legacy   # what a dense-only count gives

Columns: the checkpoint's ``total_size`` (GiB), the planner's whole-model weights
(``memory.checkpoint_bytes``), the error, the KV bytes per token (16-bit), total and active
parameters, and the stored format. ``--legacy`` counts every model as one dense gated MLP per
layer in bf16 (the planner before it read experts, latent attention and quantization_config),
for the before/after comparison.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from infer_prof.catalog.models import registry
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.planning.memory import checkpoint_bytes, kv_bytes_per_token

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30


def published() -> list[tuple[str, dict, int]]:
    """(name, config, published bytes) of every checkpoint with a published size, by name."""
    out = []
    table = json.loads((ROOT / "tests/data/checkpoints.json").read_text())["checkpoints"]
    for c in table:
        size = c["total_size"] or c.get("file_bytes")
        if size:
            cfg = (registry()[c["alias"]]["config"] if "alias" in c
                   else json.loads((ROOT / c["config_path"]).read_text()))
            out.append((c["name"], cfg, int(size)))
    for folder in (ROOT / "tests/data/model_checks").iterdir():
        if (folder / "total_size").exists():
            out.append((folder.name, json.loads((folder / "config.json").read_text()),
                        int((folder / "total_size").read_text().split()[0])))
    return sorted(out, key=lambda row: row[0])


def legacy_bytes(spec: ModelSpec) -> int:
    """2 B x (layers x (attention + one dense gated MLP of intermediate_size + 2 norms) +
    embeddings + final norm): the dense-only count."""
    h, q, kv = spec.hidden_size, spec.num_attention_heads * spec.head_dim, spec.kv_dim
    layer = h * (q + 2 * kv) + q * h + 3 * h * spec.intermediate_size + 2 * h
    if spec.attention_bias:
        layer += q + 2 * kv
    return 2 * (spec.num_layers * layer + spec.embedding_params() + h)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--legacy", action="store_true", help="the dense-only count instead")
    args = ap.parse_args()
    print("| checkpoint | published GiB | planned GiB | error | KV B/token | params B "
          "(active) | stored as |")
    print("|---|---:|---:|---:|---:|---:|---|")
    right = rows = 0
    for name, cfg, total in published():
        spec = ModelSpec.from_config(cfg, name=name)
        planned = legacy_bytes(spec) if args.legacy else checkpoint_bytes(spec)
        err = 100.0 * (planned - total) / total
        rows += 1
        right += abs(err) <= 1.0
        stored = spec.quant.describe() if spec.quant else "bf16"
        print(f"| {name} | {total / GIB:.2f} | {planned / GIB:.2f} | {err:+.2f} % | "
              f"{kv_bytes_per_token(spec):,} | {spec.param_count() / 1e9:.2f} "
              f"({spec.active_param_count() / 1e9:.2f}) | {stored} |")
    print(f"\n{right} of {rows} within 1 %")


if __name__ == "__main__":
    main()
