"""The weights decision (pure): real weights when they can be had, else random ones, said why."""

import msgspec
import pytest

from infer_prof.core.planning.weights import (
    HubStatus,
    WeightFacts,
    decide,
    missing_shards,
    weight_files,
)
from infer_prof.run.startup import weights_section

ALIAS = {"name": "llama-2-7b", "source": "alias", "hub_id": "meta-llama/Llama-2-7b-hf"}


def test_weight_files_pick_weights_and_skip_trainer_leftovers():
    names = [
        "config.json",
        "model-00001-of-00002.safetensors",
        "pytorch_model.bin",
        "training_args.bin",
        "model.gguf",
        "tokenizer.json",
        "consolidated.00.pth",
        "optimizer.pt",
    ]
    assert weight_files(names) == [
        "consolidated.00.pth",
        "model-00001-of-00002.safetensors",
        "model.gguf",
        "pytorch_model.bin",
    ]
    assert weight_files(["config.json", "tokenizer.model"]) == []


def test_missing_shards_names_the_absent_ones():
    index = ["a.safetensors", "b.safetensors", "a.safetensors"]
    assert missing_shards(index, ["a.safetensors", "config.json"]) == ["b.safetensors"]
    assert missing_shards(index, ["a.safetensors", "b.safetensors"]) == []


@pytest.mark.parametrize(
    ("hub", "why"),
    [
        (HubStatus("gated", "HTTP 401"), "gated on the hub, no token (HF_TOKEN), not cached"),
        (
            HubStatus("gated", "HTTP 403", token=True),
            "gated on the hub, your token has no access, not cached",
        ),
        (HubStatus("unreachable", "name lookup failed"), "hub unreachable: name lookup failed"),
        (HubStatus("offline", "HF_HUB_OFFLINE"), "HF_HUB_OFFLINE is set, not cached"),
        (HubStatus("not_found", "HTTP 404"), "not on the hub, not cached"),
    ],
)
def test_alias_without_weights_profiles_random_weights_and_says_why(hub, why):
    d = decide(WeightFacts(**ALIAS, hub=hub))
    assert d.error is None
    assert (d.weights, d.origin, d.load_format) == ("random", "random", "dummy")
    assert why in d.reason and why in (d.notice or "")
    assert d.notice is not None and d.notice.startswith("llama-2-7b: no weights available (")
    assert d.notice.endswith(
        "profiling its architecture with random weights; speed is the same, outputs are "
        "meaningless"
    )
    assert msgspec.to_builtins(weights_section(d)) == {  # the result's model.weights
        "weights": "random",
        "origin": "random",
        "load_format": "dummy",
        "reason": d.reason,
        "engine_path": None,
    }


def test_cached_weights_win_over_the_hub():
    d = decide(
        WeightFacts(**ALIAS, cached_snapshot="/c/snap", hub=HubStatus("gated", "HTTP 401"))
    )
    assert (d.weights, d.origin, d.load_format, d.engine_path) == (
        "real",
        "hf-cache",
        None,
        "/c/snap",
    )
    assert d.notice and "Hugging Face cache" in d.notice


def test_open_hub_downloads_real_weights_and_says_so():
    d = decide(WeightFacts(**ALIAS, hub=HubStatus("ok", "HTTP 200", token=True)))
    assert (d.weights, d.origin, d.load_format) == ("real", "hub", None)
    assert d.notice and "downloads" in d.notice and "--load-format dummy" in d.notice


def test_require_weights_fails_instead_of_random():
    d = decide(WeightFacts(**ALIAS, require_weights=True, hub=HubStatus("gated", "HTTP 401")))
    assert d.error and "--require-weights" in d.error and "gated on the hub" in d.error
    assert "\n" not in d.error
    # with weights at hand it does not get in the way
    ok = decide(WeightFacts(**ALIAS, require_weights=True, cached_snapshot="/c/snap"))
    assert ok.error is None and ok.weights == "real"


def test_explicit_load_format_is_obeyed_without_lookup():
    d = decide(WeightFacts(**ALIAS, load_format="dummy"))
    assert (d.weights, d.origin, d.load_format, d.notice) == ("random", "as-given", "dummy", None)
    real = decide(WeightFacts(**ALIAS, load_format="safetensors"))
    assert (real.weights, real.load_format) == ("real", "safetensors")
    both = decide(WeightFacts(**ALIAS, load_format="dummy", require_weights=True))
    assert both.error and "contradict" in both.error


def test_local_folder_without_weights_is_named_unless_dummy():
    facts = {"name": "m", "source": "local", "local_path": "/models/m", "local_weights": ()}
    d = decide(WeightFacts(**facts))
    assert d.error and "/models/m has no weight files" in d.error
    assert "--load-format dummy" in d.error and "*.safetensors" in d.error
    # an explicit non-dummy load format does not skip the check
    assert decide(WeightFacts(**facts, load_format="safetensors")).error
    dummy = decide(WeightFacts(**facts, load_format="dummy"))
    assert dummy.error is None and dummy.weights == "random"
    real = decide(WeightFacts(**{**facts, "local_weights": ("model.safetensors",)}))
    assert (real.weights, real.origin, real.error) == ("real", "local", None)


def test_hub_id_without_any_config_cannot_be_profiled():
    facts = {"name": "org/x", "source": "hub", "hub_id": "org/x", "architecture_known": False}
    d = decide(WeightFacts(**facts, hub=HubStatus("unreachable", "connection refused")))
    assert d.error and "no config.json" in d.error and "connection refused" in d.error
    cached_cfg = decide(
        WeightFacts(
            **{**facts, "architecture_known": True},
            cached_config="/c/cfg",
            hub=HubStatus("unreachable", "x"),
        )
    )
    assert (cached_cfg.weights, cached_cfg.engine_path) == ("random", "/c/cfg")


def test_tiny_llama_uses_its_generated_weights():
    d = decide(
        WeightFacts(name="tiny-llama", source="tiny", local_weights=("model.safetensors",))
    )
    assert (d.weights, d.origin, d.notice, d.error) == ("real", "local", None, None)
