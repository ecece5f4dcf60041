"""Text prompts of exact token length, swept: 1,000 prompts of lengths 2 to 2,048 tokens for
each tokenizer (tiny-llama's, which adds no BOS, and a Llama-style one whose post-processor
adds one), each re-counted the way the server counts it.

Here, not in tests/unit (where the text prompt maker's single cases are): each prompt is built
by re-encoding its text several times, about 3.5 s per tokenizer on the 2-core VM.
"""

import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from infer_prof.catalog.tinymodel import ensure_tiny_llama
from infer_prof.loadgen.text_prompts import TextPromptMaker
from tests.unit.test_text_prompts import _bos_metaspace_tokenizer

pytestmark = pytest.mark.integration

LENGTHS = (2, 3, 7, 16, 64, 128, 300, 511, 1000, 2048)


def _check_exact(maker: TextPromptMaker, count: int, tok: Tokenizer) -> None:
    for i in range(count):
        n = LENGTHS[i % len(LENGTHS)]
        text = maker.make(n, random.Random(f"7/prompt/{i}"))
        assert len(tok.encode(text, add_special_tokens=True).ids) == n, (n, text[:80])
        assert text.strip() == text and text
    # same seed, same prompt; another seed, another prompt
    a = maker.make(128, random.Random("s/1"))
    assert a == maker.make(128, random.Random("s/1"))
    assert a != maker.make(128, random.Random("s/2"))


def test_tiny_llama_1000_prompts_exact() -> None:
    folder = ensure_tiny_llama()
    maker = TextPromptMaker.from_tokenizer_dir(folder)
    assert maker.overhead == 0  # the tiny tokenizer adds no BOS
    _check_exact(maker, 1000, Tokenizer.from_file(str(Path(folder) / "tokenizer.json")))


def test_bos_tokenizer_prompts_exact_and_count_the_bos() -> None:
    tok = _bos_metaspace_tokenizer()
    maker = TextPromptMaker.from_tokenizer(tok)
    assert maker.overhead == 1
    _check_exact(maker, 1000, tok)
    text = maker.make(16, random.Random(0))
    assert len(tok.encode(text, add_special_tokens=False).ids) == 15  # + the BOS = 16
