"""``infer-prof models``: the model aliases ``--model`` accepts, with their architecture."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.catalog.models import TINY_LLAMA, registry
from infer_prof.catalog.tinymodel import TINY_ARCHS, tiny_arch_config
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.planning.memory import checkpoint_bytes
from infer_prof.report.fit import print_fitted


def models_command(
    json_output: bool = typer.Option(False, "--json", help="Print the registry as JSON."),
) -> None:
    """List the known model aliases (hub id, parameters and those active per token, layers,
    KV heads, context, KV bytes per token): the tiny models generated locally (random weights,
    one of each architecture vLLM-CPU runs), then the shipped configs of real models."""
    rows: list[dict[str, Any]] = []
    tiny = [(name, {"hub_id": None, "config": tiny_arch_config(arch)})
            for name, arch in TINY_ARCHS.items()]
    for alias, entry in [*tiny, *sorted(registry().items())]:
        spec = ModelSpec.from_config(entry["config"], name=alias, hub_id=entry["hub_id"])
        rows.append({
            "alias": alias, "hub_id": spec.hub_id, "params_b": _round_b(spec.param_count()),
            "active_params_b": _round_b(spec.active_param_count()),
            "weights_bytes": checkpoint_bytes(spec),
            "stored_as": spec.quant.describe() if spec.quant else "16-bit",
            "experts": (f"{spec.moe.top_k} of {spec.moe.num_experts}" if spec.moe else None),
            "layers": spec.num_layers, "hidden": spec.hidden_size,
            "heads": spec.num_attention_heads, "kv_heads": spec.num_kv_heads,
            "vocab": spec.vocab_size, "context": spec.max_position_embeddings,
            "kv_bytes_per_token_16bit": int(spec.kv_cache_bytes_per_token(2.0)),
        })
    if json_output:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    t = Table(title="model aliases (--model); also: a local folder, or a hub id org/name",
              box=box.SIMPLE_HEAD, show_edge=False, title_justify="left", padding=(0, 1, 0, 0))
    for col in ("alias", "hub id", "params B", "active B", "layers", "KV heads", "context",
                "KV/token"):
        ident = col in ("alias", "hub id")
        t.add_column(col, justify="left" if ident else "right", no_wrap=ident)
    t.add_row(TINY_LLAMA, "(generated locally)", "0.0004", "0.0004", "2", "2", "2,048", "1 KiB")
    for r in rows:
        # active: parameters one token passes through (mixture of experts: its top-k experts)
        t.add_row(r["alias"], r["hub_id"] or "(generated locally)", _billions(r["params_b"]),
                  _billions(r["active_params_b"] if r["experts"] else r["params_b"]),
                  str(r["layers"]),
                  str(r["kv_heads"]), f"{r['context']:,}",
                  f"{r['kv_bytes_per_token_16bit'] // 1024:,} KiB")
    print_fitted(Console(), t, ("context", "layers", "KV heads"))


def _round_b(params: int) -> float:
    """Parameters in billions: 2 decimals, or 2 significant figures below 0.01 B (tiny models)."""
    b = params / 1e9
    return round(b, 2) if b >= 0.01 else float(f"{b:.2g}")


def _billions(b: float) -> str:
    return f"{b:.2f}" if b >= 0.01 else f"{b:.2g}"
