"""Text prompts of exact token length: the count the server makes (special tokens included)."""

import random
from pathlib import Path

import pytest
from tokenizers import (
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

from infer_prof.catalog.tinymodel import ensure_tiny_llama
from infer_prof.loadgen.text_prompts import TextPromptMaker

LENGTHS = (2, 3, 7, 16, 64, 128, 300, 511, 1000, 2048)
CORPUS = ("It was the best of times, it was the worst of times, it was the age of wisdom, it "
          "was the age of foolishness, it was the epoch of belief, it was the epoch of "
          "incredulity, it was the season of Light, it was the season of Darkness.\n") * 20


def _bos_metaspace_tokenizer() -> Tokenizer:
    """A Llama-style tokenizer: metaspace BPE whose post-processor adds a BOS to every text."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tok.decoder = decoders.Metaspace(prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                  show_progress=False)
    tok.train_from_iterator(CORPUS.splitlines(), trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    return tok


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


def test_too_short_and_prefix() -> None:
    maker = TextPromptMaker.from_tokenizer(_bos_metaspace_tokenizer())
    with pytest.raises(ValueError, match="more than 1 token"):
        maker.make(1, random.Random(0))
    prefix = maker.make(20, random.Random("prefix"))
    text = maker.make(50, random.Random(3), prefix)
    assert text.startswith(prefix + " ") and maker.count(text) == 50


def test_folder_without_tokenizer_json(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        TextPromptMaker.from_tokenizer_dir(tmp_path)
