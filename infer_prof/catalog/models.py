"""Resolve ``--model``: a known alias, a local model directory, or a hub id.

The registry of aliases ships in ``infer_prof/catalog/data/models.json`` (the config.json of each
model), so the tool can reason about a model, and profile its real shapes with random weights,
without downloading anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from infer_prof.catalog.cache import cache_dir
from infer_prof.catalog.tinymodel import (
    TINY_ARCHS,
    TINY_LLAMA,
    ensure_tiny_model,
    tiny_model_dir,
)
from infer_prof.catalog.trained_thinker import TINY_THINKER, ensure_tiny_thinker
from infer_prof.catalog.trained_tiny import TINY_ADDER, ensure_tiny_adder
from infer_prof.core.catalog.models import ModelSpec


class ModelError(ValueError):
    """A --model value that cannot be resolved; the message says what to do instead."""


@dataclass(frozen=True)
class ResolvedModel:
    """What ``--model`` turned into.

    ``path`` is what the engine loads (a local directory, or a hub id when nothing is local);
    ``spec`` is the architecture when it is known; ``has_tokenizer`` says whether a tokenizer is
    at hand to build prompts (otherwise prompts go as plain token IDs).
    """

    name: str
    path: str
    spec: ModelSpec | None
    hub_id: str | None
    has_tokenizer: bool
    source: str  # "alias", "tiny", "local", "hub"


@cache
def registry() -> dict[str, dict[str, Any]]:
    """The shipped aliases: ``{alias: {"hub_id": ..., "config": {...config.json...}}}``."""
    text = resources.files("infer_prof.catalog.data").joinpath("models.json").read_text()
    return dict(json.loads(text)["models"])


def known_aliases() -> list[str]:
    """All aliases ``--model`` accepts, the generated tiny models first."""
    return [TINY_LLAMA, *TINY_ARCHS, *sorted(registry())]


def alias_config_dir(alias: str) -> Path:
    """Write the alias's config.json to a cache folder (for ``--load-format dummy``)."""
    entry = registry()[alias]
    folder = cache_dir() / "configs" / alias
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "config.json"
    text = json.dumps(entry["config"], indent=2)
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
    return folder


def _has_tokenizer(folder: Path) -> bool:
    return any((folder / f).exists() for f in ("tokenizer.json", "tokenizer.model", "vocab.json"))


def resolve_model(value: str, *, create_tiny: bool = True, fetch: bool = True
                  ) -> ResolvedModel:
    """Turn a ``--model`` value into something the engine can load.

    Order: the aliases ``tiny-llama`` and the other tiny architectures (``tiny-mixtral``, ...;
    generated locally on first use), ``tiny-adder`` and ``tiny-thinker`` (trained locally on
    first use), a
    shipped alias, an existing directory with a config.json, then anything shaped like
    ``org/name`` as a hub id, whose config.json and tokenizer files come from the Hugging Face
    cache or the hub (:func:`infer_prof.catalog.hub.fetch_model_files`; ``fetch=False``: not
    looked for, the architecture then unknown). Raises :class:`ModelError` with a one-line
    explanation otherwise.
    """
    if value in (TINY_LLAMA, TINY_ADDER, TINY_THINKER) or value in TINY_ARCHS:
        if value == TINY_ADDER:  # trained on this machine at first use (catalog.trained_tiny)
            folder = ensure_tiny_adder() if create_tiny else tiny_model_dir(value)
        elif value == TINY_THINKER:  # trained at first use (catalog.trained_thinker)
            folder = ensure_tiny_thinker() if create_tiny else tiny_model_dir(value)
        else:
            folder = ensure_tiny_model(value) if create_tiny else tiny_model_dir(value)
        config = json.loads((folder / "config.json").read_text()) if folder.exists() else None
        spec = ModelSpec.from_config(config, name=value) if config else None
        return ResolvedModel(value, str(folder), spec, None, True, "tiny")
    reg = registry()
    if value in reg:
        entry = reg[value]
        spec = ModelSpec.from_config(entry["config"], name=value, hub_id=entry["hub_id"])
        return ResolvedModel(value, entry["hub_id"], spec, entry["hub_id"], False, "alias")
    path = Path(value).expanduser()
    looks_like_path = value.startswith((".", "/", "~")) or path.exists()
    if looks_like_path:
        if not path.is_dir():
            raise ModelError(
                f"model directory {value!r} does not exist; give a folder holding a "
                f"config.json, or one of: {', '.join(known_aliases())}"
            )
        cfg_file = path / "config.json"
        if not cfg_file.exists():
            raise ModelError(
                f"model directory {value!r} has no config.json; point --model at the "
                "folder a Hugging Face model was saved in"
            )
        try:
            spec = ModelSpec.from_config(json.loads(cfg_file.read_text()), name=path.name)
        except ValueError as exc:  # not JSON, or a field the architecture needs is missing
            raise ModelError(f"model directory {value!r}: {exc}") from None
        return ResolvedModel(
            path.name, str(path.resolve()), spec, None, _has_tokenizer(path), "local"
        )
    if value.count("/") == 1 and all(value.split("/")):
        return _hub_model(value, fetch)
    raise ModelError(
        f"unknown model {value!r}; known aliases: {', '.join(known_aliases())} "
        "(or give a local model directory or a hub id such as org/name)"
    )


def _hub_model(repo_id: str, fetch: bool) -> ResolvedModel:
    """A hub id with its architecture read from its config.json (cached, or fetched now)."""
    if not fetch:
        return ResolvedModel(repo_id, repo_id, None, repo_id, True, "hub")
    from infer_prof.catalog.hub import HubError, fetch_model_files

    try:
        folder = fetch_model_files(repo_id)
        spec = ModelSpec.from_config(json.loads((folder / "config.json").read_text()),
                                     name=repo_id, hub_id=repo_id)
    except HubError as exc:
        raise ModelError(str(exc)) from None
    except ValueError as exc:  # not JSON, or a field the architecture needs is missing
        raise ModelError(f"{repo_id}'s config.json: {exc}") from None
    return ResolvedModel(repo_id, repo_id, spec, repo_id, _has_tokenizer(folder), "hub")
