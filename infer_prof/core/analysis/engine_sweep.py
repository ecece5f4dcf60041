"""Engine configurations to sweep (``run --frontier --engine-sweep``) and their upper envelope.

Pure. A configuration is a name and engine settings, written as vLLM spells them
(``max-num-seqs``, ``max-num-batched-tokens``, ``tensor-parallel-size``, ``quantization``,
``kv-cache-dtype``, ``dtype``, ``gpu-memory-utilization``, ``max-model-len``,
``enforce-eager``). Two ways to give them:

- the flag form, one setting's values: ``max-num-seqs=64,128,256`` -> three configurations
  named ``max-num-seqs=64`` ...;
- a TOML document (already parsed): ``[[config]]`` tables, each with a ``name`` and settings.

The envelope: over every configuration's frontier points, the points no other point (of any
configuration) beats on both tokens/s per GPU and interactivity
(:func:`~infer_prof.core.analysis.frontier.pareto_indices`): which configuration wins where.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infer_prof.core.analysis.frontier import pareto_indices

#: Setting (vLLM's spelling) -> the kind of value it takes.
SETTINGS: dict[str, type] = {
    "max-num-seqs": int,
    "max-num-batched-tokens": int,
    "tensor-parallel-size": int,
    "max-model-len": int,
    "gpu-memory-utilization": float,
    "quantization": str,
    "kv-cache-dtype": str,
    "dtype": str,
    "enforce-eager": bool,
}


class EngineSweepError(ValueError):
    """A malformed engine sweep; the message is one line naming the fix."""


@dataclass(frozen=True)
class EngineConfig:
    """One named configuration: ``settings`` maps a setting of :data:`SETTINGS` to its value."""

    name: str
    settings: dict[str, Any] = field(default_factory=dict)


def _value(setting: str, raw: Any, where: str) -> Any:
    kind = SETTINGS.get(setting)
    if kind is None:
        raise EngineSweepError(f"{where}: unknown engine setting {setting!r}; known: "
                               f"{', '.join(SETTINGS)}")
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError
            return text == "true"
        v = kind(raw)
    except (TypeError, ValueError):
        raise EngineSweepError(f"{where}: {setting} = {raw!r} is not a {kind.__name__}") from None
    if kind in (int, float) and not v > 0:
        raise EngineSweepError(f"{where}: {setting} must be positive, got {raw!r}")
    return v


def parse_flag(text: str) -> list[EngineConfig]:
    """``"max-num-seqs=64,128,256"`` -> one configuration per value (raises EngineSweepError)."""
    name, sep, values = text.partition("=")
    setting = name.strip().replace("_", "-")
    where = f"--engine-sweep {text!r}"
    if not sep or not values.strip():
        raise EngineSweepError(f"{where}: give a TOML file or SETTING=V1,V2 (e.g. "
                               "max-num-seqs=64,128,256)")
    parts = [v.strip() for v in values.split(",") if v.strip()]
    configs = [EngineConfig(f"{setting}={v}", {setting: _value(setting, v, where)})
               for v in parts]
    return _distinct(configs, where)


def parse_document(doc: Mapping[str, Any], source: str) -> list[EngineConfig]:
    """The ``[[config]]`` tables of a parsed TOML document (raises EngineSweepError)."""
    tables = doc.get("config")
    if not isinstance(tables, list) or not tables:
        raise EngineSweepError(f"{source}: no [[config]] tables; write one per configuration "
                               "with a name and settings (e.g. max-num-seqs = 128)")
    extra = sorted(set(doc) - {"config"})
    if extra:
        raise EngineSweepError(f"{source}: unknown key {extra[0]!r}; only [[config]] tables")
    configs = []
    for i, t in enumerate(tables):
        where = f"{source} [[config]] #{i + 1}"
        if not isinstance(t, Mapping) or not isinstance(t.get("name"), str) or not t["name"]:
            raise EngineSweepError(f"{where}: needs a name = \"...\"")
        settings = {k.replace("_", "-"): v for k, v in t.items() if k != "name"}
        configs.append(EngineConfig(t["name"], {k: _value(k, v, f"{where} ({t['name']})")
                                                for k, v in settings.items()}))
    return _distinct(configs, source)


def _distinct(configs: list[EngineConfig], where: str) -> list[EngineConfig]:
    names = [c.name for c in configs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise EngineSweepError(f"{where}: configuration {dup!r} given twice")
    if len(configs) < 1:
        raise EngineSweepError(f"{where}: no configuration to run")
    return configs


def envelope(frontiers: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[dict[str, Any]]:
    """The upper envelope over named frontiers (``(config name, frontier points)``): every
    point with its ``config`` and ``envelope`` (True when no point of any configuration beats it
    on both ``interactivity`` and ``total_tok_s_per_gpu``), sorted by interactivity. Points
    without an interactivity are never on it."""
    rows = [{"config": name, **p} for name, pts in frontiers for p in pts]
    known = [i for i, r in enumerate(rows) if r.get("interactivity") is not None]
    best = {known[i] for i in pareto_indices(
        [(float(rows[j]["interactivity"]), float(rows[j]["total_tok_s_per_gpu"])) for j in known])}
    for i, r in enumerate(rows):
        r["envelope"] = i in best
    return sorted(rows, key=lambda r: float(r.get("interactivity") or 0.0))
