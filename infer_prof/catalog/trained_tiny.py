"""The ``tiny-adder`` model: a tiny Llama trained to add one-digit numbers (checkable answers).

``tiny-llama`` (:mod:`infer_prof.catalog.tinymodel`) has random weights: it exercises the serving
path but knows nothing. ``tiny-adder`` has the same family of shapes (a Llama architecture, head
dimension 64 so vLLM's CPU attention serves it) and is *trained* at first use, on this machine, on
one synthetic task with checkable answers: ``a+b=c`` for ``0 <= a, b <= 9``. It is what the
quality check (``infer-prof quality``) is tested on: its accuracy at bf16 is far above a
random-weight copy's, and a copy with its weights rounded to very few bits falls below it.

Shape: hidden 128, 2 attention heads of dim 64, 1 KV head, 2 layers, intermediate 512; a
character-level tokenizer (the byte-level alphabet with no merges, so each digit is one token),
with ``tiny-llama``'s chat template. Training: AdamW (one-cycle learning rate, peak 3e-3),
seeded, :data:`STEPS` steps of :data:`BATCH` sequences of :data:`SUMS_PER_SEQUENCE` lines
``a+b=c`` (loss on every token), on one thread: 436 s on the 2-core development machine while
seven other jobs shared it (load average about 18); not timed on an idle machine. Cached under
``<cache>/models/tiny-adder`` with a marker naming
the version and seed. Two-digit sums were tried first: after 1,000 steps of 32 sequences the
model answered 5 % of unseen sums, too slow to train here.

The task file (all 100 sums, :func:`task_lines`) and the perplexity text (:func:`text_lines`) are
shipped in ``catalog/data/quality/``; a unit test holds them equal to these functions.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

from infer_prof.catalog.tinymodel import CHAT_TEMPLATE, _ensure, tiny_model_dir

TINY_ADDER = "tiny-adder"
ADDER_VERSION = 1
#: Training steps and batch size (lines of packed sums per step).
STEPS = 600
BATCH = 32
#: Sums packed into one training sequence, one a line.
SUMS_PER_SEQUENCE = 4
DATA_DIR = Path(__file__).parent / "data" / "quality"
#: The shipped task file and perplexity text for ``tiny-adder``.
ADDITION_TASKS = DATA_DIR / "addition.jsonl"
ADDITION_TEXT = DATA_DIR / "addition.txt"


def sum_line(a: int, b: int) -> str:
    """One line of the task: ``"a+b=c"`` (no newline)."""
    return f"{a}+{b}={a + b}"


def task_lines(seed: int = 1) -> list[str]:
    """The task file's JSONL lines: every sum of two digits, each ``{"prompt": "a+b=", "answer":
    "c", "match": "number"}``, in an order shuffled with ``seed`` (deterministic)."""
    chosen = [(a, b) for a in range(10) for b in range(10)]
    random.Random(seed).shuffle(chosen)
    return [
        json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b), "match": "number"})
        for a, b in chosen
    ]


def text_lines(n: int = 60, seed: int = 2) -> list[str]:
    """The perplexity text: ``n`` sums ``a+b=c`` of two digits drawn with ``seed``, one a line
    (the quality check scores each line as one prompt)."""
    rng = random.Random(seed)
    return [sum_line(rng.randrange(10), rng.randrange(10)) for _ in range(n)]


def tiny_adder_dir() -> Path:
    """Where the trained tiny-adder lives."""
    return tiny_model_dir(TINY_ADDER)


def ensure_tiny_adder(seed: int = 0) -> Path:
    """Train tiny-adder if it is not cached yet and return its folder (minutes, the first time).
    Safe when several processes ask at once (``tinymodel``'s lock: one trains, the rest wait)."""
    return _ensure(TINY_ADDER, ADDER_VERSION, lambda target: _train(target, seed))


def _tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>"]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # vocabulary = the specials + the byte alphabet: no merges, one token per character
    trainer = trainers.BpeTrainer(
        vocab_size=len(specials) + len(alphabet),
        special_tokens=specials,
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(["0123456789+=\n"], trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.model_max_length = 512
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _train(target: Path, seed: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    fast = _tokenizer()
    fast.save_pretrained(target)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = LlamaForCausalLM(config)
    train_pairs = [(a, b) for a in range(10) for b in range(10)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster (far faster on a busy machine)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=STEPS, pct_start=0.1)
    model.train()
    for _ in range(STEPS):
        rows = []
        for _ in range(BATCH):
            text = "".join(sum_line(*rng.choice(train_pairs)) + "\n"
                           for _ in range(SUMS_PER_SEQUENCE))
            rows.append(fast(text)["input_ids"] + [fast.eos_token_id])
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), fast.eos_token_id, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            labels[i, : len(r)] = torch.tensor(r)
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    torch.set_num_threads(threads)
    model = model.to(torch.bfloat16)  # type: ignore[arg-type]
    model.save_pretrained(target, safe_serialization=True)
    (target / "infer_prof_tiny.json").write_text(
        json.dumps({"version": ADDER_VERSION, "seed": seed, "steps": STEPS, "batch": BATCH,
                    "generator": "infer_prof.catalog.trained_tiny"})
    )


def write_rounded_copy(source: Path, target: Path, bits: int) -> Path:
    """A copy of the model in ``source`` with each linear layer's weights rounded to ``bits``
    bits (symmetric, one scale per output row: ``w' = s·round(w / s)``, ``s = max|w| / (2^(bits-1)
    - 1)``), stored back in bf16: a precision degraded on purpose, which vLLM serves like the
    original (the quality floor must mark it). Embeddings, norms and the output head are kept.
    Returns ``target``."""
    import torch
    from safetensors.torch import load_file, save_file

    if bits < 2:
        raise ValueError(f"bits must be at least 2 (symmetric rounding), got {bits}")
    target.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.is_file() and f.suffix != ".safetensors":
            shutil.copy(f, target / f.name)
    levels = 2 ** (bits - 1) - 1
    for f in source.glob("*.safetensors"):
        tensors = load_file(str(f))
        for name, w in tensors.items():
            if name.startswith("model.layers.") and name.endswith("proj.weight"):
                wf = w.float()
                scale = wf.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / levels
                tensors[name] = (torch.round(wf / scale) * scale).to(w.dtype)
        save_file(tensors, str(target / f.name), metadata={"format": "pt"})
    return target


def write_untrained_copy(source: Path, target: Path, seed: int = 0) -> Path:
    """A copy of the model in ``source`` (its config and tokenizer) with the weights it had
    before training: the same architecture initialised with ``seed`` and never trained, saved in
    bf16. What the trained model's accuracy is measured against. Returns ``target``."""
    import torch
    from transformers import AutoConfig, LlamaForCausalLM

    target.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and f.name != "infer_prof_tiny.json":
            shutil.copy(f, target / f.name)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(AutoConfig.from_pretrained(source))
    model.to(torch.bfloat16).save_pretrained(target, safe_serialization=True)  # type: ignore[arg-type]
    return target
