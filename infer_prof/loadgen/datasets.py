"""Prompts from a dataset file the user brings (``--dataset FILE``).

Formats (detected from the content):

- ``prompt`` JSONL: one ``{"prompt": "...", "output_len": 128}`` per line (``output_len``
  optional, a positive integer).
- ``messages`` JSONL: one OpenAI ``{"messages": [{"role": ..., "content": ...}, ...]}`` per
  line. A last ``assistant`` message is the answer (its token count is the output length) and is
  not sent. The rest is rendered to text for the completions API with the tokenizer's chat
  template (``chat_template`` in ``tokenizer_config.json``, or ``chat_template.jinja``; rendered
  with ``add_generation_prompt=True``) when it has one, else joined as ``role: content`` lines
  and a final ``assistant:`` line; the result says which (``rendering``). The chat API
  (``--api chat``) is sent the messages themselves; the input length is still the rendering's.
- ``sharegpt`` JSON: a list of ``{"conversations": [{"from": "human"|"gpt", "value": ...}]}``;
  the first human turn is the prompt, the gpt turn right after it the answer. A conversation
  without that pair is skipped (counted as ``no_prompt``).

Input lengths are the prompt's tokens as the server counts them (``add_special_tokens=True``).
Output lengths: ``--output-len`` when given, else the data's (``output_len``, or the answer's
token count, at least 1), else the workload's ``output_len`` (drawn with the seed). Entries
whose input + output exceed the model's context are skipped and counted (``too_long``).
``--dataset-sample N`` takes N of the usable entries at random (seeded, in random order);
without it every usable entry is used in file order. A run that needs more requests than
entries cycles through them.

A file that cannot be read raises :class:`DatasetError`: one line naming the file, the line (or
the entry of a JSON list) and the field.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infer_prof.core.messages import OneLineError
from infer_prof.results.config_record import DatasetUsed

FORMATS = ("prompt", "messages", "sharegpt")


class DatasetError(OneLineError):
    """A dataset file that cannot be used; the message names the file, line and field."""


@dataclass(frozen=True)
class DatasetEntry:
    """One request from the data: the prompt text and its lengths in tokens."""

    text: str
    input_len: int
    output_len: int
    # a messages-format entry's messages (without the answer), sent as they are to the chat
    # API (``text`` is their rendering, for the completions API and the input length)
    messages: list[dict[str, str]] | None = None


@dataclass
class Dataset:
    """The usable entries of a dataset file and what the result records about it."""

    entries: list[DatasetEntry]
    path: str
    sha256: str
    format: str
    sample: int | None
    seed: int
    skipped: dict[str, int] = field(default_factory=dict)
    rendering: str | None = None  # messages format: "chat_template" or "role: content"
    output_from: str = "data"

    def record(self) -> DatasetUsed:
        """For ``config.dataset`` in a result."""
        return DatasetUsed(path=self.path, sha256=self.sha256, format=self.format,
                           sample=self.sample, seed=self.seed, entries=len(self.entries),
                           skipped=dict(self.skipped), rendering=self.rendering,
                           output_len_from=self.output_from)

    def longest(self) -> int:
        """The longest input + output of any entry (tokens)."""
        return max(e.input_len + e.output_len for e in self.entries)


@dataclass(frozen=True)
class _Raw:
    """A parsed entry before tokenizing: prompt text, answer text, asked output length."""

    where: str  # "line 3" or "entry 3"
    text: str
    answer: str | None
    output_len: int | None
    messages: list[dict[str, str]] | None = None


def file_sha256(path: str | Path) -> str:
    """SHA-256 of the file's bytes, hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_dataset(
    path: str | Path,
    count: Callable[[str], int],
    *,
    chat: Callable[[list[dict[str, str]]], str] | None,
    context: int | None,
    output_len: int | None,
    default_output: Callable[[random.Random], int],
    sample: int | None,
    seed: int,
) -> Dataset:
    """Read, tokenize, filter and sample a dataset file (see the module docstring).

    ``count(text)``: the server's prompt-token count; ``chat(messages)``: the chat template
    rendering, or None to join ``role: content`` lines; ``context``: the model's context in
    tokens (None: no limit); ``output_len``: ``--output-len`` (overrides the data);
    ``default_output(rng)``: an output length for an entry whose data gives none.
    """
    p = Path(path)
    try:
        raw_bytes = p.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the dataset: {exc.strerror or exc}") from None
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if text.lstrip().startswith("["):
        fmt, raws, no_prompt = "sharegpt", *_read_sharegpt(str(path), text)
    else:
        fmt, raws = _read_jsonl(str(path), text, chat)
        no_prompt = 0
    rendering = None
    if fmt == "messages":
        rendering = "chat_template" if chat is not None else "role: content"
    rng_out = random.Random(f"{seed}/dataset/output_len")
    entries: list[DatasetEntry] = []
    too_long = 0
    answer_count = _answer_counter(count)
    from_data = 0
    for r in raws:
        n_in = count(r.text)
        if output_len is not None:
            n_out = output_len
        elif r.output_len is not None:
            n_out, from_data = r.output_len, from_data + 1
        elif r.answer is not None:
            n_out, from_data = max(1, answer_count(r.answer)), from_data + 1
        else:
            n_out = default_output(rng_out)
        if context is not None and n_in + n_out > context:
            too_long += 1
            continue
        entries.append(DatasetEntry(r.text, n_in, n_out, r.messages))
    if not entries:
        raise DatasetError(f"{path}: no usable entry ({len(raws)} read, {too_long} longer than "
                           f"the context of {context} tokens, {no_prompt} without a prompt)")
    if sample is not None:
        if sample < 1 or sample > len(entries):
            raise DatasetError(f"{path}: --dataset-sample {sample} must be between 1 and the "
                               f"{len(entries)} usable entries")
        entries = random.Random(f"{seed}/dataset/sample").sample(entries, sample)
    output_from = ("--output-len" if output_len is not None
                   else "data" if from_data == len(raws) else
                   "workload" if from_data == 0 else "data, else workload")
    return Dataset(entries, str(path), hashlib.sha256(raw_bytes).hexdigest(), fmt, sample, seed,
                   {"too_long": too_long, "no_prompt": no_prompt}, rendering, output_from)


