"""Build the shipped ``gsm8k`` quality set (infer_prof/catalog/data/quality/gsm8k.*) from the
GSM8K data files of https://github.com/openai/grade-school-math (MIT licence, Copyright (c) 2021
OpenAI): ``grade_school_math/data/test.jsonl`` and ``train.jsonl``, as saved from any copy.

    python scripts/make_gsm8k_quality_set.py TEST.jsonl TRAIN.jsonl TEST_COMMIT TRAIN_COMMIT

Only each line's ``question`` and the number after ``####`` in its ``answer`` are read, so the
first lines of the two files suffice. Items: the first ``ITEMS`` problems of ``test.jsonl``,
each asked after ``SHOTS`` worked examples (the first problems of ``train.jsonl``, answers only)
as ``Question: ...\\nAnswer: N``; graded by the number rule. Text (perplexity): the same test
questions, one a line. The sidecar ``gsm8k.source.json`` names the repository, paths, the
commits of the file versions read, the licence and the task file's SHA-256; ``gsm8k.LICENSE``
is the MIT licence the dataset is distributed under, which asks to ship with the items.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ITEMS = 50
SHOTS = 4
REPO = "openai/grade-school-math"
TEST, TRAIN = "grade_school_math/data/test.jsonl", "grade_school_math/data/train.jsonl"
OUT = Path(__file__).resolve().parent.parent / "infer_prof" / "catalog" / "data" / "quality"


def _lines(path: str) -> list[dict[str, str]]:
    text = Path(path).read_text(encoding="utf-8")
    return [json.loads(ln) for ln in text.splitlines() if ln.strip()]


def _final(answer: str) -> str:
    """The number after ``####`` (thousands separators dropped)."""
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(test_path: str, train_path: str, test_commit: str, train_commit: str) -> None:
    shots = "".join(f"Question: {_one_line(x['question'])}\nAnswer: {_final(x['answer'])}\n\n"
                    for x in _lines(train_path)[:SHOTS])
    test = _lines(test_path)[:ITEMS]
    items = [{"prompt": f"{shots}Question: {_one_line(x['question'])}\nAnswer:",
              "answer": _final(x["answer"]), "match": "number"} for x in test]
    tasks = "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items)
    (OUT / "gsm8k.jsonl").write_text(tasks)
    (OUT / "gsm8k.txt").write_text("".join(_one_line(x["question"]) + "\n" for x in test))
    source = {
        "name": "gsm8k",
        "dataset": "GSM8K (Cobbe et al. 2021, arXiv:2110.14168)",
        "repository": f"https://github.com/{REPO}",
        "items_from": f"{TEST} at {test_commit}: lines 1-{ITEMS}",
        "shots_from": f"{TRAIN} at {train_commit}: lines 1-{SHOTS} (question and final answer "
                      "only)",
        "text_from": f"{TEST}: the questions of lines 1-{ITEMS}",
        "read_from": "the public-code index's stored copies of the two files (read_file)",
        "licence": "MIT (Copyright (c) 2021 OpenAI), as the dataset's redistributors state it, "
                   "e.g. HiTZ/MGSM-eu's dataset card "
                   "(https://huggingface.co/datasets/HiTZ/MGSM-eu: "
                   "'The GSM8K dataset is licensed under the MIT License'); the licence text "
                   "ships as gsm8k.LICENSE",
        "tasks_sha256": hashlib.sha256(tasks.encode()).hexdigest(),
        "built_by": "scripts/make_gsm8k_quality_set.py",
    }
    (OUT / "gsm8k.source.json").write_text(json.dumps(source, indent=2) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
