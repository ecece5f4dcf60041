"""Prompts as token-ID lists of exactly the asked length.

Sending token IDs (not text) means the server does not re-tokenize: a prompt of 512 IDs is 512
prompt tokens, with no drift. IDs are drawn at random (seeded) from the tokenizer's ordinary
vocabulary, special tokens excluded, so prompts are unique and the prefix cache cannot flatter
a result unless a workload asks for shared prefixes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


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
        """With a tokenizer: its ordinary tokens (special and added tokens excluded).

        Reads ``tokenizer.json`` with the ``tokenizers`` library (about 0.1 s, no torch); only a
        folder without one (a slow, sentencepiece-only tokenizer) goes through transformers,
        which costs seconds of imports. Both give the same pool: every ID below the vocabulary
        size (added tokens included) except the added tokens and the special tokens that
        ``tokenizer_config.json`` / ``special_tokens_map.json`` name.
        """
        fast = Path(path) / "tokenizer.json"
        if not fast.is_file():
            return cls._from_transformers(path)
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(fast))
        excluded = set(tok.get_added_tokens_decoder())
        for name in _named_special_tokens(Path(path)):
            tid = tok.token_to_id(name)
            if tid is not None:
                excluded.add(tid)
        size = tok.get_vocab_size(with_added_tokens=True)
        return cls([i for i in range(size) if i not in excluded])

    @classmethod
    def _from_transformers(cls, path: str) -> TokenPool:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)
        special = set(tok.all_special_ids) | set(getattr(tok, "added_tokens_decoder", {}) or {})
        return cls([i for i in range(len(tok)) if i not in special])


_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                 "mask_token")


def _named_special_tokens(folder: Path) -> set[str]:
    """The special tokens a tokenizer folder's JSON files name (bos, eos, ..., additional)."""
    names: set[str] = set()
    for fname in ("tokenizer_config.json", "special_tokens_map.json"):
        try:
            data = json.loads((folder / fname).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        values = [data.get(k) for k in _SPECIAL_KEYS]
        values += list(data.get("additional_special_tokens") or [])
        extra = data.get("extra_special_tokens") or []
        values += list(extra.values() if isinstance(extra, dict) else extra)
        for v in values:
            if isinstance(v, dict):
                v = v.get("content")
            if isinstance(v, str) and v:
                names.add(v)
    return names


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
