"""Fetch a hub model's config.json and the tokenizer files prompts need, into the cache.

``--model org/name`` that is neither an alias nor a local folder: its ``config.json`` (the
planner's input) and its tokenizer files (``tokenizer.json``, else ``tokenizer.model`` for
sentencepiece, else ``vocab.json`` + ``merges.txt``; with ``tokenizer_config.json``,
``special_tokens_map.json`` and ``generation_config.json`` where the repository has them) come from
the Hugging Face cache, else from the hub through ``huggingface_hub.hf_hub_download``: the cache
keeps huggingface_hub's own layout (``models--org--name/snapshots/<commit>/``), so vLLM and
transformers find the same files without asking again. The hub is ``$HF_ENDPOINT`` (default
https://huggingface.co; files at ``{endpoint}/{repo_id}/resolve/{revision}/{filename}``), the
token ``$HF_TOKEN`` (else ``huggingface-cli login``'s), sent as ``Authorization: Bearer``;
``HF_HUB_OFFLINE`` keeps to the cache. All are read when called, not when imported. Before
downloading, the hub is asked once with a bounded HEAD (:func:`~infer_prof.catalog.weights.
probe_hub`, a few seconds at most): huggingface_hub retries an unreachable hub with back-off for
minutes. Weights are
never fetched here (the weights decision, :mod:`infer_prof.catalog.weights`, leaves them to the
engine).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_prof.catalog.weights import (
    HUB_TIMEOUT_S,
    hub_cache_dir,
    hub_endpoint,
    hub_offline,
    hub_token,
    probe_hub,
)

#: Tried after config.json, each where the repository has it; the first present of each group
#: of alternatives is enough.
TOKENIZER_FILES: tuple[tuple[str, ...], ...] = (
    ("tokenizer.json", "tokenizer.model", "vocab.json"),
    ("tokenizer_config.json",),
    ("special_tokens_map.json",),
    ("generation_config.json",),
)


class HubError(ValueError):
    """config.json could not be had from the cache or the hub; the message (one line) says why
    and what to do instead."""


def fetch_model_files(repo_id: str, revision: str = "main") -> Path:
    """The cache snapshot folder of ``repo_id`` holding its config.json and, where the
    repository has them, its tokenizer files (:data:`TOKENIZER_FILES`), downloaded first when
    not cached. Raises :class:`HubError` (one line) when config.json cannot be had: offline or
    the hub unreachable (give a local folder), a gated or private repository (``HF_TOKEN``), no
    such repository or no config.json in it."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()  # a few small files: no bars on the run's console
    endpoint, token, offline = hub_endpoint(), hub_token(), hub_offline()

    def get(name: str, local_only: bool) -> Path:
        found: Any = hf_hub_download(
            repo_id, name, revision=revision, cache_dir=str(hub_cache_dir()),
            endpoint=endpoint, token=token or False, local_files_only=local_only,
            etag_timeout=HUB_TIMEOUT_S,
        )
        return Path(found)

    local = ("give --model a local folder holding its config.json (and tokenizer files), e.g. "
             f"`huggingface-cli download {repo_id} --include '*.json' '*.model' "
             "--local-dir DIR` where the hub is reachable")
    try:
        return _with_tokenizer(get("config.json", True).parent, get, True)
    except HFValidationError as exc:
        raise HubError(f"{repo_id!r} is not a hub model id (org/name): {exc}") from None
    except EntryNotFoundError:
        pass  # not cached
    if offline:
        raise HubError(f"{repo_id}: config.json is not in the Hugging Face cache "
                       f"({hub_cache_dir()}) and HF_HUB_OFFLINE is set: {local}")
    # huggingface_hub retries an unreachable hub for minutes: ask once, bounded, first
    status = probe_hub(repo_id, endpoint=endpoint, token=token)
    if status.state == "unreachable":
        raise HubError(f"{repo_id}: config.json is not in the Hugging Face cache "
                       f"({hub_cache_dir()}) and the hub ({endpoint}) cannot be reached "
                       f"({status.detail}): {local}")
    if status.state == "error":
        raise HubError(f"{repo_id}: the hub ({endpoint}) answered {status.detail} for "
                       f"config.json: try again later, or {local}")
    try:
        config = get("config.json", False)
    except GatedRepoError:
        raise HubError(_gated(repo_id, endpoint, token)) from None
    except RepositoryNotFoundError as exc:
        if exc.response is not None and exc.response.status_code in (401, 403):
            raise HubError(_gated(repo_id, endpoint, token)) from None  # 401: private, too
        raise HubError(f"{repo_id}: no such model repository on {endpoint} (or it is private: "
                       "set HF_TOKEN); check the id, or give a known alias (infer-prof models)"
                       ) from None
    except RevisionNotFoundError:
        raise HubError(f"{repo_id}: no revision {revision!r} on {endpoint}") from None
    except LocalEntryNotFoundError:
        raise HubError(f"{repo_id}: config.json could not be downloaded from {endpoint} "
                       f"(no answer the hub gives, or none in time): {local}") from None
    except EntryNotFoundError:
        raise HubError(f"{repo_id} has no config.json on {endpoint}: is it a model repository "
                       f"in the Hugging Face layout? Otherwise {local}") from None
    except HfHubHTTPError as exc:
        code = exc.response.status_code if exc.response is not None else "?"
        if code in (401, 403):
            raise HubError(_gated(repo_id, endpoint, token)) from None
        raise HubError(f"{repo_id}: the hub ({endpoint}) answered HTTP {code} for "
                       f"config.json: try again later, or {local}") from None
    return _with_tokenizer(config.parent, get, False)


def _with_tokenizer(folder: Path, get: Any, local_only: bool) -> Path:
    """``folder`` after fetching (or, ``local_only``, looking up) :data:`TOKENIZER_FILES`."""
    for group in TOKENIZER_FILES:
        for name in group:
            try:
                get(name, local_only)
                break
            except Exception:  # noqa: BLE001 - not there (or not now): prompts use token IDs
                continue
    return folder


def _gated(repo_id: str, endpoint: str, token: str | None) -> str:
    if token:
        return (f"{repo_id} is gated or private on {endpoint} and the token in HF_TOKEN has no "
                "access: accept its terms on the model's page with that account, or give a "
                "local folder holding its config.json")
    return (f"{repo_id} is gated or private on {endpoint}: set HF_TOKEN to a token with access "
            "(after accepting its terms on the model's page), or give a local folder holding "
            "its config.json")
