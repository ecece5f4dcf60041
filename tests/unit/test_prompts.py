"""The prompt token pool's prompts: exact length, seeded. That the pool read with the
`tokenizers` library is the one transformers gives is tests/integration/test_prompts.py's."""

import random

from infer_prof.loadgen.prompts import TokenPool, make_prompt


def test_prompts_exact_length_and_seeded() -> None:
    pool = TokenPool.from_vocab_size(1000)
    a = [make_prompt(pool, n, random.Random(7)) for n in (1, 16, 512)]
    b = [make_prompt(pool, n, random.Random(7)) for n in (1, 16, 512)]
    assert [len(p) for p in a] == [1, 16, 512] and a == b
    assert all(100 <= i < 1000 for p in a for i in p)
