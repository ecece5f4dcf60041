"""LoRA adapters as a run names them (``run --lora-modules NAME=PATH``): the folder of each,
read for what the engine must be told (its rank) and what identifies it in a result (the
SHA-256 of its weights).

An adapter folder is what peft's ``save_pretrained`` writes: ``adapter_config.json`` (peft's
``LoraConfig``: ``r``, ``lora_alpha``, ``target_modules``, ``rank_pattern``, ...) and
``adapter_model.safetensors`` (or the older ``adapter_model.bin``). vLLM reads the same files
(``vllm/lora/peft_helper.py``, ``PEFTHelper``: ``r``, ``lora_alpha`` and ``target_modules``
required).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: The weight files an adapter folder may hold, in the order they are looked for.
WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")


class AdapterError(ValueError):
    """An adapter that cannot be used: a bad ``NAME=PATH``, a folder without peft's files, a
    config without a rank (one line naming the fix)."""


@dataclass(frozen=True)
class LoraAdapter:
    """One adapter a run serves: its name (what requests send as ``model``), its folder, its
    rank (the largest of ``r`` and any per-module ``rank_pattern`` rank), ``lora_alpha``, the
    modules it adapts, the base model it was trained on (as its config says, when it says) and
    the SHA-256 of its weight file."""

    name: str
    path: str
    rank: int
    alpha: float | None = None
    target_modules: tuple[str, ...] = ()
    base_model: str | None = None
    sha256: str | None = None


def parse_lora_modules(items: Iterable[str], flag: str = "--lora-modules") -> list[str]:
    """``--lora-modules`` values as ``NAME=PATH`` items: each value one item, or several
    separated by commas or spaces (``a=/x,b=/y``). Raises :class:`AdapterError` for an item
    without ``=``, an empty name or path, the reserved name ``base`` or a name given twice."""
    # (imported here: the option's declaration is read by `run --help`, which stays light)
    from infer_prof.core.measurement.adapter_figures import BASE

    out: list[str] = []
    names: set[str] = set()
    for value in items:
        for item in value.replace(",", " ").split():
            name, sep, path = item.partition("=")
            name, path = name.strip(), path.strip()
            if not sep or not name or not path:
                raise AdapterError(f"{flag} {item!r} is not NAME=PATH; write e.g. {flag} "
                                   "sql=/models/sql-lora")
            if name == BASE:
                raise AdapterError(f"{flag}: {BASE!r} names the served model itself in "
                                   "--lora-mix; give the adapter another name")
            if name in names:
                raise AdapterError(f"{flag}: the adapter name {name!r} is given twice")
            names.add(name)
            out.append(f"{name}={path}")
    return out


def split_module(item: str) -> tuple[str, str]:
    """``NAME=PATH`` as (name, path)."""
    name, _, path = item.partition("=")
    return name.strip(), path.strip()


def read_adapter(name: str, path: str | Path) -> LoraAdapter:
    """The adapter ``name`` in folder ``path``: its config read, its weight file hashed. Raises
    :class:`AdapterError` when the folder, its ``adapter_config.json`` (with ``r``) or its
    weight file is missing, or the config is not a LoRA config."""
    folder = Path(path).expanduser()
    config_file = folder / "adapter_config.json"
    if not folder.is_dir():
        raise AdapterError(f"--lora-modules {name}={path}: no such folder; give the folder "
                           "peft's save_pretrained wrote (adapter_config.json and weights)")
    try:
        config = json.loads(config_file.read_text())
    except FileNotFoundError:
        raise AdapterError(f"--lora-modules {name}={path}: no adapter_config.json in the "
                           "folder; give the folder peft's save_pretrained wrote") from None
    except (OSError, ValueError) as exc:
        raise AdapterError(f"--lora-modules {name}={path}: adapter_config.json cannot be "
                           f"read ({exc}); fix or replace the file") from None
    if not isinstance(config, dict):
        raise AdapterError(f"--lora-modules {name}={path}: adapter_config.json is not a JSON "
                           "object; fix or replace the file")
    kind = config.get("peft_type")
    if kind is not None and str(kind).upper() != "LORA":
        raise AdapterError(f"--lora-modules {name}={path}: a {kind} adapter, not LoRA; vLLM "
                           "serves LoRA adapters only")
    rank = config.get("r")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise AdapterError(f"--lora-modules {name}={path}: adapter_config.json has no rank "
                           "'r' (a positive integer); fix the file")
    pattern = config.get("rank_pattern") or {}
    ranks = [rank] + [r for r in pattern.values() if isinstance(r, int)] \
        if isinstance(pattern, dict) else [rank]
    weights = next((folder / f for f in WEIGHT_FILES if (folder / f).is_file()), None)
    if weights is None:
        raise AdapterError(f"--lora-modules {name}={path}: no {' or '.join(WEIGHT_FILES)} in "
                           "the folder; give the folder peft's save_pretrained wrote")
    targets = config.get("target_modules") or ()
    alpha = config.get("lora_alpha")
    base = config.get("base_model_name_or_path")
    return LoraAdapter(
        name=name,
        path=str(folder),
        rank=max(ranks),
        alpha=float(alpha) if isinstance(alpha, (int, float)) else None,
        target_modules=(targets,) if isinstance(targets, str) else tuple(map(str, targets)),
        base_model=str(base) if base else None,
        sha256=file_sha256(weights),
    )


def read_adapters(items: Iterable[str]) -> list[LoraAdapter]:
    """Every ``NAME=PATH`` item (:func:`parse_lora_modules`'s) read (:func:`read_adapter`)."""
    return [read_adapter(*split_module(item)) for item in items]


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, as hex."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
