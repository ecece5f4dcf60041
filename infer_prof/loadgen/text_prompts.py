"""Text prompts whose token count is exactly the asked input length (``--prompt text``).

Servers that take text tokenize it themselves; vLLM's ``/v1/completions`` tokenizes a text
prompt with ``add_special_tokens=True``, so a BOS token that the tokenizer's post-processor adds
counts towards ``usage.prompt_tokens``. A prompt here is built against the same count: the
length of ``Tokenizer.encode(text, add_special_tokens=True)`` with the model's
``tokenizer.json`` (the ``tokenizers`` library, no torch or transformers).

Method: words are drawn with a seeded RNG from the tokenizer's own vocabulary (ordinary tokens
that decode to a plain ASCII word), joined with spaces, and the text is re-encoded; while the
count is short, words are appended (one per missing token), while it is long, words are dropped
from the end. Each round re-counts the whole text, so the result is verified, not estimated;
the same RNG state gives the same prompt. A prompt that cannot be made exact within
:data:`MAX_ROUNDS` rounds raises ``ValueError`` (it has not happened on the tokenizers tested).
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Rounds of re-encoding before a prompt is given up on.
MAX_ROUNDS = 500


class TextPromptMaker:
    """Builds exact-length text prompts for one tokenizer (see the module docstring)."""

    def __init__(self, count: Callable[[str], int], words: list[str]) -> None:
        """``count(text)``: the server's prompt-token count of ``text``; ``words``: the pool."""
        if not words:
            raise ValueError("no words to build text prompts from")
        self.count = count
        self.words = words
        #: tokens the server adds to any text (BOS/EOS from the post-processor)
        self.overhead = count("")

    @classmethod
    def from_tokenizer_dir(cls, path: str | Path) -> TextPromptMaker:
        """From a folder with ``tokenizer.json``; raises FileNotFoundError without one."""
        return cls.from_tokenizer(load_tokenizer(path))

    @classmethod
    def from_tokenizer(cls, tok: Any) -> TextPromptMaker:
        """From a ``tokenizers.Tokenizer``: the word pool is every ordinary token (added and
        special tokens excluded) that decodes to an ASCII word of 2+ letters; a vocabulary with
        fewer than 20 of those falls back to adding the single letters a-z."""
        added = set(tok.get_added_tokens_decoder())
        size = tok.get_vocab_size(with_added_tokens=False)
        words: set[str] = set()
        for i in range(size):
            if i in added:
                continue
            w = tok.decode([i]).strip()
            if len(w) >= 2 and w.isascii() and w.isalpha():
                words.add(w)
        if len(words) < 20:
            words |= set(string.ascii_lowercase)

        return cls(server_token_counter(tok), sorted(words))

    def make(self, length: int, rng: random.Random, prefix: str = "") -> str:
        """A text of exactly ``length`` prompt tokens (special tokens included), starting with
        ``prefix`` (a shared prefix; may be empty). Raises ValueError when ``length`` is not more
        than the tokens the server adds to an empty text, or the prefix alone is too long."""
        if length <= self.overhead:
            raise ValueError(f"a text prompt needs more than {self.overhead} token(s) (the ones "
                             f"the tokenizer adds itself); asked for {length}")
        parts: list[str] = [prefix] if prefix else []
        fixed = len(parts)
        c = self.count(" ".join(parts))
        if c > length:
            raise ValueError(f"the prefix alone is {c} tokens, more than the {length} asked")
        words = self.words
        for _ in range(MAX_ROUNDS):
            if c == length:
                return " ".join(parts)
            if c < length:
                parts.extend(words[int(rng.random() * len(words))] for _ in range(length - c))
            else:
                over = c - length
                drop = max(1, over // 2) if over > 8 else 1
                del parts[max(fixed, len(parts) - drop):]
            c = self.count(" ".join(parts))
        raise ValueError(f"could not build a text of exactly {length} tokens in {MAX_ROUNDS} "
                         "rounds; use --prompt token-ids")


def server_token_counter(tok: Any) -> Callable[[str], int]:
    """``count(text)``: the prompt tokens a server counts for ``text`` with the
    ``tokenizers.Tokenizer`` ``tok`` (``add_special_tokens=True``, as vLLM's completions API)."""

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=True).ids)

    return count


def load_tokenizer(path: str | Path) -> Any:
    """The ``tokenizers.Tokenizer`` of a folder's ``tokenizer.json`` (FileNotFoundError
    without one)."""
    fast = Path(path) / "tokenizer.json"
    if not fast.is_file():
        raise FileNotFoundError(f"{fast} does not exist: text prompts and datasets need a fast "
                                "tokenizer (tokenizer.json)")
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(fast))
