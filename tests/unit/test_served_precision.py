"""A quantization vLLM did not apply is not recorded as applied: the dtype and quantized layers
read in real vLLM-CPU logs (servers.vllm_log.weights_loaded), the precision recorded
(run.point_document.served_precision), and what compare and the history read
(results.identity.precision_of)."""

from pathlib import Path

import msgspec

from infer_prof.results.document import Result
from infer_prof.results.identity import precision_of
from infer_prof.run.point_document import served_precision
from infer_prof.servers.vllm_log import LoadedWeights, weights_loaded
from tests.unit.test_report_html import make_result

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "vllm_logs"


def test_the_int8_log_says_no_layer_was_quantized():
    int8 = weights_loaded((LOGS / "cpu-0.32-tiny-adder-int8-per-channel.log").read_text())
    assert int8 == LoadedWeights(dtype="bf16", quantized_layers=0)
    bnb = weights_loaded((LOGS / "cpu-0.32-tiny-adder-bitsandbytes.log").read_text())
    assert bnb == LoadedWeights(dtype="bf16", quantized_layers=None)  # not an online one
    assert weights_loaded("") == LoadedWeights(None, None)
    assert weights_loaded("(Worker pid=1) INFO 11-27 14:46:35 [base_loader.py:151] Quantizing "
                          "28 layers of types: Linear").quantized_layers == 28


def test_the_precision_recorded_is_what_was_served():
    assert served_precision("int8_per_channel_weight_only", 0, "bf16") == "bf16"
    assert served_precision("int8_per_channel_weight_only", 0, None) == "unquantized"
    assert served_precision("int8_per_channel_weight_only", 28, "bf16") == \
        "int8_per_channel_weight_only"
    assert served_precision("bitsandbytes", None, "bf16") == "bitsandbytes"
    assert served_precision(None, None, "bf16") is None


def test_compare_and_history_read_the_served_precision_before_the_plans():
    doc = make_result("r", 1)
    doc["config"]["quantization"] = "int8_per_channel_weight_only"
    doc["plan"] = {**(doc.get("plan") or {}), "precision": "int8_per_channel_weight_only"}
    doc["precision"] = "bf16"
    assert precision_of(msgspec.convert(doc, Result, strict=False)) == "bf16"
    doc["precision"] = None  # a result without it: the plan's, then --quantization
    assert precision_of(msgspec.convert(doc, Result, strict=False)) == \
        "int8_per_channel_weight_only"
