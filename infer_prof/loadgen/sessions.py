"""Multi-turn sessions (``--turns K``): conversations whose every turn resends the conversation so
far, run by closed-loop streams (each stream runs one session's turns in order, then the next
session), with a think time between turns.

Conversations:

- synthetic: per session ``s``, user input lengths and answer lengths drawn (seeded
  ``"<seed>/session/<s>/..."``) from the workload's ``input_len`` and ``output_len``. Turn ``k``'s
  prompt is turn ``k - 1``'s prompt, then a stand-in for its answer of exactly the answer's
  length (the client does not keep the streamed text; the server generates exactly
  ``max_tokens`` tokens, ``ignore_eos``), then ``input_len_k`` new tokens. As token IDs (the
  default) every length is exact: ``input_k = sum(user_0..k) + sum(answer_0..k-1)``. As text
  (``--prompt text``): ``User: <words>\\nAssistant:`` for a user turn (words alone when the
  turn is too short for the markers) and `` <words>\\n`` for an answer, each built so the whole
  prompt's token count is exact: turn ``k`` has
  ``count(history) + user_k`` tokens (turn 0: ``user_0``, BOS included), the answer exactly
  ``answer_k`` tokens more than the prompt before it.
- ShareGPT (``--dataset FILE --turns K``): each conversation's (human, gpt) pairs, up to ``K``,
  in order; turn ``k``'s prompt is the text ``User: <human>\\nAssistant: <gpt>\\n`` of the earlier
  pairs then ``User: <human_k>\\nAssistant:``; the history holds the data's answers, the output
  length is the gpt answer's token count (or ``--output-len``). A conversation is cut at the
  first turn longer than the model's context; one without a usable turn is skipped (counted).
- For the chat API (``--api chat``) both go as chat messages: the earlier user messages and
  answers as ``user`` and ``assistant`` messages, then the turn's user message. A synthetic
  user message has exactly ``input_len_k`` tokens of content and an answer's stand-in exactly
  ``answer_k`` (counted without the tokens the tokenizer adds to any text); the chat template's
  tokens come on top and are reported from the server's count.

The run ends after ``ceil(num_requests / turns)`` whole sessions (synthetic; for a dataset the
whole conversations that reach ``num_requests`` turns), or at ``duration_s`` (sessions are then
cut where they stand). Everything runs in one client process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.workload.distributions import LengthDistribution
from infer_prof.core.workload.sessions import SessionSettings, by_turn, prefix_cache
from infer_prof.loadgen.closed_loop import (
    ClosedLoopPlan,
    DriverIO,
    Prompt,
    RequestSpec,
    cancel_all,
    open_quietly,
    stream_one,
)
from infer_prof.loadgen.datasets import (
    SHAREGPT_SHAPE,
    DatasetError,
    file_sha256,
    sharegpt_conversations,
)
from infer_prof.loadgen.endpoint import StreamConnection, resolve
from infer_prof.loadgen.pacing import SendPacer
from infer_prof.loadgen.prepared import PreparedConversations, prepare_conversations
from infer_prof.loadgen.prompts import TokenPool, make_prompt
from infer_prof.loadgen.text_prompts import TextPromptMaker
from infer_prof.results.config_record import SessionDatasetUsed, SessionsUsed

#: A turn before it gets its request index: (prompt, input tokens, output tokens).
Turn = tuple[Prompt, int, int]
#: One chat message: ``{"role": "user" | "assistant", "content": text}``.
Message = dict[str, str]

USER = "User:"
ASSISTANT = "\nAssistant:"


async def _think(done_ns: int, think_s: float, stop: asyncio.Event) -> int:
    """Wait out a user's think time: until ``done_ns + think_s`` on ``perf_counter_ns`` (the
    previous answer's last byte, as the kernel stamped it), or ``stop``. Returns when the next
    turn was due: the think time's end, so a late timer shows as client delay. The event loop's
    timers may fire up to a millisecond early (uvloop keeps its clock in whole milliseconds), so
    the wait is re-armed until the clock has really reached the end."""
    end = done_ns + int(think_s * 1e9)
    now = time.perf_counter_ns()
    while now < end and not stop.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), max((end - now) / 1e9, 0.0005))
        now = time.perf_counter_ns()
    return min(now, end)


@dataclass
class Conversation:
    """One session's turns, in order (request indices already given)."""

    session: int
    turns: list[RequestSpec]


