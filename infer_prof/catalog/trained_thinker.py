"""The ``tiny-thinker`` model: a tiny Llama trained to answer as a reasoning model does,
``<think>THOUGHT</think>ANSWER``, with ``<think>`` and ``</think>`` as tokens of its own.

It is what the reasoning measurements are tested on for real: vLLM serves it with
``--reasoning-parser deepseek_r1`` (the parser refuses a tokenizer without the two marker tokens),
streams the thought as ``delta.reasoning`` and the answer as ``delta.content``, and the counts
infer-prof measures must be the ones it was trained to emit (:data:`THOUGHT`, :data:`ANSWER`).

Shape: hidden 128, 2 attention heads of dim 64 (so vLLM's CPU attention serves it), 1 KV head,
1 layer, intermediate 256; tiny-adder's character-level tokenizer (one token per character) plus the
two markers as added tokens (not special: their text stays in the stream, as DeepSeek-R1's do)
and tiny-llama's chat template. Training: every chat prompt of random letter words, 1 to
:data:`MAX_PROMPT_CHARS` characters, is answered with the same reply (loss on the reply only):
AdamW (one-cycle, peak 1e-2), seeded, :data:`STEPS` steps of :data:`BATCH` sequences on one
thread: 1.5 s of CPU for 60 steps (loss 0.006) on the 2-core development machine, 18 s of wall
time there while other jobs held the cores (load average 12); the CPU seconds of each training
are in the marker file. Cached under ``<cache>/models/tiny-thinker`` with a marker naming the
version and seed, like tiny-adder.
"""

from __future__ import annotations

import json
import random
import string
import time
from pathlib import Path
from typing import Any

from infer_prof.catalog.tinymodel import _ensure, tiny_model_dir

TINY_THINKER = "tiny-thinker"
THINKER_VERSION = 1
THINK_START, THINK_END = "<think>", "</think>"
#: What the model thinks, then answers, after any prompt (one token per character).
THOUGHT = "let me think"
ANSWER = "done."
#: Training steps, sequences per step, and the longest training prompt (characters).
STEPS = 80
BATCH = 8
MAX_PROMPT_CHARS = 32


def reply() -> str:
    """The trained reply: ``<think>THOUGHT</think>ANSWER`` (the EOS token follows it)."""
    return f"{THINK_START}{THOUGHT}{THINK_END}{ANSWER}"


def reply_tokens() -> tuple[int, int]:
    """(thought tokens, answer tokens) of :func:`reply`, markers and EOS left out: one token a
    character."""
    return len(THOUGHT), len(ANSWER)


def tiny_thinker_dir() -> Path:
    """Where the trained tiny-thinker lives."""
    return tiny_model_dir(TINY_THINKER)


def ensure_tiny_thinker(seed: int = 0) -> Path:
    """Train tiny-thinker if it is not cached yet and return its folder (seconds, the first
    time). Safe when several processes ask at once (one trains, the rest wait)."""
    return _ensure(TINY_THINKER, THINKER_VERSION, lambda target: _train(target, seed))


def _tokenizer() -> Any:
    from tokenizers import AddedToken

    from infer_prof.catalog.trained_tiny import _tokenizer as adder_tokenizer

    fast = adder_tokenizer()
    fast.add_tokens([AddedToken(THINK_START, special=False, normalized=False),
                     AddedToken(THINK_END, special=False, normalized=False)])
    return fast


def _prompt(rng: random.Random) -> str:
    """Random letter words, as infer-prof's text prompts are (``loadgen.text_prompts``)."""
    n = rng.randint(1, MAX_PROMPT_CHARS)
    return "".join(rng.choice(string.ascii_letters + " ") for _ in range(n)).strip() or "a"


def _train(target: Path, seed: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    fast = _tokenizer()
    fast.save_pretrained(target)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=128, intermediate_size=256, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = LlamaForCausalLM(config)
    answer = fast(reply(), add_special_tokens=False)["input_ids"] + [fast.eos_token_id]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster (far faster on a busy machine)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=STEPS, pct_start=0.1)
    cpu0 = time.process_time()
    model.train()
    for _ in range(STEPS):
        rows = []
        for _ in range(BATCH):
            text = fast.apply_chat_template([{"role": "user", "content": _prompt(rng)}],
                                            tokenize=False, add_generation_prompt=True)
            rows.append((fast(text, add_special_tokens=False)["input_ids"], answer))
        width = max(len(p) + len(a) for p, a in rows)
        ids = torch.full((len(rows), width), fast.eos_token_id, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        for i, (p, a) in enumerate(rows):
            ids[i, : len(p) + len(a)] = torch.tensor(p + a)
            labels[i, len(p): len(p) + len(a)] = torch.tensor(a)  # the reply only
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    train_cpu_s = time.process_time() - cpu0
    torch.set_num_threads(threads)
    model = model.to(torch.bfloat16)  # type: ignore[arg-type]
    model.save_pretrained(target, safe_serialization=True)
    (target / "infer_prof_tiny.json").write_text(
        json.dumps({"version": THINKER_VERSION, "seed": seed, "steps": STEPS, "batch": BATCH,
                    "final_loss": round(float(loss.detach()), 5),
                    "train_cpu_s": round(train_cpu_s, 2),
                    "generator": "infer_prof.catalog.trained_thinker"})
    )
