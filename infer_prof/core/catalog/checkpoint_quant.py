"""A pre-quantized checkpoint's ``quantization_config``, and the bytes each linear weight takes
in it. Pure: no I/O.

The formats (bytes of one ``rows x cols`` weight, ``rows`` = output features, with its scales,
as the checkpoints store them and vLLM loads them; ``g`` = group size):

- ``fp8`` (quant_method ``fp8``; ``compressed-tensors`` float 8-bit): ``rows x cols`` plus fp32
  scales: one per tensor, one per row (channel), or ``ceil(rows/bn) x ceil(cols/bk)`` for
  ``weight_block_size [bn, bk]`` (DeepSeek-V3, Qwen3-FP8); a static ``activation_scheme`` adds
  one fp32 input scale per tensor.
- ``awq`` (4-bit, zero point): ``qweight`` int32 ``cols x rows/8`` (half a byte a weight),
  ``qzeros`` int32 ``cols/g x rows/8``, ``scales`` fp16 ``cols/g x rows``.
- ``gptq``: ``qweight`` int32 ``cols x bits/32 x rows``, ``qzeros`` ``cols/g x rows x bits/32``
  int32, ``scales`` fp16 ``cols/g x rows``, ``g_idx`` int32 ``cols``.
- ``compressed-tensors`` int ``pack-quantized``: ``weight_packed`` int32 (``bits/8`` bytes a
  weight), ``weight_scale`` 16-bit per group/row, ``weight_zero_point`` when asymmetric,
  ``weight_shape`` (2 x int64); ``nvfp4-pack-quantized``: as NVFP4 below.
- ``mxfp4`` (gpt-oss): experts only; ``*_blocks`` uint8 (two 4-bit values a byte) and
  ``*_scales`` uint8 (an E8M0 exponent per 32 weights): ``rows x cols x (1/2 + 1/32)``.
- ``modelopt`` NVFP4: ``weight`` uint8 (half a byte a weight), ``weight_scale`` fp8 per 16
  weights, ``weight_scale_2`` and ``input_scale`` fp32 per tensor; modelopt FP8 as per-tensor
  fp8 with a static input scale.
- ``bitsandbytes`` (pre-quantized): 4-bit ``weight`` uint8 half a byte a weight plus an fp32
  absmax per 64 weights (vLLM dequantizes the double-quantized statistics back to fp32 when it
  loads them, so that is what stays in memory); 8-bit ``rows x cols`` plus an fp32 scale per row.

Which modules stay 16-bit: those named by ``modules_to_not_convert`` / ``ignored_layers`` /
``ignore`` / ``exclude_modules`` (exact names, ``*`` wildcards, ``re:`` regexes, or module
prefixes); always the embeddings, the norms and the MoE routers (vLLM builds those
unquantized); the LM head unless a compressed-tensors group targets it.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any

KNOWN_METHODS = ("fp8", "compressed-tensors", "awq", "gptq", "mxfp4", "modelopt",
                 "bitsandbytes")
"""``quant_method`` values this module reads (vLLM names ``modelopt`` checkpoints
``modelopt``/``modelopt_fp4``; ``awq_marlin``, ``gptq_marlin`` are kernels for the same
checkpoints)."""


class QuantConfigError(ValueError):
    """A ``quantization_config`` the planner cannot size; the message names the method or
    field."""


@dataclass(frozen=True)
class CheckpointQuant:
    """How a checkpoint's linear weights are stored.

    ``method`` is the ``quant_method``; ``precision`` the planner's name for it (``fp8``,
    ``awq``, ``gptq``, ``int4``, ``int8``, ``mxfp4``, ``nvfp4``, ``bnb-nf4``, ``bnb-int8``);
    ``bits`` per weight; ``group_size`` (0: none); ``block`` the fp8 block shape (``(0, 0)``:
    none); ``scale`` one of ``tensor``, ``channel``, ``group``, ``block``; ``zero_point``
    whether zeros are stored; ``static_input`` whether a per-tensor input scale is stored;
    ``experts_only`` (mxfp4: only the MoE experts are quantized); ``skip`` the module patterns
    kept 16-bit; ``lm_head`` whether the LM head is quantized too."""

    method: str
    precision: str
    bits: int
    group_size: int = 0
    block: tuple[int, int] = (0, 0)
    scale: str = "tensor"
    zero_point: bool = False
    static_input: bool = False
    experts_only: bool = False
    skip: tuple[str, ...] = ()
    lm_head: bool = False

    def describe(self) -> str:
        """One phrase, e.g. ``fp8, block 128x128 scales`` or ``awq 4-bit, group 128``."""
        name = self.method if self.method == self.precision else (
            f"{self.method} {self.precision}")
        if self.block != (0, 0):
            return f"{name}, block {self.block[0]}x{self.block[1]} scales"
        if self.group_size:
            return f"{name} {self.bits}-bit, group {self.group_size}"
        return f"{name} ({self.scale} scales)"

    def skips(self, module: str) -> bool:
        """Whether ``module`` (a dotted name such as ``model.layers.0.self_attn.q_proj``) is
        kept unquantized by the checkpoint's lists."""
        for pat in self.skip:
            if pat.startswith("re:"):
                if re.match(pat[3:], module):
                    return True
            elif fnmatch.fnmatchcase(module, pat) or fnmatch.fnmatchcase(module, pat + ".*"):
                return True
            elif "*" not in pat and "." not in pat and pat in module.split("."):
                return True  # a bare name such as "gate" or "lm_head"
        return False

    def linear_bytes(self, rows: int, cols: int) -> int:
        """Bytes one ``rows x cols`` weight takes in this format, scales included (see the
        module docstring for each format)."""
        n = rows * cols
        p = self.precision
        if p == "fp8" or p == "int8":
            if self.block != (0, 0):
                bn, bk = self.block
                scales = 4 * _ceil(rows, bn) * _ceil(cols, bk)
            elif self.scale == "channel":
                scales = 4 * rows
            else:
                scales = 4
            return n + scales + (4 if self.static_input else 0)
        if p == "mxfp4":
            return n // 2 + _ceil(n, 32)
        if p == "nvfp4":
            return n // 2 + _ceil(n, 16) + 8
        if p == "bnb-nf4":
            return n // 2 + 4 * _ceil(n, 64)
        if p == "bnb-int8":
            return n + 4 * rows
        g = self.group_size or cols
        groups = _ceil(cols, g)
        packed = _ceil(n * self.bits, 8)
        if p == "awq":
            return packed + 2 * groups * rows + _ceil(groups * rows * self.bits, 8)
        if p == "gptq":
            return packed + 2 * groups * rows + _ceil(groups * rows * self.bits, 8) + 4 * cols
        # compressed-tensors pack-quantized int (int4 / int8 weight-only)
        zeros = _ceil(groups * rows * self.bits, 8) if self.zero_point else 0
        return packed + 2 * groups * rows + zeros + 16


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _skip_list(q: dict[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    for key in ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules",
                "llm_int8_skip_modules"):
        val = q.get(key)
        if isinstance(val, list):
            out += [str(v) for v in val]
    return tuple(out)


def _compressed_tensors(q: dict[str, Any], skip: tuple[str, ...]) -> CheckpointQuant:
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise QuantConfigError("compressed-tensors quantization_config lacks 'config_groups'")
    group = next(iter(groups.values()))
    w = group.get("weights") if isinstance(group, dict) else None
    if not isinstance(w, dict) or w.get("num_bits") is None:
        raise QuantConfigError("compressed-tensors config_groups lack 'weights.num_bits'")
    bits = int(w["num_bits"])
    kind = str(w.get("type") or "int")
    strategy = str(w.get("strategy") or "tensor")
    gsize = int(w.get("group_size") or 0)
    acts = group.get("input_activations") or {}
    static = isinstance(acts, dict) and acts.get("dynamic") is False
    fmt = str(q.get("format") or "")
    targets = [str(t) for t in group.get("targets") or []]
    lm_head = any("lm_head" in t for t in targets)
    if kind == "float" and bits == 4 or "nvfp4" in fmt:
        return CheckpointQuant("compressed-tensors", "nvfp4", 4, group_size=gsize or 16,
                               scale="group", skip=skip, lm_head=lm_head)
    if kind == "float" and bits == 8:
        block = tuple(int(b) for b in (w.get("block_structure") or (0, 0)))
        return CheckpointQuant(
            "compressed-tensors", "fp8", 8, block=(block[0], block[1]),
            scale="block" if strategy == "block" else strategy, static_input=static,
            skip=skip, lm_head=lm_head)
    if kind == "int" and bits == 8 and "pack" not in fmt:
        return CheckpointQuant("compressed-tensors", "int8", 8, scale=strategy,
                               static_input=static, skip=skip, lm_head=lm_head)
    if kind == "int" and bits in (4, 8):
        return CheckpointQuant("compressed-tensors", f"int{bits}", bits, group_size=gsize,
                               scale=strategy, zero_point=not w.get("symmetric", True),
                               skip=skip, lm_head=lm_head)
    raise QuantConfigError(
        f"compressed-tensors weights of type {kind!r} with {bits} bits are not known to the "
        "planner")


def read_quantization(config: dict[str, Any]) -> CheckpointQuant | None:
    """The checkpoint's ``quantization_config`` (None when the config has none): raises
    :class:`QuantConfigError` naming an unknown ``quant_method`` or a missing field."""
    q = config.get("quantization_config")
    if q is None:
        return None
    if not isinstance(q, dict):
        raise QuantConfigError("quantization_config is not an object")
    method = str(q.get("quant_method") or "").lower().replace("_", "-")
    skip = _skip_list(q)
    if not method:
        if q.get("load_in_4bit") or q.get("load_in_8bit"):
            method = "bitsandbytes"
        else:
            raise QuantConfigError("quantization_config lacks the field 'quant_method'")
    if method == "fp8":
        block = q.get("weight_block_size")
        bn, bk = (int(block[0]), int(block[1])) if block else (0, 0)
        return CheckpointQuant("fp8", "fp8", 8, block=(bn, bk),
                               scale="block" if block else "tensor",
                               static_input=q.get("activation_scheme") == "static", skip=skip)
    if method == "compressed-tensors":
        return _compressed_tensors(q, skip)
    if method in ("awq", "gptq"):
        if q.get("bits") is None and q.get("w_bit") is None:
            raise QuantConfigError(f"{method} quantization_config lacks the field 'bits'")
        bits = int(q.get("bits") or q.get("w_bit") or 4)
        gsize = int(q.get("group_size") or q.get("q_group_size") or 0)
        if gsize < 0:
            gsize = 0  # GPTQ's -1: one group per row
        return CheckpointQuant(method, method, bits, group_size=gsize, scale="group",
                               zero_point=True, skip=skip)
    if method == "mxfp4":
        return CheckpointQuant("mxfp4", "mxfp4", 4, group_size=32, scale="group",
                               experts_only=True, skip=skip)
    if method in ("modelopt", "modelopt-fp4"):
        algo = str(q.get("quant_algo") or (q.get("quantization") or {}).get("quant_algo") or "")
        if algo.upper() == "NVFP4":
            return CheckpointQuant("modelopt", "nvfp4", 4, group_size=int(q.get("group_size")
                                   or 16), scale="group", skip=skip)
        if algo.upper() == "FP8":
            return CheckpointQuant("modelopt", "fp8", 8, static_input=True, skip=skip)
        raise QuantConfigError(f"modelopt quant_algo {algo or '(none)'!r} is not known to the "
                               "planner (NVFP4 and FP8 are)")
    if method == "bitsandbytes":
        if q.get("load_in_8bit"):
            return CheckpointQuant("bitsandbytes", "bnb-int8", 8, scale="channel", skip=skip)
        return CheckpointQuant("bitsandbytes", "bnb-nf4", 4, group_size=64, scale="group",
                               skip=skip)
    raise QuantConfigError(
        f"unknown quantization method {q.get('quant_method')!r} in quantization_config; the "
        f"planner knows {', '.join(KNOWN_METHODS)}")
