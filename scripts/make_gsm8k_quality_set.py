"""Build the shipped ``gsm8k`` quality set (infer_prof/catalog/data/quality/gsm8k.*) from a clone
of https://github.com/openai/grade-school-math (MIT licence, Copyright (c) 2021 OpenAI).

    python scripts/make_gsm8k_quality_set.py PATH/TO/grade-school-math [COMMIT]

Items: the first ``ITEMS`` problems of ``grade_school_math/data/test.jsonl`` at ``COMMIT``, each
asked after ``SHOTS`` worked examples (the first problems of ``train.jsonl``, answers only) as
``Question: ...\\nAnswer: N``; graded by the number rule against the number after ``####``.
Text (perplexity): the same test questions, one a line. The sidecar ``gsm8k.source.json``
names the repository, paths, commit, licence and the task file's SHA-256; ``gsm8k.LICENSE`` is
the upstream licence, which the MIT licence asks to ship with the items.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

ITEMS = 50
SHOTS = 4
REPO = "openai/grade-school-math"
TEST, TRAIN = "grade_school_math/data/test.jsonl", "grade_school_math/data/train.jsonl"
OUT = Path(__file__).resolve().parent.parent / "infer_prof" / "catalog" / "data" / "quality"


def _lines(clone: str, commit: str, path: str) -> list[dict[str, str]]:
    text = subprocess.run(["git", "-C", clone, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout
    return [json.loads(ln) for ln in text.splitlines() if ln.strip()]


def _final(answer: str) -> str:
    """The number after ``####`` (thousands separators dropped)."""
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(clone: str, commit: str = "HEAD") -> None:
    commit = subprocess.run(["git", "-C", clone, "rev-parse", commit], check=True,
                            capture_output=True, text=True).stdout.strip()
    shots = "".join(f"Question: {_one_line(x['question'])}\nAnswer: {_final(x['answer'])}\n\n"
                    for x in _lines(clone, commit, TRAIN)[:SHOTS])
    test = _lines(clone, commit, TEST)[:ITEMS]
    items = [{"prompt": f"{shots}Question: {_one_line(x['question'])}\nAnswer:",
              "answer": _final(x["answer"]), "match": "number"} for x in test]
    tasks = "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items)
    (OUT / "gsm8k.jsonl").write_text(tasks)
    (OUT / "gsm8k.txt").write_text("".join(_one_line(x["question"]) + "\n" for x in test))
    licence = subprocess.run(["git", "-C", clone, "show", f"{commit}:LICENSE"], check=True,
                             capture_output=True, text=True).stdout
    (OUT / "gsm8k.LICENSE").write_text(licence)
    source = {
        "name": "gsm8k",
        "dataset": "GSM8K (Cobbe et al. 2021, arXiv:2110.14168)",
        "repository": f"https://github.com/{REPO}",
        "commit": commit,
        "items_from": f"{TEST}: lines 1-{ITEMS}",
        "shots_from": f"{TRAIN}: lines 1-{SHOTS} (question and final answer only)",
        "text_from": f"{TEST}: the questions of lines 1-{ITEMS}",
        "licence": "MIT (LICENSE at that commit: Copyright (c) 2021 OpenAI), shipped as "
                   "gsm8k.LICENSE",
        "tasks_sha256": hashlib.sha256(tasks.encode()).hexdigest(),
        "built_by": "scripts/make_gsm8k_quality_set.py",
    }
    (OUT / "gsm8k.source.json").write_text(json.dumps(source, indent=2) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