def _answer_counter(count: Callable[[str], int]) -> Callable[[str], int]:
    """Tokens of an answer: its count less the tokens the tokenizer adds to any text."""
    overhead = count("")
    return lambda text: count(text) - overhead


def _read_jsonl(path: str, text: str, chat: Callable[[list[dict[str, str]]], str] | None
                ) -> tuple[str, list[_Raw]]:
    fmt: str | None = None
    out: list[_Raw] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except RecursionError:
            raise DatasetError(f"{where}: not valid JSON (nested too deeply)") from None
        except ValueError as exc:
            raise DatasetError(f"{where}: not valid JSON ({exc}); each line must be one "
                               "JSON object") from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{where}: must be a JSON object with a \"prompt\" or "
                               "\"messages\" field")
        kind = "prompt" if "prompt" in obj else "messages" if "messages" in obj else None
        if kind is None:
            raise DatasetError(f"{where}: no \"prompt\" or \"messages\" field; give one of them")
        if fmt is not None and kind != fmt:
            raise DatasetError(f"{where}: {kind}: the file mixes \"prompt\" and \"messages\" "
                               "lines; use one format per file")
        fmt = kind
        out_len = _output_len(obj, where)
        if kind == "prompt":
            prompt = obj["prompt"]
            if not isinstance(prompt, str) or not prompt:
                raise DatasetError(f"{where}: prompt: must be a non-empty string")
            out.append(_Raw(where, prompt, None, out_len))
        else:
            msgs = _messages(obj["messages"], where)
            answer = None
            if len(msgs) > 1 and msgs[-1]["role"] == "assistant":
                answer = msgs[-1]["content"]
                msgs = msgs[:-1]
            rendered = chat(msgs) if chat is not None else _join_messages(msgs)
            out.append(_Raw(where, rendered, answer, out_len, msgs))
    if fmt is None:
        raise DatasetError(f"{path}: the file holds no entries")
    return fmt, out


def _output_len(obj: dict[str, Any], where: str) -> int | None:
    v = obj.get("output_len")
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise DatasetError(f"{where}: output_len: must be a positive integer, got {v!r}")
    return v


