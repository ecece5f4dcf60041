"""The inner parts of a result's ``model`` and ``api`` sections as types: the model's
architecture and weights decision, and the chat template's share of the prompt.

Each mirrors the module that builds it (named on the class); a field an older file lacks
takes its default (None: not recorded).
"""

from __future__ import annotations

from typing import Literal

from infer_prof.core.measurement.api_record import ChatTemplateTokens as ChatTemplateTokens
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
