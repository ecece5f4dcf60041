"""What a run is, read from its typed result: its GPU, precision and model, the fields that make
two runs "the same configuration" and their stable hash, and which settings differ between runs.

* :func:`config_fields` / :func:`config_fingerprint`: the fields that make two runs "the same
  configuration", and a stable short hash of them (the key of the run history).
* :func:`settings_fields` / :func:`differing_fields`: which settings differ between runs (what
  ``compare`` and ``regress`` refuse to mix without ``--force``).

Every function reads a :class:`infer_prof.results.document.Result` (attributes: a misspelt field
is a type error); ``config`` is the open section documented where it is built, read as a JSON
object.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from infer_prof.results.config_record import DatasetUsed, TraceUsed, option_value
from infer_prof.results.document import Result

FINGERPRINT_VERSION = 2
FINGERPRINT_LENGTH = 16

# The fields of config_fields(), in order. Changing this list changes every fingerprint: bump
# FINGERPRINT_VERSION when it changes (it is part of the hashed text).
FINGERPRINT_FIELDS = (
    "model",
    "engine_path",
    "precision",
    "quantization",
    "dtype",
    "concurrency",
    "request_rate",
    "input_len",
    "output_len",
    "workload",
    "load_format",
    "gpu",
    "gpu_count",
    "served_model",
)

# Engine settings that change performance; they must match for a fair comparison, but they are
# not part of the fingerprint (history keys stay stable as options are added).
ENGINE_SETTINGS = (
    "tensor_parallel_size",
    "max_model_len",
    "enforce_eager",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "engine_args",
)

# Fields that describe where a run ran rather than what it ran: compare ignores them.
PLACEMENT_FIELDS = ("gpu", "gpu_count", "labels", "host", "environment")


def readable_name(result: Result) -> str:
    """A result's readable name: ``run_name``, or for a result of an earlier release (which has
    no ``run_name``) its ``run_id``, which was the readable name then."""
    return result.run_name or result.run_id


def gpu_name(result: Result) -> str:
    """The GPU the run used: ``environment.gpu_name`` (what NVML saw), else ``gpu.key`` (the GPU
    named with ``--gpu``, e.g. for an endpoint on another machine), else ``"cpu"``."""
    name = (result.environment.gpu_name if result.environment else None) or (
        result.gpu.key if result.gpu else None)
    return str(name) if name else "cpu"


def gpu_count(result: Result) -> int:
    """How many GPUs: ``environment.gpu_count`` when NVML saw a GPU, else ``gpu.count`` when a
    GPU was named (``gpu.key``), else 0."""
    env, declared = result.environment, result.gpu
    if env is not None and env.gpu_name:
        count = env.gpu_count
    else:
        count = declared.count if declared is not None and declared.key else 0
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def device_name(result: Result) -> str:
    """What the run ran on, for telling configurations apart: :func:`gpu_name`, or without a GPU
    ``cpu: <CPU model>``."""
    name = gpu_name(result)
    if name != "cpu":
        return name
    cpu = result.environment.cpu if result.environment else None
    return f"cpu: {cpu}" if cpu else "cpu"


def precision_of(result: Result) -> str:
    """The result's ``precision`` (what was served: ``run.point_document.served_precision``),
    else ``plan.precision``, else ``config.quantization``, else ``config.dtype``, else
    ``"auto"``."""
    cfg = result.config
    value = (
        result.precision
        or (result.plan.precision if result.plan else None)
        or cfg.quantization
        or cfg.dtype
        or "auto"
    )
    return str(value)


def model_name(result: Result) -> str | None:
    """``model.name``, else ``config.model``."""
    name = (result.model.name if result.model else None) or result.config.model
    return str(name) if name else None


def config_fields(result: Result) -> dict[str, Any]:
    """The fields that define "the same configuration" (:data:`FINGERPRINT_FIELDS`).

    model name; engine path (``model.engine_path``, else the hub id); precision
    (:func:`precision_of`), quantization and dtype; concurrency and request rate; input and
    output length; workload name; load format; GPU name (``cpu: <model>`` without one) and count;
    the served model name; the dataset's SHA-256 (``dataset_sha256``) only for a result whose
    prompts came from a dataset; the session settings (``sessions``) only for a multi-turn
    run; ``api`` only for a chat-API result (the chat template adds prompt tokens, so it is
    another configuration); the prefix cache's state (``prefix_cache``) only when the point did
    not start on an emptied cache (``warm``, ``as-is``, ``unknown``); the speculative
    configuration (``speculative_config``, canonical JSON) only when one was given; the LoRA
    mix (``lora``: shares, seed, each adapter's weights SHA-256 and ``max_loras``) only for a
    run over adapters. Absent fields are None, so a field added to results later does not
    change the fingerprint of older ones.
    """
    cfg = result.config
    model, load = result.model, result.load
    served = result.server.served_model_name if result.server else None
    workload = (result.workload.name if result.workload else None) or cfg.workload
    if isinstance(workload, dict):
        workload = workload.get("name")
    fields = {
        "model": model_name(result),
        "engine_path": (model.engine_path or model.hub_id or model.path) if model else None,
        "precision": precision_of(result),
        "quantization": cfg.quantization,
        "dtype": cfg.dtype,
        "concurrency": cfg.concurrency,
        "request_rate": cfg.rate or (load.rate if load else None),
        "burstiness": load.burstiness if load else None,
        "max_concurrency": load.max_concurrency if load else None,
        "input_len": cfg.input_len,
        "output_len": cfg.output_len,
        "workload": workload,
        "load_format": cfg.load_format,
        "gpu": device_name(result),
        "gpu_count": gpu_count(result),
        "served_model": served or cfg.served_model_name,
    }
    dataset = cfg.dataset
    if isinstance(dataset, DatasetUsed):  # only results with a dataset carry the field: older
        fields["dataset_sha256"] = dataset.sha256  # fingerprints stay the same
    if cfg.api == "chat":  # likewise: completions results keep their fingerprints
        fields["api"] = "chat"
    trace = cfg.trace
    if isinstance(trace, TraceUsed):  # likewise: a replayed trace, its window and time scale
        fields["trace_sha256"] = trace.sha256
        fields["trace_window"] = trace.window_s
        fields["trace_time_scale"] = trace.time_scale
    cache = result.prefix_cache.state if result.prefix_cache else None
    if cache not in (None, "cold"):  # likewise: a prefix cache not emptied before the point
        fields["prefix_cache"] = cache  # (warm, as-is, unknown); cold keeps the fingerprint
    speculative = option_value(cfg, "speculative_config")
    if speculative:  # likewise: speculative decoding's configuration
        fields["speculative_config"] = speculative
    sessions = cfg.sessions
    if sessions is not None:  # likewise: multi-turn sessions (turns, think time, source,
        ds = sessions.dataset  # prompt, dataset)
        fields["sessions"] = {"turns": sessions.turns, "think_time_s": sessions.think_time_s,
                              "source": sessions.source, "prompt": sessions.prompt,
                              "dataset_sha256": ds.sha256 if ds else None}
    lora = result.lora
    if lora is not None:  # likewise: a run over LoRA adapters (the mix's shares and seed, each
        fields["lora"] = {  # adapter's weights by SHA-256, the engine's adapters per batch)
            "shares": {k: round(v, 6) for k, v in lora.shares.items()},
            "seed": lora.seed,
            "adapters": {a.name: a.sha256 for a in lora.adapters},
            "max_loras": lora.max_loras,
        }
    return fields


def config_fingerprint(result: Result) -> str:
    """A stable hash of :func:`config_fields`: the first 16 hex digits of SHA-256 of
    ``v<FINGERPRINT_VERSION>:`` + the fields as canonical JSON (sorted keys, no spaces)."""
    fields = config_fields(result)
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(f"v{FINGERPRINT_VERSION}:{text}".encode()).hexdigest()
    return digest[:FINGERPRINT_LENGTH]


def settings_fields(result: Result) -> dict[str, Any]:
    """Everything :func:`differing_fields` looks at: :func:`config_fields`, the engine settings
    (:data:`ENGINE_SETTINGS`), and the placement fields labels and host."""
    cfg = result.config
    out = config_fields(result)
    for key in ENGINE_SETTINGS:
        value = option_value(cfg, key)
        out[key] = list(value) if isinstance(value, (list, tuple)) else value
    out["labels"] = dict(result.labels or cfg.labels)
    out["host"] = result.environment.host if result.environment else None
    return out


def differing_fields(
    results: Sequence[Result], ignore: Iterable[str] = ()
) -> dict[str, list[Any]]:
    """The settings that are not the same in every result: ``{field: [value per result]}``.

    Fields named in ``ignore`` are skipped; ``"environment"`` in ``ignore`` also skips ``host``.
    The order of the dict follows :func:`settings_fields`.
    """
    skip = set(ignore)
    if "environment" in skip:
        skip.add("host")
    all_fields = [settings_fields(r) for r in results]
    if not all_fields:
        return {}
    out: dict[str, list[Any]] = {}
    keys = list(dict.fromkeys(k for f in all_fields for k in f))  # a field only some results have
    for key in keys:
        if key in skip:
            continue
        values = [f.get(key) for f in all_fields]
        canon = {json.dumps(v, sort_keys=True, default=str) for v in values}
        if len(canon) > 1:
            out[key] = values
    return out
