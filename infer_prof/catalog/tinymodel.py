"""Tiny models generated locally: ``tiny-llama`` and one tiny model of each newer architecture.

``tiny-llama`` is a real Llama architecture with random weights and a real tokenizer.

Generated locally on first use (no hub access needed) and cached under
``<cache>/models/tiny-llama``. It is small enough for vLLM on a 2-core CPU to serve at a few
thousand tokens/s, and real enough that the whole path (tokenizer, engine, streaming) is exercised.
Shape: hidden 256, 4 attention heads of dim 64 (CPU attention needs head_dim >= 64), 2 KV heads,
2 layers, intermediate 688, byte-level BPE vocabulary of 512 trained on a few lines of text.
It has a chat template (:data:`CHAT_TEMPLATE`, Zephyr-like role markers), so the chat API
(``--api chat``) runs on it end to end.

The other tiny models (:data:`TINY_ARCHS`: ``tiny-mixtral``, ``tiny-qwen3-moe``, ...) are a
config.json of each architecture at tiny widths, with a copy of tiny-llama's tokenizer files
beside it and no weight files: the engine loads them with random weights (vLLM
``--load-format dummy``), which is what speed and memory depend on. Each is generated on first
use under ``<cache>/models/<name>``; the config is written by the installed ``transformers``'s
own config class of the architecture, so it carries the fields the engine reads, each under the
name the official checkpoints' config.json spell it.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    return tiny_model_dir(TINY_LLAMA)


def tiny_model_dir(name: str) -> Path:
    """Where the generated tiny model ``name`` lives (``<cache>/models/<name>``)."""
    return cache_dir() / "models" / name


def _is_complete(folder: Path, version: int) -> bool:
    marker = folder / "infer_prof_tiny.json"
    if not marker.exists():
        return False
    try:
        return int(json.loads(marker.read_text()).get("version", 0)) == version
    except (ValueError, OSError):
        return False


def _ensure(name: str, version: int, generate: Callable[[Path], None]) -> Path:
    """Generate ``name`` with ``generate(folder)`` unless a complete copy of ``version`` is
    cached; return its folder. Safe when several processes ask at once: one generates under a
    file lock, the rest wait."""
    folder = tiny_model_dir(name)
    if _is_complete(folder, version):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _is_complete(folder, version):
            return folder
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=folder.parent))
        try:
            generate(tmp)
            if folder.exists():
                shutil.rmtree(folder)
            tmp.rename(folder)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return folder


def ensure_tiny_llama(seed: int = 0) -> Path:
    """Generate the tiny model if it is not cached yet and return its folder.

    Safe when several processes ask at once: one generates under a file lock, the rest wait.
    """
    return _ensure(TINY_LLAMA, TINY_VERSION, lambda tmp: _generate(tmp, seed))


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


# --- tiny models of the newer architectures: config.json + tiny-llama's tokenizer -------------

TINY_ARCH_VERSION = 3  # 2: fields under the official checkpoints' names; 3: gpt-oss YaRN
#: The widths every tiny architecture shares with tiny-llama (the CPU attention kernel wants
#: head_dim >= 64; the vocabulary is tiny-llama's tokenizer's).
_COMMON: dict[str, Any] = {
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": 2048,
    "bos_token_id": 1,  # tiny-llama's <s>
    "eos_token_id": 2,  # tiny-llama's </s>
    "pad_token_id": None,
    "tie_word_embeddings": False,
}


@dataclass(frozen=True)
class TinyArch:
    """One tiny model of an architecture: its ``--model`` alias, the ``architectures`` entry
    the engine builds, the ``transformers`` config class that writes its config.json, the
    fields set on it (beside :data:`_COMMON`), and what it exercises, in words."""

    name: str
    architecture: str
    config_class: str
    fields: dict[str, Any]
    about: str


TINY_ARCHS: dict[str, TinyArch] = {
    a.name: a
    for a in (
        TinyArch(
            "tiny-mixtral", "MixtralForCausalLM", "MixtralConfig",
            {"intermediate_size": 512, "num_local_experts": 8, "num_experts_per_tok": 2,
             "sliding_window": None},
            "mixture of experts (Mixtral: 8 experts, top-2, every layer)",
        ),
        TinyArch(
            "tiny-qwen3-moe", "Qwen3MoeForCausalLM", "Qwen3MoeConfig",
            {"intermediate_size": 688, "moe_intermediate_size": 128, "num_experts": 16,
             "num_experts_per_tok": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
             "norm_topk_prob": True, "use_sliding_window": False},
            "mixture of experts (Qwen3-MoE: 16 experts of width 128, top-4, QK norm)",
        ),
        TinyArch(
            "tiny-mistral-sw", "MistralForCausalLM", "MistralConfig",
            {"intermediate_size": 688, "sliding_window": 256, "max_position_embeddings": 8192},
            "sliding-window attention on every layer (Mistral-7B-v0.1's shape: window 256 in a "
            "context of 8192)",
        ),
        TinyArch(
            "tiny-gemma3", "Gemma3ForCausalLM", "Gemma3TextConfig",
            {"intermediate_size": 688, "sliding_window": 256, "query_pre_attn_scalar": 64,
             "layer_types": ["sliding_attention", "full_attention"],
             "tie_word_embeddings": True, "max_position_embeddings": 8192},
            "hybrid sliding-window and full attention layers (Gemma-3: window 256 in a context "
            "of 8192)",
        ),
        TinyArch(
            "tiny-gpt-oss", "GptOssForCausalLM", "GptOssConfig",
            {"intermediate_size": 256, "num_local_experts": 8, "num_experts_per_tok": 2,
             "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"],
             "max_position_embeddings": 8192},
            "attention sinks, alternating sliding (128) and full layers, experts (gpt-oss, "
            "bf16; YaRN rope as gpt-oss's own, which vLLM's model requires)",
        ),
        TinyArch(
            "tiny-deepseek-v2", "DeepseekV2ForCausalLM", "DeepseekV2Config",
            {"num_key_value_heads": 4, "intermediate_size": 688, "moe_intermediate_size": 128,
             "kv_lora_rank": 512, "q_lora_rank": None, "qk_rope_head_dim": 64,
             "qk_nope_head_dim": 64, "v_head_dim": 64, "n_routed_experts": 8,
             "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1,
             "topk_method": "greedy", "n_group": 1, "topk_group": 1},
            "multi-head latent attention (MLA: one latent cache of kv_lora_rank 512 + "
            "qk_rope_head_dim 64 per layer, DeepSeek's widths) and experts with a shared one "
            "after a dense first layer",
        ),
        TinyArch(
            "tiny-qwen3-next", "Qwen3NextForCausalLM", "Qwen3NextConfig",
            {"num_hidden_layers": 4, "full_attention_interval": 4, "intermediate_size": 688,
             "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 128,
             "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
             "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128,
             "num_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 1,
             "mlp_only_layers": [], "norm_topk_prob": True, "partial_rotary_factor": 0.25,
             "max_position_embeddings": 8192},
            "hybrid Gated DeltaNet and full attention (Qwen3-Next: three linear-attention layers "
            "to one gated full-attention layer, each linear layer a fixed state per sequence; "
            "GDN head dims 128, which vLLM-CPU's GDN kernels need) and experts with a shared one",
        ),
        TinyArch(
            "tiny-granite-h", "GraniteMoeHybridForCausalLM", "GraniteMoeHybridConfig",
            {"layer_types": ["mamba", "attention"], "intermediate_size": 688,
             "shared_intermediate_size": 688, "num_local_experts": 0, "num_experts_per_tok": 0,
             "mamba_n_heads": 8, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1,
             "mamba_d_conv": 4, "mamba_expand": 2, "position_embedding_type": "nope",
             "max_position_embeddings": 8192},
            "hybrid Mamba2 and attention (IBM Granite-4.0-H-Micro's dense shape: a Mamba2 "
            "layer of 8 heads x 64 with a state of 128 beside an attention layer without "
            "positional encoding; vLLM-CPU runs its SSM with a C++ kernel)",
        ),
    )
}


def tiny_arch_config(arch: TinyArch) -> dict[str, Any]:
    """The config.json of ``arch``'s tiny model, as the installed ``transformers`` writes it."""
    import transformers

    cls = getattr(transformers, arch.config_class)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # gpt-oss's YaRN factor is gpt-oss's own
    try:
        config = cls(**{**_COMMON, **arch.fields})
    finally:
        transformers.logging.set_verbosity(verbosity)
    config.architectures = [arch.architecture]
    config.dtype = "bfloat16"
    out: dict[str, Any] = config.to_dict()
    # keep each field under the name given (the official checkpoints' spelling, e.g. Qwen3-MoE's
    # num_experts), not the one transformers renamed it to (num_local_experts)
    for given, canonical in getattr(cls, "attribute_map", {}).items():
        if given in {**_COMMON, **arch.fields} and given not in out and canonical in out:
            out[given] = out.pop(canonical)
    return out


def _generate_arch(target: Path, arch: TinyArch) -> None:
    tokenizer_from = ensure_tiny_llama()
    skip = {"config.json", "generation_config.json", "infer_prof_tiny.json"}
    for f in tokenizer_from.iterdir():
        if f.is_file() and f.name not in skip and not f.name.endswith(".safetensors"):
            shutil.copy2(f, target / f.name)
    (target / "config.json").write_text(json.dumps(tiny_arch_config(arch), indent=2) + "\n")
    (target / "infer_prof_tiny.json").write_text(json.dumps({
        "version": TINY_ARCH_VERSION, "generator": "infer_prof.tinymodel",
        "architecture": arch.architecture, "weights": "none: load with --load-format dummy",
    }))


def ensure_tiny_model(name: str) -> Path:
    """Generate the tiny model ``name`` (``tiny-llama`` or one of :data:`TINY_ARCHS`) if it is
    not cached yet and return its folder (same locking as :func:`ensure_tiny_llama`)."""
    if name == TINY_LLAMA:
        return ensure_tiny_llama()
    arch = TINY_ARCHS[name]
    return _ensure(name, TINY_ARCH_VERSION, lambda tmp: _generate_arch(tmp, arch))
