"""The inner parts of a result's ``model``, ``api`` and ``cost`` sections as types: the
model's architecture and weights decision, the chat template's share of the prompt, where a
market price came from, and the cost of owning the GPUs.

Each mirrors the module that builds it (named on the class); a field an older file lacks
takes its default (None: not recorded).
"""

from __future__ import annotations

from typing import Literal

from infer_prof.results.document_base import Section


class ModelArchitecture(Section):
    """``model.spec``: the architecture numbers of a decoder-only transformer, as its
    config.json states them (``core.catalog.models.ModelSpec``)."""

    name: str | None = None
    hub_id: str | None = None
    architecture: str | None = None
    num_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_kv_heads: int | None = None
    vocab_size: int | None = None
    intermediate_size: int | None = None
    max_position_embeddings: int | None = None
    head_dim: int | None = None
    tie_word_embeddings: bool | None = None
    attention_bias: bool | None = None


class WeightsUsed(Section):
    """``model.weights``: ``real`` or ``random`` weights, where they came from (``local``,
    ``hf-cache``, ``hub``, ``random``, ``as-given``), the load format vLLM got (None: its
    default), why, and the folder loaded instead of the model's own
    (``core.planning.weights.WeightDecision``)."""

    weights: Literal["real", "random"] | None = None
    origin: str | None = None
    load_format: str | None = None
    reason: str | None = None
    engine_path: str | None = None


class ChatTemplateTokens(Section):
    """``api.chat_template_tokens``: the prompt tokens the server's chat template added to
    each message (prompt tokens - the message's own), over ``requests`` completed requests
    (``core.measurement.api_tokens``)."""

    mean: float | None = None
    min: int | None = None
    max: int | None = None
    requests: int | None = None


class PriceCatalog(Section):
    """``cost.price.catalog``: the instance market a price came from (``catalog.market``):
    its ``source`` folder and ``origin``, the prices' ``date`` and ``age_days``, ``stale``
    past the age limit, what was ``read`` (rows, offers, rows skipped and why) and a
    ``notice``."""

    source: str | None = None
    origin: str | None = None
    date: str | None = None
    age_days: int | None = None
    stale: bool | None = None
    read: str | None = None
    notice: str | None = None


class OwnedCost(Section):
    """``cost.owned``: the hourly cost of owning the GPUs (``core.catalog.prices.OwnedCost``:
    amortization over ``years`` at ``utilization``, electricity at ``usd_per_kwh`` for
    ``power_kw`` measured or from the TDP, overhead), the $ per 1M output tokens at that cost
    and the hours after which buying beats renting; ``available`` False with a ``reason`` when
    the options cannot be costed."""

    available: bool | None = None
    reason: str | None = None
    amortization_usd_per_hour: float | None = None
    electricity_usd_per_hour: float | None = None
    overhead_usd_per_hour: float | None = None
    usd_per_hour: float | None = None
    power_kw: float | None = None
    power_source: str | None = None
    purchase_usd: float | None = None
    years: float | None = None
    utilization: float | None = None
    usd_per_kwh: float | None = None
    usd_per_million_output_tokens: float | None = None
    break_even_hours: float | None = None