# ------------------------------------------------------------------------- synthetic sessions


def synthetic_turns(
    s: int,
    turns: int,
    input_len: LengthDistribution,
    output_len: LengthDistribution,
    seed: int | str,
    pool: TokenPool,
    text: TextPromptMaker | None = None,
    chat: bool = False,
) -> list[Turn]:
    """Session ``s``'s turns (see the module docstring): prompts as token IDs from ``pool``, or
    text from ``text`` when given, or with ``chat`` (``text`` needed) chat messages. Same
    arguments, same turns."""
    users = input_len.sample(random.Random(f"{seed}/session/{s}/input_len"), turns)
    answers = output_len.sample(random.Random(f"{seed}/session/{s}/output_len"), turns)
    out: list[Turn] = []
    if chat:
        if text is None:
            raise ValueError("chat sessions need a text prompt maker")
        return _chat_turns(s, users, answers, seed, text)
    if text is None:
        hist: list[int] = []
        rng = random.Random(f"{seed}/session/{s}/prompt")
        for user, answer in zip(users, answers, strict=True):
            ids = hist + make_prompt(pool, user, rng)
            out.append((ids, len(ids), answer))
            hist = ids + make_prompt(pool, answer, rng)
        return out
    history = ""
    for k, (user, answer) in enumerate(zip(users, answers, strict=True)):
        target = (text.count(history) if history else 0) + user
        where = f"{seed}/session/{s}/turn/{k}/user"
        try:
            prompt = _exact_text(text, target, where, history + USER, ASSISTANT)
        except ValueError:  # a user turn too short for the role markers: words alone
            prompt = text.make(target, random.Random(where), history)
        n = text.count(prompt)
        out.append((prompt, n, answer))
        history = text.make(n + answer, random.Random(f"{seed}/session/{s}/turn/{k}/answer"),
                            prompt) + "\n"
    return out


def _chat_turns(s: int, users: list[int], answers: list[int], seed: int | str,
                text: TextPromptMaker) -> list[Turn]:
    """Synthetic chat turns: turn ``k`` sends the earlier user messages and answers, then a user
    message of exactly ``users[k]`` tokens; an answer's stand-in has exactly ``answers[k]``
    tokens. Counted as content (without the tokens the tokenizer adds to any text), so
    ``input_k = sum(users[0..k]) + sum(answers[0..k-1])``; the server's chat template adds its
    own (the result's ``api.chat_template_tokens``)."""
    out: list[Turn] = []
    history: list[Message] = []
    n = 0
    for k, (user, answer) in enumerate(zip(users, answers, strict=True)):
        words = text.make(user + text.overhead, random.Random(f"{seed}/session/{s}/turn/{k}/user"))
        messages = [*history, {"role": "user", "content": words}]
        n += user
        out.append((messages, n, answer))
        said = text.make(answer + text.overhead,
                         random.Random(f"{seed}/session/{s}/turn/{k}/answer"))
        history = [*messages, {"role": "assistant", "content": said}]
        n += answer
    return out


def _exact_text(text: TextPromptMaker, target: int, seed: str, prefix: str, suffix: str) -> str:
    """``prefix`` + words + ``suffix`` of exactly ``target`` tokens (retried with the same
    seeded words at a corrected length when the suffix's tokens merge differently)."""
    want = target - (text.count(prefix + " a" + suffix) - text.count(prefix + " a"))
    for _ in range(20):
        if want <= text.count(prefix):
            break
        body = text.make(want, random.Random(seed), prefix) + suffix
        c = text.count(body)
        if c == target:
            return body
        want += target - c
    raise ValueError(f"a user turn of {target} tokens cannot be built after a history of "
                     f"{text.count(prefix)} tokens; use longer input lengths")


# ------------------------------------------------------------------------- ShareGPT sessions


