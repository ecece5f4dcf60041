"""The result's ``config`` section: every option of ``infer-prof run`` as the run was given it,
and over it what the run resolved for this point.

:data:`ConfigRecord` has one field per option, made from the option declarations
(:data:`infer_prof.config.run_groups.SUB_CONFIGS`: each field's name and type, ``| None`` for
files written before the option existed), so an option added to its group is recorded, typed
and in the shipped JSON Schema by that alone. :class:`ResolvedConfig` declares the fields the run
writes over the options (the API and load format it chose, the point's own load and lengths,
the prompts' source) and those read back by name (model, labels, precision settings), with the
types older files hold too. Type checkers see :class:`ResolvedConfig`; an option read by name
elsewhere goes through :func:`option_value`.
"""

from __future__ import annotations

import typing
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import msgspec

from infer_prof.config.run_groups import SUB_CONFIGS
from infer_prof.results.document_base import Section


class InputFileUsed(Section):
    """A file the run's requests came from, as the result identifies it: its path, the SHA-256
    of its bytes (what the configuration fingerprint compares) and its format."""

    path: str | None = None
    sha256: str | None = None
    format: str | None = None


class DatasetUsed(InputFileUsed):
    """The dataset file the prompts came from (``--dataset``): its path and SHA-256, format,
    the sample drawn (entries, seed), entries used and skipped (by reason), how messages were
    rendered, and where output lengths came from (``data`` or ``--output-len``)."""

    sample: int | None = None
    seed: int | None = None
    entries: int | None = None
    skipped: dict[str, int] = {}
    rendering: str | None = None
    output_len_from: str | None = None


class TraceUsed(InputFileUsed):
    """The trace replayed (``--trace``): path, SHA-256, format, the window replayed
    (``[start, end]`` seconds), time scale, requests, skipped lines by reason, the scheduled
    rate (requests/s), whether it carries prefix hash IDs and their block size (tokens)."""

    window_s: list[float | None] | None = None
    time_scale: float | None = None
    requests: int | None = None
    skipped: dict[str, int] = {}
    scheduled_rate: float | None = None
    hash_ids: bool | None = None
    block_tokens: int | None = None


class SessionDatasetUsed(InputFileUsed):
    """The ShareGPT file multi-turn conversations came from: path, SHA-256, format, sample,
    conversations and turns used, and skipped entries by reason."""

    sample: int | None = None
    conversations: int | None = None
    turns: int | None = None
    skipped: dict[str, int] = {}


class SessionsUsed(Section):
    """A multi-turn run's settings (``core.workload.sessions.SessionSettings``): turns per
    session, think time between turns (s), the conversations' source and dataset, the number of
    sessions (None: bound by duration), and how a turn is sent (``prompt``)."""

    turns: int | None = None
    think_time_s: float | None = None
    source: str | None = None
    sessions: int | None = None
    prompt: str | None = None
    dataset: SessionDatasetUsed | None = None


class ResolvedConfig(Section):
    """What the run writes over its options for this point, and the options read back by name,
    with every type an older file holds."""

    model: str | None = None
    api: str | None = None  # the API the run used (completions, chat), not only as given
    load_format: str | None = None  # as the run chose it (dummy: random weights)
    api_key: str | None = None  # "***" when one was given
    history_db: str | None = None  # where the run was recorded (never with a password)
    concurrency: int | list[int] | None = None  # this point's streams (closed loop)
    rate: float | None = None  # this point's offered requests/s (open loop)
    input_len: int | None = None  # tokens, when every prompt has the same length
    output_len: int | None = None
    num_requests: int | None = None
    warmup_requests: int | None = None
    prompt: str | None = None  # what a prompt is sent as (text, token-ids)
    dataset: DatasetUsed | str | None = None  # a hand-written file may name the path only
    trace: TraceUsed | str | None = None
    sessions: SessionsUsed | None = None
    workload: str | dict[str, Any] | None = None  # a name or file; older files: the mapping
    labels: dict[str, str] = {}
    quantization: str | None = None
    dtype: str | None = None
    served_model_name: str | None = None
    gpu: str | None = None


def _option_fields() -> list[tuple[str, Any, None]]:
    """``(name, type | None, None)`` for every option :class:`ResolvedConfig` does not
    declare, in the order ``run --help`` shows their groups."""
    own = set(ResolvedConfig.__struct_fields__)
    out: list[tuple[str, Any, None]] = []
    for kind in SUB_CONFIGS.values():
        hints = typing.get_type_hints(kind)  # Annotated metadata stripped: the value's type
        out += [(f.name, hints[f.name] | None, None) for f in fields(kind) if f.name not in own]
    return out


if TYPE_CHECKING:
    ConfigRecord = ResolvedConfig
else:
    ConfigRecord = msgspec.defstruct(
        "ConfigRecord", _option_fields(), bases=(ResolvedConfig,), kw_only=True,
        module=__name__)


def option_value(config: ResolvedConfig, name: str) -> Any:
    """The value of option ``name`` as recorded in ``config`` (None when the file predates
    it)."""
    return getattr(config, name, None)


def config_record(values: dict[str, Any]) -> ResolvedConfig:
    """A :data:`ConfigRecord` from the options by name (``RunConfig.options()``) and what the
    run resolved over them; raises ``msgspec.ValidationError`` for a value of the wrong type
    (its path named), ``TypeError`` for a name it does not declare."""
    unknown = sorted(set(values) - set(ConfigRecord.__struct_fields__))
    if unknown:
        raise TypeError(f"the result's config declares no field {unknown[0]!r}")
    record: ResolvedConfig = msgspec.convert(values, ConfigRecord, strict=False)
    return record
