"""The ``tiny-llama`` model: a real Llama architecture with random weights and a real tokenizer.

Generated locally on first use (no hub access needed) and cached under
``<cache>/models/tiny-llama``. It is small enough for vLLM on a 2-core CPU to serve at a few
thousand tokens/s, and real enough that the whole path (tokenizer, engine, streaming) is exercised.
Shape: hidden 256, 4 attention heads of dim 64 (CPU attention needs head_dim >= 64), 2 KV heads,
2 layers, intermediate 688, byte-level BPE vocabulary of 512 trained on a few lines of text.
It has a chat template (:data:`CHAT_TEMPLATE`, Zephyr-like role markers), so the chat API
(``--api chat``) runs on it end to end.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import tempfile
from pathlib import Path

from infer_prof.catalog.cache import cache_dir

TINY_LLAMA = "tiny-llama"

TINY_VERSION = 2  # 2: a chat template in tokenizer_config.json
VOCAB_SIZE = 512
#: The tiny model's chat template: a BOS, then ``<|role|>content`` per message, one a line, and
#: ``<|assistant|>`` where a reply is asked for.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_CORPUS = """\
The quick brown fox jumps over the lazy dog while the profiler measures every token.
Large language models generate text one token at a time, reading all of their weights each step.
Throughput is tokens per second; latency is how long a person waits for the first word.
A GPU rented by the hour turns tokens per second into dollars per million tokens.
Prefill reads the prompt in one pass; decode produces the answer token by token.
The key-value cache holds the attention state of every sequence the server is running.
Batching many requests together keeps the memory bandwidth busy and the cost per token low.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14 2.718 42.
Punctuation and symbols: , . ; : ! ? ( ) [ ] { } < > = + - * / % & | ^ ~ " ' ` @ # $
"""


def tiny_llama_dir() -> Path:
    """Where the generated tiny-llama lives."""
    return cache_dir() / "models" / TINY_LLAMA


def _is_complete(folder: Path) -> bool:
    marker = folder / "infer_prof_tiny.json"
    if not marker.exists():
        return False
    try:
        return int(json.loads(marker.read_text()).get("version", 0)) == TINY_VERSION
    except (ValueError, OSError):
        return False


def ensure_tiny_llama(seed: int = 0) -> Path:
    """Generate the tiny model if it is not cached yet and return its folder.

    Safe when several processes ask at once: one generates under a file lock, the rest wait.
    """
    folder = tiny_llama_dir()
    if _is_complete(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{TINY_LLAMA}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _is_complete(folder):
            return folder
        tmp = Path(tempfile.mkdtemp(prefix=f".{TINY_LLAMA}-", dir=folder.parent))
        try:
            _generate(tmp, seed)
            if folder.exists():
                shutil.rmtree(folder)
            tmp.rename(folder)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _generate(target: Path, seed: int) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS.splitlines() * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.model_max_length = 2048
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(target)

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model = model.to(torch.bfloat16)  # type: ignore[arg-type]
    model.save_pretrained(target, safe_serialization=True)
    (target / "infer_prof_tiny.json").write_text(
        json.dumps({"version": TINY_VERSION, "seed": seed, "generator": "infer_prof.tinymodel"})
    )
