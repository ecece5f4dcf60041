"""Text prompts of exact token length: the count the server makes (special tokens included).

The sweep of 1,000 prompts per tokenizer is tests/integration/test_text_prompts.py's."""

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

from infer_prof.loadgen.text_prompts import TextPromptMaker

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
