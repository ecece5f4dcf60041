"""``infer-prof models``: it lists every alias ``--model`` accepts, and its table reads at 80
columns (tests/unit/test_narrow_tables.py's rule, as the other commands' tables there).

Here, not in tests/unit: the command builds each tiny model's config.json with the installed
transformers' own config classes, and importing transformers imports torch (~5 s on the
2-core VM).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from infer_prof.catalog.models import known_aliases
from infer_prof.cli import app
from tests.unit.test_narrow_tables import assert_reads_at_80, invoke

pytestmark = pytest.mark.integration


def test_models_lists_every_alias():
    out = CliRunner().invoke(app, ["models", "--json"])
    assert out.exit_code == 0, out.output
    assert [r["alias"] for r in json.loads(out.output)] == known_aliases()[1:]  # tiny-llama aside


def test_models_at_80_columns():
    text = invoke("models")
    rows = json.loads(invoke("models", "--json"))
    hub_ids = {r["hub_id"] for r in rows if r["hub_id"]}  # tiny models have none
    assert_reads_at_80(text, {r["alias"] for r in rows} | hub_ids)
    assert "meta-llama/Llama-2-13b-hf" in text  # the "meta-lla / ma/Llama"
    wide = invoke("models", columns=200)  # every column where there is room
    assert "context" in wide and "left out" not in wide
