"""quantization_config formats: the bytes of one 4096 x 4096 linear weight in each, worked out
here from the tensors each format stores, and which modules stay 16-bit."""

from __future__ import annotations

import pytest

from infer_prof.core.catalog.checkpoint_quant import QuantConfigError, read_quantization

N = 4096 * 4096  # 16,777,216 weights
GROUPS_128 = 4096 // 128  # 32 groups per input row


def _q(qc: dict):
    q = read_quantization({"quantization_config": qc})
    assert q is not None
    return q


def test_bytes_of_one_linear_in_each_format():
    # fp8 block 128x128: 1 B a weight + fp32 scale_inv per 128x128 block
    fp8 = _q({"quant_method": "fp8", "activation_scheme": "dynamic",
              "weight_block_size": [128, 128]})
    assert (fp8.precision, fp8.linear_bytes(4096, 4096)) == ("fp8", N + 4 * 32 * 32)
    # fp8 per tensor, static activations: weight_scale and input_scale, fp32 each
    assert _q({"quant_method": "fp8", "activation_scheme": "static"}).linear_bytes(
        4096, 4096) == N + 8
    # AWQ 4-bit g128: qweight int32 (0.5 B a weight), fp16 scales, 4-bit zeros per group
    awq = _q({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True})
    assert awq.linear_bytes(4096, 4096) == N // 2 + 2 * GROUPS_128 * 4096 + GROUPS_128 * 4096 // 2
    # GPTQ adds g_idx, int32 per input feature
    gptq = _q({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True})
    assert gptq.linear_bytes(4096, 4096) == awq.linear_bytes(4096, 4096) + 4 * 4096
    # MXFP4: uint8 blocks (two values a byte) + uint8 E8M0 scale per 32
    mx = _q({"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]})
    assert (mx.experts_only, mx.linear_bytes(4096, 4096)) == (True, N // 2 + N // 32)
    # NVFP4 (ModelOpt): packed uint8 + fp8 scale per 16 + two fp32 scalars
    nv = _q({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16})
    assert (nv.precision, nv.linear_bytes(4096, 4096)) == ("nvfp4", N // 2 + N // 16 + 8)
    # compressed-tensors W4A16 pack-quantized, symmetric g128: int32 packed + bf16 scales +
    # weight_shape (2 x int64)
    ct = _q({"quant_method": "compressed-tensors", "format": "pack-quantized",
             "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                 "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
                 "symmetric": True}}}, "ignore": ["lm_head"]})
    assert (ct.precision, ct.linear_bytes(4096, 4096)) == (
        "int4", N // 2 + 2 * GROUPS_128 * 4096 + 16)
    # compressed-tensors FP8 per channel
    ch = _q({"quant_method": "compressed-tensors", "format": "float-quantized",
             "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float",
                                                 "strategy": "channel"}}}})
    assert (ch.precision, ch.linear_bytes(4096, 4096)) == ("fp8", N + 4 * 4096)
    # pre-quantized bitsandbytes 4-bit: fp32 absmax per 64 as vLLM holds it
    bnb = _q({"quant_method": "bitsandbytes", "load_in_4bit": True,
              "bnb_4bit_quant_type": "nf4"})
    assert (bnb.precision, bnb.linear_bytes(4096, 4096)) == ("bnb-nf4", N // 2 + 4 * N // 64)


def test_modules_kept_16_bit():
    gpt_oss = _q({"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
        "lm_head"]})
    assert gpt_oss.skips("model.layers.3.self_attn.q_proj")
    assert not gpt_oss.skips("model.layers.3.mlp.experts.gate_proj")
    ct = _q({"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*mlp.gate$"],
             "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}}})
    assert ct.skips("lm_head") and ct.skips("model.layers.0.mlp.gate")
    assert not ct.skips("model.layers.0.mlp.gate_proj")


def test_unknown_method_and_missing_fields_are_named():
    assert read_quantization({}) is None
    with pytest.raises(QuantConfigError, match="'hqq'"):
        read_quantization({"quantization_config": {"quant_method": "hqq"}})
    with pytest.raises(QuantConfigError, match="'quant_method'"):
        read_quantization({"quantization_config": {"bits": 4}})
    with pytest.raises(QuantConfigError, match="'bits'"):
        read_quantization({"quantization_config": {"quant_method": "gptq"}})
    with pytest.raises(QuantConfigError, match="config_groups"):
        read_quantization({"quantization_config": {"quant_method": "compressed-tensors"}})
