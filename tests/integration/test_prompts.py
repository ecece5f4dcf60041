"""The prompt token pool: read with the `tokenizers` library, the same pool transformers gives,
and loading it imports neither torch nor transformers.

Here, not in tests/unit: each case saves a tokenizer folder with transformers (importing
transformers imports torch: ~4 s on the 2-core VM) and reads it back with both libraries.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from infer_prof.loadgen.prompts import TokenPool

pytestmark = pytest.mark.integration

ORDINARY_ID = 60
CORPUS = "the quick brown fox jumps over the lazy dog\nprofile every token twice\n" * 8


def _tokenizer_folder(tmp: Path, *, pad_in_vocab: bool, added: list[str]) -> Path:
    """A real fast-tokenizer folder, saved the way transformers saves one."""
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS.splitlines(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")
    if added:
        fast.add_tokens(added)
    fast.save_pretrained(tmp)
    if pad_in_vocab:
        # A special token that is an ordinary vocabulary entry, named only in the config (as
        # Llama-style checkpoints often do): it must still be left out.
        cfg = json.loads((tmp / "tokenizer_config.json").read_text())
        cfg["pad_token"] = tok.id_to_token(ORDINARY_ID)
        (tmp / "tokenizer_config.json").write_text(json.dumps(cfg))
    return tmp


@pytest.mark.parametrize("pad_in_vocab,added", [(False, []), (True, ["<tool>", "xyzzy"])])
def test_pool_matches_transformers(tmp_path: Path, pad_in_vocab: bool, added: list[str]) -> None:
    folder = _tokenizer_folder(tmp_path, pad_in_vocab=pad_in_vocab, added=added)
    fast = TokenPool.from_tokenizer_dir(str(folder))
    slow = TokenPool._from_transformers(str(folder))
    assert list(fast.ids) == list(slow.ids)
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    for special in ("<unk>", "<s>", "</s>", *added):
        assert tok.token_to_id(special) not in fast.ids
    assert (ORDINARY_ID in fast.ids) is not pad_in_vocab


def test_loading_a_pool_imports_neither_torch_nor_transformers(tmp_path: Path) -> None:
    folder = _tokenizer_folder(tmp_path, pad_in_vocab=False, added=[])
    code = (
        "import sys\n"
        "from infer_prof.loadgen.prompts import TokenPool\n"
        f"pool = TokenPool.from_tokenizer_dir({str(folder)!r})\n"
        "assert len(pool.ids) > 50\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
