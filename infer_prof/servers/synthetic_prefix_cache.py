"""The synthetic server's prefix cache (``--prefix-cache-block B``): exact, over token-ID
prompts in blocks of ``B`` tokens, by vLLM's rule (a request hits on its leading full blocks
seen before). It counts ``vllm:prefix_cache_{queries,hits}_total`` as vLLM does, says each
request's cached tokens (its usage's ``prompt_tokens_details.cached_tokens``), and is emptied
by ``POST /reset_prefix_cache``, as vLLM's dev route empties its own (a synthetic server
without a prefix cache answers it too: it has nothing cached)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class SyntheticPrefixCache:
    """The cache's blocks (keys: the hash of the whole prefix up to a block's end) and its
    counters (tokens queried, tokens hit since start)."""

    def __init__(self, block: int) -> None:
        self.block = block
        self.seen: set[int] = set()
        self.queries = 0
        self.hits = 0

    def lookup(self, prompt: Sequence[Any]) -> int:
        """Count a prompt's lookup: every token is queried, the leading full blocks already
        seen are hits (their tokens returned); then all its full blocks are cached."""
        b = self.block
        keys = [hash(tuple(prompt[:end])) for end in range(b, len(prompt) + 1, b)]
        hit = 0
        while hit < len(keys) and keys[hit] in self.seen:
            hit += 1
        self.queries += len(prompt)
        self.hits += hit * b
        self.seen.update(keys)
        return hit * b

    def reset(self) -> None:
        """Empty the cache (the counters go on, as vLLM's do)."""
        self.seen.clear()

    def metrics_text(self, model_name: str) -> str:
        """The two counters in Prometheus text."""
        lab = f'{{model_name="{model_name}"}}'
        return (f"# TYPE vllm:prefix_cache_queries_total counter\n"
                f"vllm:prefix_cache_queries_total{lab} {self.queries}\n"
                f"# TYPE vllm:prefix_cache_hits_total counter\n"
                f"vllm:prefix_cache_hits_total{lab} {self.hits}\n")
