"""Model architecture facts (the config.json numbers) and the arithmetic that follows from them.

Pure: no I/O. Loading configs from disk or the shipped registry lives in
``infer_prof.catalog.models``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelSpec:
    """The architecture numbers of a decoder-only transformer, as its config.json states them."""

    name: str
    hub_id: str | None
    architecture: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    vocab_size: int
    intermediate_size: int
    max_position_embeddings: int
    head_dim: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False

    @classmethod
    def from_config(
        cls, config: dict[str, Any], *, name: str, hub_id: str | None = None
    ) -> ModelSpec:
        """Build a spec from a Hugging Face ``config.json`` dictionary."""
        try:
            heads = int(config["num_attention_heads"])
            hidden = int(config["hidden_size"])
            archs = config.get("architectures") or [config.get("model_type", "unknown")]
            return cls(
                name=name,
                hub_id=hub_id,
                architecture=str(archs[0]),
                num_layers=int(config["num_hidden_layers"]),
                hidden_size=hidden,
                num_attention_heads=heads,
                num_kv_heads=int(config.get("num_key_value_heads") or heads),
                vocab_size=int(config["vocab_size"]),
                intermediate_size=int(config["intermediate_size"]),
                max_position_embeddings=int(config.get("max_position_embeddings") or 2048),
                head_dim=int(config.get("head_dim") or hidden // heads),
                tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
                attention_bias=bool(
                    config.get("attention_bias", config.get("model_type") == "qwen2")
                ),
            )
        except KeyError as exc:
            raise ValueError(f"config.json of {name!r} lacks the field {exc.args[0]!r}") from None

    @property
    def q_dim(self) -> int:
        """Width of the query projection: heads x head_dim."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of one of the K or V projections: KV heads x head_dim."""
        return self.num_kv_heads * self.head_dim

    def layer_params(self) -> int:
        """Parameters in one decoder layer: attention (q, k, v, o), gated MLP (3), 2 norms."""
        attn = self.hidden_size * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden_size
        if self.attention_bias:
            attn += self.q_dim + 2 * self.kv_dim
        mlp = 3 * self.hidden_size * self.intermediate_size
        return attn + mlp + 2 * self.hidden_size

    def embedding_params(self) -> int:
        """Input embedding plus the LM head (counted once when the two are tied)."""
        emb = self.vocab_size * self.hidden_size
        return emb if self.tie_word_embeddings else 2 * emb

    def param_count(self) -> int:
        """Total parameters: layers x per-layer + embeddings + LM head + final norm."""
        return self.num_layers * self.layer_params() + self.embedding_params() + self.hidden_size

    def linear_params(self) -> int:
        """Parameters in the decoder layers' linear weights (what weight quantization shrinks)."""
        per_layer = (
            self.hidden_size * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden_size
        )
        per_layer += 3 * self.hidden_size * self.intermediate_size
        return self.num_layers * per_layer

    def kv_cache_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV-cache bytes one token occupies: 2 (K and V) x layers x KV heads x head_dim x bytes."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * kv_dtype_bytes

    def flops_per_token(self) -> float:
        """Forward FLOPs per token, ignoring attention's context term: 2 x parameters."""
        return 2.0 * self.param_count()
