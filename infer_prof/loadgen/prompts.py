"""Prompts as token-ID lists of exactly the asked length.

Sending token IDs (not text) means the server does not re-tokenize: a prompt of 512 IDs is 512
prompt tokens, with no drift. IDs are drawn at random (seeded) from the tokenizer's ordinary
vocabulary, special tokens excluded, so prompts are unique and the prefix cache cannot flatter
a result unless a workload asks for shared prefixes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TokenPool:
    """The token IDs prompts are drawn from."""

    ids: Sequence[int]

    @classmethod
    def from_vocab_size(cls, vocab_size: int) -> TokenPool:
        """Without a tokenizer: IDs from 100 to the vocabulary size (low IDs are often special)."""
        lo = min(100, vocab_size // 4)
        return cls(range(lo, vocab_size))

    @classmethod
    def from_tokenizer_dir(cls, path: str) -> TokenPool:
        """With a tokenizer: its ordinary tokens (special and added tokens excluded)."""
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)
        special = set(tok.all_special_ids) | set(getattr(tok, "added_tokens_decoder", {}) or {})
        return cls([i for i in range(len(tok)) if i not in special])


def make_prompt(
    pool: TokenPool, length: int, rng: random.Random, prefix: Sequence[int] = ()
) -> list[int]:
    """A prompt of exactly ``length`` token IDs: ``prefix`` (may be empty), then random IDs."""
    if length < 1:
        raise ValueError(f"prompt length must be at least 1 token, got {length}")
    head = list(prefix[:length])
    ids = pool.ids
    n = len(ids)
    return head + [ids[int(rng.random() * n)] for _ in range(length - len(head))]
