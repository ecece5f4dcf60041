"""Where a model's weights can come from: a local folder, the Hugging Face cache, the hub.

The I/O half of the weights decision (the decision itself is
:mod:`infer_prof.core.planning.weights`): list a folder's weight files, look up the Hugging Face
cache without the network (``huggingface_hub.try_to_load_from_cache``; the cache folder is
``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``), and ask the hub
(``$HF_ENDPOINT``, default https://huggingface.co) with one HEAD request for the repository's
config.json, carrying the user's token (``$HF_TOKEN`` or the one ``huggingface-cli login`` stored),
given a few seconds at most. ``HF_HUB_OFFLINE`` set means the hub is not asked.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infer_prof.core.planning.weights import (
    HubStatus,
    WeightDecision,
    WeightFacts,
    decide,
    missing_shards,
    weight_files,
)

if TYPE_CHECKING:  # models fetches a hub id's config.json through hub, which reads this module
    from infer_prof.catalog.models import ResolvedModel

HUB_TIMEOUT_S = 3.0
"""The longest the hub is waited for (connection, DNS and answer together), seconds."""

_TRUE = ("1", "true", "yes", "on")


def hub_endpoint() -> str:
    """The hub's base URL: ``$HF_ENDPOINT`` or https://huggingface.co (no trailing slash)."""
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) asks to stay off the network."""
    return any(
        (os.environ.get(v) or "").strip().lower() in _TRUE
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_token() -> str | None:
    """The user's hub token: ``$HF_TOKEN``, else the one stored by ``huggingface-cli login``."""
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        return token
    try:
        from huggingface_hub import get_token

        return get_token()
    except Exception:  # noqa: BLE001 - no huggingface_hub, unreadable token file: no token
        return None


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache folder, read from the environment at call time."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def folder_weights(folder: str | Path) -> tuple[str, ...]:
    """The weight files of a model folder, or () when it has none or a sharded checkpoint's
    index (``*.index.json``) names shards that are absent (an interrupted download)."""
    p = Path(folder)
    try:
        names = [e.name for e in p.iterdir() if e.is_file()]  # is_file follows symlinks
    except OSError:
        return ()
    found = weight_files(names)
    for index in (n for n in names if n.endswith(".index.json")):
        try:
            doc = json.loads((p / index).read_text())
            shards = list((doc.get("weight_map") or {}).values())
        except (OSError, ValueError, AttributeError):
            continue
        if shards and missing_shards(shards, names):
            return ()
    return tuple(found)


def cached_folders(repo_id: str, cache_dir: Path | None = None) -> tuple[str | None, str | None]:
    """(snapshot folder with complete weights, snapshot folder with a config.json) of
    ``repo_id`` in the Hugging Face cache, each None when absent. No network."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None, None
    folder = cache_dir or hub_cache_dir()
    try:
        hit = try_to_load_from_cache(repo_id, "config.json", cache_dir=str(folder))
    except Exception:  # noqa: BLE001 - a malformed repo id or cache: nothing cached
        return None, None
    if not isinstance(hit, str):
        return None, None
    snapshot = str(Path(hit).parent)
    return (snapshot if folder_weights(snapshot) else None), snapshot


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect (to the file's storage) already says the file is there


def _head(url: str, token: str | None, timeout_s: float) -> HubStatus:
    headers = {"User-Agent": "infer-prof"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, method="HEAD", headers=headers)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req, timeout=timeout_s) as resp:
            return HubStatus("ok", f"HTTP {resp.status}", bool(token))
    except urllib.error.HTTPError as exc:
        code = exc.code
        error_code = (exc.headers.get("X-Error-Code") or "") if exc.headers else ""
        if 300 <= code < 400:
            return HubStatus("ok", f"HTTP {code}", bool(token))
        if error_code == "GatedRepo" or (code in (401, 403) and error_code != "RepoNotFound"):
            return HubStatus("gated", f"HTTP {code}", bool(token))
        if code == 404 or error_code in ("RepoNotFound", "EntryNotFound"):
            return HubStatus("not_found", f"HTTP {code}", bool(token))
        return HubStatus("error", f"HTTP {code}", bool(token))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return HubStatus("unreachable", _why_unreachable(exc, timeout_s), bool(token))


def _why_unreachable(exc: BaseException, timeout_s: float) -> str:
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, socket.gaierror):
        return "name lookup failed"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return f"no answer within {timeout_s:g} s"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    return str(reason) or type(reason).__name__


def probe_hub(
    repo_id: str,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    timeout_s: float = HUB_TIMEOUT_S,
) -> HubStatus:
    """Ask the hub whether ``repo_id``'s files can be downloaded: HEAD
    ``{endpoint}/{repo_id}/resolve/main/config.json`` with the token, at most ``timeout_s``
    seconds in all (name lookup included). 200 or a redirect: ``ok``; 401/403 (or the hub's
    ``X-Error-Code: GatedRepo``): ``gated``; 404 or ``RepoNotFound``: ``not_found``; no answer:
    ``unreachable``. Never raises."""
    url = f"{(endpoint or hub_endpoint()).rstrip('/')}/{repo_id}/resolve/main/config.json"
    box: list[HubStatus] = []
    # name lookup ignores socket timeouts: bound the whole request with a thread
    worker = threading.Thread(
        target=lambda: box.append(_head(url, token, timeout_s)), daemon=True
    )
    worker.start()
    worker.join(timeout_s + 0.5)
    if not box:
        return HubStatus("unreachable", f"no answer within {timeout_s:g} s", bool(token))
    return box[0]


def gather_facts(
    model: ResolvedModel, load_format: str | None, require_weights: bool
) -> WeightFacts:
    """Look at the folder, the cache and the hub, as far as the decision needs them."""
    base = WeightFacts(
        name=model.name,
        source=model.source,
        load_format=load_format,
        require_weights=require_weights,
        local_path=model.path if model.source in ("tiny", "local") else None,
        hub_id=model.hub_id,
        architecture_known=model.spec is not None,
    )
    if model.source in ("tiny", "local"):
        return replace(base, local_weights=folder_weights(model.path))
    if load_format is not None or not model.hub_id:
        return base
    snapshot, config_folder = cached_folders(model.hub_id)
    facts = replace(
        base,
        cached_snapshot=snapshot,
        cached_config=config_folder,
        architecture_known=model.spec is not None or config_folder is not None,
    )
    if snapshot:
        return facts
    if hub_offline():
        return replace(facts, hub=HubStatus("offline", "HF_HUB_OFFLINE"))
    return replace(facts, hub=probe_hub(model.hub_id, token=hub_token()))


def choose_weights(
    model: ResolvedModel, load_format: str | None, require_weights: bool = False
) -> WeightDecision:
    """The weights decision for ``model`` (see :func:`infer_prof.core.planning.weights.decide`).

    A generated tiny model without weight files (the tiny architectures beside tiny-llama: a
    config.json and a tokenizer) loads with random weights (``--load-format dummy``) unless a
    load format is given."""
    facts = gather_facts(model, load_format, require_weights)
    if facts.source == "tiny" and not facts.local_weights and load_format is None:
        facts = replace(facts, load_format="dummy")
        decision = decide(facts)
        if decision.error is None:
            return replace(decision, origin="random",
                           reason="generated tiny model: config.json and tokenizer, no weight "
                           "files")
        return decision
    return decide(facts)
