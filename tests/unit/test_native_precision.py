"""Checkpoints published in the precision they were trained in (catalog/native_precision.py):
each listed with its source, matched by Hugging Face repository id, and only those."""

from __future__ import annotations

import dataclasses

from infer_prof.catalog.models import registry, resolve_model
from infer_prof.catalog.native_precision import native_precision, native_precisions
from infer_prof.core.planning.precisions import normalize_precision


def test_every_listed_checkpoint_names_a_planner_precision_and_its_source():
    listed = native_precisions()
    assert set(listed) == {"openai/gpt-oss-20b", "openai/gpt-oss-120b"}
    for hub, entry in listed.items():
        assert normalize_precision(entry.precision) == entry.precision, hub
        assert entry.source.startswith("github.com/") and "@" in entry.source, hub


def test_matched_by_the_checkpoint_not_by_the_architecture():
    gpt = resolve_model("gpt-oss-120b", create_tiny=False).spec
    assert gpt is not None and native_precision(gpt) == "mxfp4"
    assert native_precision(dataclasses.replace(gpt, hub_id="someone/gpt-oss-120b-awq")) is None
    for alias in ("llama-3.1-8b", "qwen3-30b-a3b"):
        spec = resolve_model(alias, create_tiny=False).spec
        assert spec is not None and native_precision(spec) is None, alias
    assert {e["hub_id"] for e in registry().values()} >= set(native_precisions())