def _messages(value: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise DatasetError(f"{where}: messages: must be a non-empty list of "
                           "{\"role\", \"content\"} objects")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict):
            raise DatasetError(f"{where}: messages[{i}]: must be an object with role and "
                               "content")
        role, content = m.get("role"), m.get("content")
        if not isinstance(role, str) or not role:
            raise DatasetError(f"{where}: messages[{i}].role: must be a non-empty string")
        if not isinstance(content, str):
            raise DatasetError(f"{where}: messages[{i}].content: must be a string (text "
                               "content only)")
        out.append({"role": role, "content": content})
    return out


def _join_messages(msgs: Sequence[dict[str, str]]) -> str:
    """The rendering without a chat template: ``role: content`` lines, then ``assistant:``."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in msgs) + "\nassistant:"


SHAREGPT_SHAPE = "a JSON list of {\"conversations\": [...]} objects"


def sharegpt_conversations(
    path: str, data: Any, not_a_list: str
) -> list[tuple[str, list[dict[str, str]]]]:
    """The one ShareGPT reader: the parsed JSON ``data`` of file ``path`` as
    ``(where, turns)`` pairs, ``where`` naming the entry (``path: entry i``) and each turn a
    ``{"from", "value"}`` dict of strings. Raises :class:`DatasetError` (one line: file, entry,
    field): ``not_a_list`` (after ``path: ``) when ``data`` is not a list."""
    if not isinstance(data, list):
        raise DatasetError(f"{path}: {not_a_list}")
    out: list[tuple[str, list[dict[str, str]]]] = []
    for i, item in enumerate(data):
        where = f"{path}: entry {i}"
        turns = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(turns, list):
            raise DatasetError(f"{where}: conversations: missing or not a list")
        for j, t in enumerate(turns):
            if (not isinstance(t, dict) or not isinstance(t.get("from"), str)
                    or not isinstance(t.get("value"), str)):
                raise DatasetError(f"{where}: conversations[{j}]: must be an object with "
                                   "string fields \"from\" and \"value\"")
        out.append((where, turns))
    return out


def _read_sharegpt(path: str, text: str) -> tuple[list[_Raw], int]:
    try:
        data = json.loads(text)
    except RecursionError:
        raise DatasetError(f"{path}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:
        line = getattr(exc, "lineno", "?")
        raise DatasetError(f"{path}:{line}: not valid JSON ({exc})") from None
    out: list[_Raw] = []
    no_prompt = 0
    for where, turns in sharegpt_conversations(
        path, data, f"a ShareGPT file must be {SHAREGPT_SHAPE}"
    ):
        first = next((j for j, t in enumerate(turns) if t["from"] == "human" and t["value"]),
                     None)
        if first is None:
            no_prompt += 1
            continue
        nxt = turns[first + 1] if first + 1 < len(turns) else None
        answer = nxt["value"] if nxt is not None and nxt["from"] == "gpt" else None
        out.append(_Raw(where, turns[first]["value"], answer, None))
    return out, no_prompt


# ------------------------------------------------------------------------- tokenizer side


def chat_template_renderer(folder: str | Path) -> Callable[..., str] | None:
    """The tokenizer folder's chat template as a function of the messages (rendered as
    transformers does: jinja2 sandbox, ``trim_blocks``/``lstrip_blocks``,
    ``add_generation_prompt=True``, the special tokens by name; keywords are further template
    variables, e.g. ``enable_thinking=False``), or None when it has none."""
    folder = Path(folder)
    cfg: dict[str, Any] = {}
    try:
        loaded = json.loads((folder / "tokenizer_config.json").read_text())
        cfg = loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError):
        pass
    template = cfg.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if not isinstance(template, str):
        jinja = folder / "chat_template.jinja"
        template = jinja.read_text() if jinja.is_file() else None
    if not template:
        return None
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise DatasetError(f"chat template: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    compiled = env.from_string(template)
    specials = {k: _token_text(cfg.get(k)) for k in ("bos_token", "eos_token", "unk_token",
                                                      "pad_token")}

    def render(messages: list[dict[str, str]], **variables: Any) -> str:
        return compiled.render(**{**specials, **variables}, messages=messages,
                               add_generation_prompt=True)

    return render


def _token_text(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""