@dataclass
class ShareGptSessions:
    """The conversations of a ShareGPT file as text turns (see the module docstring)."""

    conversations: list[list[Turn]]  # prompts as text, or chat messages (``chat``)
    path: str
    sha256: str
    sample: int | None
    skipped: dict[str, int] = field(default_factory=dict)

    def record(self) -> SessionDatasetUsed:
        """For ``config.sessions.dataset``: path, sha256, sample, conversations, turns, skipped."""
        return SessionDatasetUsed(path=self.path, sha256=self.sha256, format="sharegpt",
                                  sample=self.sample, conversations=len(self.conversations),
                                  turns=sum(len(c) for c in self.conversations),
                                  skipped=dict(self.skipped))


def load_sharegpt_sessions(
    path: str | Path,
    count: Callable[[str], int],
    *,
    turns: int,
    context: int | None,
    output_len: int | None,
    sample: int | None,
    seed: int,
    chat: bool = False,
) -> ShareGptSessions:
    """Read a ShareGPT JSON file into conversations of up to ``turns`` (prompt, input tokens,
    output tokens) turns. ``count(text)``: the server's prompt-token count. The prompt is text
    (see the module docstring), or with ``chat`` the chat messages: the earlier pairs as user
    and assistant messages, then the turn's human message; its input tokens are then the
    messages' own (without the chat template's). Raises
    :class:`~infer_prof.loadgen.datasets.DatasetError` (one line: file, entry, field)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the dataset: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc}); --turns with --dataset needs a "
                           "ShareGPT JSON file") from None
    read = sharegpt_conversations(
        str(path), data, f"--turns with --dataset needs a ShareGPT file: {SHAREGPT_SHAPE}"
    )
    overhead = count("")
    convs: list[list[Turn]] = []
    no_pair = cut = 0
    for _where, msgs in read:
        pairs = [(msgs[j]["value"], msgs[j + 1]["value"]) for j in range(len(msgs) - 1)
                 if msgs[j]["from"] == "human" and msgs[j + 1]["from"] == "gpt"
                 and msgs[j]["value"]]
        history = ""
        messages: list[Message] = []
        said = 0  # the earlier messages' tokens (chat)
        conv: list[Turn] = []
        for human, gpt in pairs[:turns]:
            answer = max(1, count(gpt) - overhead) if chat or output_len is None else 0
            n_out = output_len if output_len is not None else answer
            prompt: Prompt
            if chat:
                messages = [*messages, {"role": "user", "content": human}]
                said += max(0, count(human) - overhead)
                prompt, n_in = messages, said
            else:
                prompt = f"{history}{USER} {human}{ASSISTANT}"
                n_in = count(prompt)
            if context is not None and n_in + n_out > context:
                cut += 1
                break
            conv.append((prompt, n_in, n_out))
            if chat:
                messages = [*messages, {"role": "assistant", "content": gpt}]
                said += answer
            else:
                history = f"{prompt} {gpt}\n"
        if conv:
            convs.append(conv)
        elif not pairs:
            no_pair += 1
    if not convs:
        raise DatasetError(f"{path}: no usable conversation ({len(data)} read, {no_pair} without "
                           f"a human/gpt pair, {cut} cut at the context of {context} tokens)")
    if sample is not None:
        if not 1 <= sample <= len(convs):
            raise DatasetError(f"{path}: --dataset-sample {sample} must be between 1 and the "
                               f"{len(convs)} usable conversations")
        convs = random.Random(f"{seed}/dataset/sample").sample(convs, sample)
    return ShareGptSessions(convs, str(path), file_sha256(path), sample,
                            {"no_pair": no_pair, "cut_at_context": cut})


# ------------------------------------------------------------------------- the plan and the run


@dataclass
class SessionPlan:
    """What every load point of a session run shares: the settings and, for a dataset, its
    conversations."""

    settings: SessionSettings
    dataset: ShareGptSessions | None = None
    as_ids: Callable[[str], list[int]] | None = None  # dataset text -> token IDs (token-ids)

    def start(self, wl: Any, pool: TokenPool, text: TextPromptMaker | None,
              salt: str = "") -> SessionRun:
        """The run of load point ``wl`` (a :class:`~infer_prof.core.workload.workloads.Workload`
        whose ``num_requests`` is whole sessions' turns): its sessions, built lazily, seeded
        ``"<seed><salt>/session/..."`` (``salt``: the point's place in the launch, so that no
        point resends another's conversations, :func:`infer_prof.run.point_prompts.point_salt`)."""
        n = self.sessions_for(wl.num_requests)
        seed = f"{wl.seed}{salt}" if salt else wl.seed
        return SessionRun(self.settings, self.conversations(
            n, wl.input_len, wl.output_len, seed, pool, text, self.as_ids))

    def record(self) -> SessionsUsed:
        """For ``config.sessions`` in a result: the settings and the dataset (path, sha256)."""
        s = self.settings
        return SessionsUsed(turns=s.turns, think_time_s=s.think_time_s, source=s.source,
                            sessions=s.sessions, prompt=s.prompt,
                            dataset=self.dataset.record() if self.dataset else None)

    def sessions_for(self, num_requests: int | None) -> int | None:
        """Whole sessions whose turns reach ``num_requests`` (None: bound by duration)."""
        if num_requests is None:
            return None
        if self.dataset is None:
            return math.ceil(num_requests / self.settings.turns)
        convs, n, total = self.dataset.conversations, 0, 0
        while total < num_requests:
            total += len(convs[n % len(convs)])
            n += 1
        return n

    def turns_for(self, sessions: int) -> int:
        """The requests ``sessions`` whole sessions make."""
        if self.dataset is None:
            return sessions * self.settings.turns
        convs = self.dataset.conversations
        return sum(len(convs[i % len(convs)]) for i in range(sessions))

    def longest(self, input_len: LengthDistribution, output_len: LengthDistribution) -> int:
        """The longest last turn's input + output (tokens), at worst."""
        if self.dataset is not None:
            return max(c[-1][1] + c[-1][2] for c in self.dataset.conversations)
        k = self.settings.turns
        return k * input_len.support()[1] + k * output_len.support()[1]

    def conversations(
        self,
        sessions: int | None,
        input_len: LengthDistribution,
        output_len: LengthDistribution,
        seed: int | str,
        pool: TokenPool,
        text: TextPromptMaker | None,
        as_ids: Callable[[str], list[int]] | None,
    ) -> Iterator[Conversation]:
        """The measured sessions in order, request indices numbered from 0 over all turns."""
        index = 0
        s = 0
        while sessions is None or s < sessions:
            if self.dataset is None:
                turns = synthetic_turns(s, self.settings.turns, input_len, output_len, seed,
                                        pool, text, chat=self.settings.prompt == "messages")
            else:
                convs = self.dataset.conversations
                turns = [(as_ids(p) if as_ids is not None and isinstance(p, str) else p, i, o)
                         for p, i, o in convs[s % len(convs)]]
            specs = [RequestSpec(index + k, p, i, o) for k, (p, i, o) in enumerate(turns)]
            index += len(specs)
            yield Conversation(s, specs)
            s += 1


class SessionRun:
    """One load point's sessions: the driver and the per-turn result."""

    def __init__(self, settings: SessionSettings, conversations: Iterator[Conversation]) -> None:
        self.settings = settings
        self._convs = conversations
        self.turn_of: dict[int, int] = {}  # request index -> 1-based turn
        self.session_of: dict[int, int] = {}
        self.started = 0

    def ask_adapters(self, adapter_of: Callable[[int], str | None]) -> None:
        """Every turn of session ``s`` asks for the LoRA adapter ``adapter_of(s)`` (None: the
        served model): one conversation stays on one adapter, as a user's does."""
        convs = self._convs
        self._convs = (Conversation(c.session, [replace(t, adapter=adapter_of(c.session))
                                                for t in c.turns]) for c in convs)

    def prepare(self, build: Callable[[RequestSpec], bytes],
                ahead: int | None) -> PreparedConversations:
        """Make the sessions' turns and build their bytes now, before the load (the first
        ``ahead`` turns' conversations; all when None): :mod:`infer_prof.loadgen.prepared`."""
        self._convs = prepared = prepare_conversations(self._convs, build, ahead)
        return prepared

    def _next(self) -> Conversation | None:
        conv = next(self._convs, None)
        if conv is not None:
            self.started += 1
            for k, spec in enumerate(conv.turns):
                self.turn_of[spec.index] = k + 1
                self.session_of[spec.index] = conv.session
        return conv

    async def drive(
        self,
        io: DriverIO,
        warm: Sequence[RequestSpec] | Iterator[RequestSpec],
        plan: ClosedLoopPlan,
    ) -> None:
        """Warm-up, then ``plan.concurrency`` streams each running whole sessions, until the
        sessions run out, ``plan.duration_s`` has passed since measuring began, or ``io.stop``.

        The warm-up is the given single requests (a continuous warm-up's lazy pool is cut to one
        request per stream), all finished before the sessions start. A turn's
        ``scheduled_ns`` is when it was due: its stream free (turn 1) or its think time over.
        """
        family, addr = await resolve(io.endpoint)
        conns = [StreamConnection(addr, family, io.endpoint) for _ in range(plan.concurrency)]
        pacer = SendPacer()
        counters, stop = io.counters, io.stop
        warm_list = list(warm) if isinstance(warm, Sequence) else list(
            islice(warm, plan.concurrency))
        warm_it = iter(warm_list)
        think = self.settings.think_time_s

        async def warm_worker(wid: int) -> None:
            free = time.perf_counter_ns()
            while not stop.is_set():
                spec = next(warm_it, None)
                if spec is None:
                    return
                await pacer.turn()
                _, free = await stream_one(conns[wid], spec, wid, free, io, plan.timeout_s,
                                            pacer)

        async def worker(wid: int, deadline: int | None) -> None:
            free = time.perf_counter_ns()
            while not stop.is_set():
                conv = self._next()
                if conv is None:
                    return
                last_done: int | None = None
                for k, spec in enumerate(conv.turns):
                    if k and think > 0:
                        free = await _think(last_done or free, think, stop)
                    if stop.is_set() or (deadline is not None
                                         and time.perf_counter_ns() >= deadline):
                        return
                    await pacer.turn()
                    rec, free = await stream_one(conns[wid], spec, wid, free, io,
                                                  plan.timeout_s, pacer)
                    last_done = rec.done_ns
                    if rec.error == "connect_failed":
                        await asyncio.sleep(0.5)  # as the closed loop: the watchdog decides

        tasks: list[asyncio.Task[None]] = []
        try:
            if warm_list:
                counters.phase = "warm-up"
                tasks = [asyncio.create_task(warm_worker(i))
                         for i in range(min(plan.concurrency, len(warm_list)))]
                await asyncio.gather(*tasks)
            if stop.is_set():
                return
            # every stream's connection open before the clock starts, as the closed loop does
            await asyncio.gather(*(open_quietly(c) for c in conns))
            counters.phase = "measuring"
            deadline = (time.perf_counter_ns() + int(plan.duration_s * 1e9)
                        if plan.duration_s else None)
            tasks = [asyncio.create_task(worker(i, deadline)) for i in range(plan.concurrency)]
            await asyncio.gather(*tasks)
            counters.phase = "done"
        finally:
            await cancel_all(tasks)
            for c in conns:
                c.close()

    def result(self, records: Sequence[RequestRecord],
               server_metrics: dict[str, Any] | None) -> dict[str, Any]:
        """The result's ``sessions`` section: settings, sessions started and completed (every
        turn answered), per-turn figures and the server's prefix-cache hit rate."""
        done: dict[int, list[bool]] = {}
        for r in records:
            if not r.warmup and r.index in self.session_of:
                done.setdefault(self.session_of[r.index], []).append(r.ok)
        sizes: dict[int, int] = {}
        for s in self.session_of.values():
            sizes[s] = sizes.get(s, 0) + 1
        complete = sum(1 for s, oks in done.items() if len(oks) == sizes[s] and all(oks))
        return {
            **self.settings.to_dict(),
            "sessions_started": self.started,
            "sessions_completed": complete,
            "by_turn": by_turn(records, self.turn_of),
            "prefix_cache": prefix_cache(server_metrics),
        }
