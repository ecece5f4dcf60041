"""The prompts of a load point that are not drawn afresh per request: the salt that keeps the
points of one launch from sharing prompts (:func:`point_salt`), a prefix group's shared prefix
(:func:`group_prefix`) and a Mooncake trace entry's hashed blocks (:func:`hashed_prompt`).
:func:`infer_prof.run.load_points.build_specs` builds each request's prompt from them."""

from __future__ import annotations

import random
from typing import Any

from infer_prof.core.workload.workloads import Workload
from infer_prof.loadgen.prompts import TokenPool, make_prompt
from infer_prof.loadgen.text_prompts import TextPromptMaker


def point_salt(ordinal: int) -> str:
    """What the ``ordinal``-th load point of a launch (0: the first) adds to its prompts'
    seeds (:func:`build_specs`): nothing for the first, so a single point's prompts are what
    its seed alone makes; ``/point<k>`` for the k-th after it."""
    return f"/point{ordinal}" if ordinal else ""


def group_prefix(
    wl: Workload,
    pool: TokenPool,
    text: TextPromptMaker | None,
    group: int,
    salt: str = "",
    *,
    warmup: bool = False,
) -> list[int] | str:
    """The shared prefix of prefix group ``group`` at a point (``shared_prefix.length``
    tokens: token IDs, or with ``text`` words of that many tokens), seeded
    ``"<seed><salt>/prefix/<group>"``; the warm-up's own ``".../warmup-prefix/<group>"``."""
    kind = "warmup-prefix" if warmup else "prefix"
    rng = random.Random(f"{wl.seed}{salt}/{kind}/{group}")
    length = wl.shared_prefix.length
    return text.make(length, rng) if text is not None else make_prompt(pool, length, rng)


def hashed_prompt(
    hash_ids: tuple[int, ...],
    length: int,
    seed: int | str,
    index: int,
    pool: TokenPool,
    text: TextPromptMaker | None,
    block_tokens: int,
    cache: dict[int, Any] | None = None,
) -> list[int] | str:
    """A Mooncake request's prompt of exactly ``length`` tokens: the fixed block of each hash
    id (``block_tokens`` tokens drawn with ``"<seed>/hash/<id>"``; the same id, the same block
    in every request), cut at ``length``, then fresh tokens (``"<seed>/prompt/<index>"``). As
    text, the blocks are ``block_tokens``-token texts joined by spaces, as many whole blocks as
    fit, then words up to the exact length. ``cache`` keeps the blocks made (by hash id)."""
    rng = random.Random(f"{seed}/prompt/{index}")
    cache = {} if cache is None else cache

    def block(h: int) -> Any:
        if h not in cache:
            r = random.Random(f"{seed}/hash/{h}")
            cache[h] = (
                make_prompt(pool, block_tokens, r) if text is None else text.make(block_tokens, r)
            )
        return cache[h]

    if text is None:
        head: list[int] = []
        for h in hash_ids:
            if len(head) >= length:
                break
            head += block(h)
        return make_prompt(pool, length, rng, head[:length])
    prefix = ""
    for h in hash_ids:
        longer = f"{prefix} {block(h)}" if prefix else str(block(h))
        if text.count(longer) > length - 1:
            break
        prefix = longer
    return text.make(length, rng, prefix)
