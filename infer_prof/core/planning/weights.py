"""Which weights a run loads: real ones when they can be had, else the architecture with random
weights (vLLM ``--load-format dummy``), decided before anything starts.

Pure: the facts (what a local folder holds, what the Hugging Face cache holds, what the hub
answered) come in as plain values, gathered by :mod:`infer_prof.catalog.weights`; the decision comes
out. The order for an alias or a hub id is: real weights in the Hugging Face cache, then real
weights from the hub (reachable, not ``HF_HUB_OFFLINE``, and the repository open to the user's
token), then random weights of the architecture. Random weights give the same speed as real ones
for the same architecture (same shapes, same kernels); the outputs are meaningless.

- ``--load-format`` given explicitly is obeyed (no lookup at all).
- ``--require-weights`` turns "random weights" into an error.
- A local folder without weight files is an error unless the load format is ``dummy``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf")
"""File names vLLM loads weights from (``--load-format auto`` tries safetensors, then the
PyTorch ``.bin``/``.pt`` files; GGUF is a single file)."""

NOT_WEIGHTS = ("training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth")
"""Files with those suffixes that hold no model weights (left by a trainer)."""

HubState = Literal["ok", "gated", "not_found", "unreachable", "offline", "error"]


def weight_files(names: Iterable[str]) -> list[str]:
    """The names among ``names`` (file names, no folders) that hold model weights, sorted."""
    return sorted(
        n
        for n in names
        if n not in NOT_WEIGHTS and any(fnmatch.fnmatch(n, p) for p in WEIGHT_PATTERNS)
    )


def missing_shards(index_files: Iterable[str], present: Iterable[str]) -> list[str]:
    """Shards a ``*.index.json`` weight map names (``index_files``) that are not ``present``."""
    have = set(present)
    return sorted({f for f in index_files if f not in have})


@dataclass(frozen=True)
class HubStatus:
    """What the hub said about a repository: ``state`` and a short ``detail`` (HTTP status,
    the error). ``ok`` means its files can be downloaded with the token at hand."""

    state: HubState
    detail: str = ""
    token: bool = False  # whether a token was sent


@dataclass(frozen=True)
class WeightFacts:
    """What was found before deciding (see :func:`decide`).

    ``source`` is the model's kind (``tiny``, ``alias``, ``local``, ``hub``); ``load_format``
    the one given explicitly (None when not); ``local_weights`` the weight files of a local
    folder (None for other sources); ``cached_snapshot`` a Hugging Face cache snapshot folder
    holding complete weights; ``cached_config`` one holding at least config.json; ``hub`` the
    probe's answer (None when the hub was not asked).
    """

    name: str
    source: str
    load_format: str | None = None
    require_weights: bool = False
    local_path: str | None = None
    local_weights: tuple[str, ...] | None = None
    hub_id: str | None = None
    cached_snapshot: str | None = None
    cached_config: str | None = None
    hub: HubStatus | None = None
    architecture_known: bool = True


@dataclass(frozen=True)
class WeightDecision:
    """The outcome: ``weights`` is ``real`` or ``random``; ``origin`` where they come from
    (``local``, ``hf-cache``, ``hub``, ``random``, or ``as-given`` when ``--load-format`` was
    given); ``load_format`` what vLLM gets (None: its default); ``engine_path`` a folder to load
    instead of the model's own path (a cache snapshot), or None; ``reason`` why, in words;
    ``notice`` the console line to show (None when nothing needs saying); ``error`` set when the
    run must not start (a one-line message naming the fix)."""

    weights: Literal["real", "random"] | None
    origin: str
    load_format: str | None
    reason: str
    engine_path: str | None = None
    notice: str | None = None
    error: str | None = None


def _unavailable_why(facts: WeightFacts) -> str:
    """Why no real weights can be had, e.g. "gated on the hub, not cached"."""
    hub = facts.hub
    if hub is None:
        where = "the hub was not asked"
    elif hub.state == "offline":
        where = "HF_HUB_OFFLINE is set"
    elif hub.state == "unreachable":
        where = f"hub unreachable: {hub.detail}" if hub.detail else "hub unreachable"
    elif hub.state == "gated":
        where = (
            "gated on the hub, your token has no access"
            if hub.token
            else "gated on the hub, no token (HF_TOKEN)"
        )
    elif hub.state == "not_found":
        where = "not on the hub"
    elif hub.state == "error":
        where = f"hub error: {hub.detail}" if hub.detail else "hub error"
    else:
        where = "hub open"
    return f"{where}, not cached"


def decide(facts: WeightFacts) -> WeightDecision:
    """Decide which weights the run loads (see the module docstring for the order)."""
    name, lf = facts.name, facts.load_format
    if facts.require_weights and lf == "dummy":
        return WeightDecision(
            None,
            "as-given",
            lf,
            "contradiction",
            error="--require-weights and --load-format dummy contradict each other; drop one",
        )
    if facts.source == "local" and lf != "dummy" and not facts.local_weights:
        return WeightDecision(
            None,
            "local",
            lf,
            "no weight files",
            error=(
                f"model folder {facts.local_path} has no weight files ("
                + ", ".join(WEIGHT_PATTERNS)
                + "): add them, or give --load-format dummy to profile its architecture with "
                "random weights"
            ),
        )
    if lf is not None:
        kind: Literal["real", "random"] = "random" if lf == "dummy" else "real"
        return WeightDecision(kind, "as-given", lf, f"--load-format {lf} given")
    if facts.source in ("tiny", "local"):
        n = len(facts.local_weights or ())
        what = "generated tiny model" if facts.source == "tiny" else "local folder"
        return WeightDecision(
            "real", "local", None, f"{what} ({n} weight file{'' if n == 1 else 's'})"
        )
    if facts.cached_snapshot:
        return WeightDecision(
            "real",
            "hf-cache",
            None,
            f"complete weights in the Hugging Face cache ({facts.cached_snapshot})",
            engine_path=facts.cached_snapshot,
            notice=f"{name}: real weights from the Hugging Face cache ({facts.cached_snapshot})",
        )
    hub_id = facts.hub_id or name
    if facts.hub is not None and facts.hub.state == "ok":
        return WeightDecision(
            "real",
            "hub",
            None,
            f"open on the hub ({facts.hub.detail or 'reachable'}), not cached",
            notice=(
                f"{name}: real weights from the hub ({hub_id}), not cached: vLLM downloads "
                "them first (give --load-format dummy to profile the architecture without them)"
            ),
        )
    why = _unavailable_why(facts)
    if facts.require_weights:
        return WeightDecision(
            None,
            "random",
            None,
            why,
            error=(
                f"{name}: no weights available ({why}) and --require-weights is given: "
                "download them into the Hugging Face cache, set HF_TOKEN for a gated model, "
                "or drop --require-weights to profile the architecture with random weights"
            ),
        )
    if not facts.architecture_known:
        return WeightDecision(
            None,
            "random",
            None,
            why,
            error=(
                f"{name}: no weights and no config.json available ({why}): give a known alias "
                "(infer-prof models), a local model folder, or run where the hub is reachable"
            ),
        )
    return WeightDecision(
        "random",
        "random",
        "dummy",
        f"no weights available ({why})",
        engine_path=facts.cached_config if facts.source == "hub" else None,
        notice=(
            f"{name}: no weights available ({why}): profiling its architecture with random "
            "weights; speed is the same, outputs are meaningless"
        ),
    )
