"""The built-in quality sets: ``gsm8k`` (items of a public benchmark) with its source and
licence beside it, readable by ``--quality gsm8k``."""

import hashlib
import json

from infer_prof.catalog.trained_tiny import DATA_DIR
from infer_prof.core.quality.tasks import is_correct
from infer_prof.quality.spec import BUILT_IN, parse_spec


def test_gsm8k_names_its_source_and_ships_its_licence():
    source = json.loads((DATA_DIR / "gsm8k.source.json").read_text())
    assert source["repository"] == "https://github.com/openai/grade-school-math"
    assert source["licence"].startswith("MIT") and "huggingface.co" in source["licence"]
    for key in ("items_from", "shots_from"):  # the file version read, by its commit
        assert len(source[key].split(" at ")[1].split(":")[0]) == 40
    tasks = (DATA_DIR / "gsm8k.jsonl").read_bytes()
    assert hashlib.sha256(tasks).hexdigest() == source["tasks_sha256"]  # as built, unedited
    licence = (DATA_DIR / "gsm8k.LICENSE").read_text()
    assert licence.startswith("MIT License") and "Copyright (c) 2021 OpenAI" in licence


def test_gsm8k_is_a_built_in_set_of_fifty_four_shot_items():
    assert set(BUILT_IN) == {"addition", "gsm8k"}
    inputs = parse_spec("gsm8k")
    assert len(inputs.items) == 50 and len(inputs.text_lines) == 50
    first = inputs.items[0]
    assert first.prompt.count("Question: ") == 5 and first.prompt.endswith("\nAnswer:")
    assert first.prompt.rsplit("Question: ", 1)[1].startswith("Janet")  # test.jsonl's first
    assert first.answer == "18" and first.match == "number"
    assert is_correct(first, " 18") and not is_correct(first, " 16")
    assert all(i.answer.lstrip("-").replace(".", "", 1).isdigit() for i in inputs.items)
