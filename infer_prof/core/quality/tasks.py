"""A quality task file (JSONL) and its match rules: how one answer is graded.

Each line is one item, a JSON object: ``prompt`` (the text sent to the completions API),
``answer`` (the expected answer) and ``match`` (how the completion is graded), with
``choices`` (a list of strings) for the ``choice`` rule. Blank lines are skipped. The
completion is generated at temperature 0; the rules, on the completion ``c``:

- ``exact``: ``c``'s first line, without surrounding whitespace, equals ``answer``;
- ``number``: the first number in ``c`` (``-?digits[.digits]``) equals ``answer`` as a number;
- ``regex``: ``answer`` is a Python regular expression found in ``c`` (``re.search``);
- ``choice``: of ``choices``, the longest that ``c`` (without leading whitespace, ignoring case)
  starts with is ``answer``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

import msgspec

from infer_prof.core.messages import OneLineError

MatchRule = Literal["exact", "number", "regex", "choice"]
MATCH_RULES: tuple[str, ...] = get_args(MatchRule)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class TaskFileError(OneLineError):
    """A task file line that cannot be graded (one line naming the file, the line and the fix)."""


@dataclass(frozen=True)
class TaskItem:
    """One item of a task file: its prompt, expected answer, match rule and choices."""

    prompt: str
    answer: str
    match: MatchRule
    choices: tuple[str, ...] = ()


def parse_task_lines(text: str, name: str) -> list[TaskItem]:
    """The items of a task file's ``text`` (``name`` in messages). Raises TaskFileError on the
    first malformed line (not JSON, a missing or non-string field, an unknown rule, a bad
    regular expression, a ``choice`` answer that is not one of its choices) or when the file
    holds no item."""
    items: list[TaskItem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            items.append(_item(line, f"{name}:{number}"))
    if not items:
        raise TaskFileError(f"{name}: no task items; give a JSONL file, one "
                            '{"prompt": ..., "answer": ..., "match": "exact"} a line')
    return items


def _item(line: str, where: str) -> TaskItem:
    fix = ('each line must be {"prompt": "...", "answer": "...", '
           '"match": "exact|number|regex|choice"}')
    try:
        obj = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise TaskFileError(f"{where}: not JSON ({exc}); {fix}") from None
    if not isinstance(obj, dict):
        raise TaskFileError(f"{where}: not a JSON object; {fix}")
    for key in ("prompt", "answer", "match"):
        if not isinstance(obj.get(key), str) or (key == "prompt" and not obj[key]):
            raise TaskFileError(f"{where}: '{key}' missing or not a non-empty string; {fix}")
    rule = obj["match"]
    if rule not in MATCH_RULES:
        raise TaskFileError(f"{where}: match {rule!r} is not one of {', '.join(MATCH_RULES)}")
    choices: tuple[str, ...] = ()
    if rule == "regex":
        try:
            re.compile(obj["answer"])
        except re.error as exc:
            raise TaskFileError(f"{where}: answer is not a regular expression ({exc})") from None
    if rule == "number" and not _NUMBER.fullmatch(obj["answer"].strip()):
        raise TaskFileError(f"{where}: match 'number' needs a number as answer, "
                            f"got {obj['answer']!r}")
    if rule == "choice":
        raw = obj.get("choices")
        if not isinstance(raw, list) or not raw or not all(isinstance(c, str) and c for c in raw):
            raise TaskFileError(f"{where}: match 'choice' needs 'choices', a list of strings")
        choices = tuple(raw)
        if obj["answer"] not in choices:
            raise TaskFileError(f"{where}: answer {obj['answer']!r} is not one of its choices")
    return TaskItem(obj["prompt"], obj["answer"], rule, choices)


def is_correct(item: TaskItem, completion: str) -> bool:
    """Whether ``completion`` answers ``item`` by its match rule (see the module's rules)."""
    if item.match == "exact":
        first = completion.strip().split("\n", 1)[0].strip()
        return first == item.answer.strip()
    if item.match == "number":
        found = _NUMBER.search(completion)
        return found is not None and float(found.group()) == float(item.answer)
    if item.match == "regex":
        return re.search(item.answer, completion) is not None
    said = completion.lstrip().lower()
    starts = [c for c in item.choices if said.startswith(c.lower())]
    return bool(starts) and max(starts, key=len) == item.answer
