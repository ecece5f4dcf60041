"""Reading a vLLM server log: why a start-up failed. Pure functions on log text (no I/O).

vLLM (0.2x-0.3x) writes one log for several processes. Each logging line carries a process
prefix and a header::

    (EngineCore_DP0 pid=2345) ERROR 11-20 09:14:52 [core.py:866] EngineCore failed to start.
    (EngineCore_DP0 pid=2345) ERROR 11-20 09:14:52 [core.py:866] Traceback (most recent call last):

(a multi-line message repeats the header on every line); a traceback printed outside logging
(``Process EngineCore_DP0:`` from multiprocessing, the API server's own) carries the prefix only,
or nothing. When the engine process dies during start-up, the API server ends the log with the
same wrapper every time (``RuntimeError: Engine core initialization failed. See root cause
above.``); the cause is the engine or worker process's own traceback, higher up.

:func:`root_cause` finds that traceback; :func:`failure_report` renders it, followed by the log's
tail with known-harmless noise left out (:func:`drop_noise`).

:func:`weights_loaded` reads what the engine says it loaded: the dtype of its configuration line
(``Initializing a V1 LLM engine (...) with config: ... dtype=torch.bfloat16``) and, for an
online quantization (``--quantization int8_per_channel_weight_only``, fp8 on a GPU), how many
layers it quantized (``[base_loader.py] Quantizing 0 layers of types:``, vLLM 0.32).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

_PREFIX = re.compile(r"^\((?P<proc>[^()\s]+) pid=(?P<pid>\d+)\) ?")
_HEADER = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[(?P<loc>[^\]]+)\] ?"
)
_TRACEBACK = "Traceback (most recent call last):"
_CHAINS = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
_WRAPPER = "Engine core initialization failed"
_FRONTEND = ("APIServer", "ApiServer")


@dataclass(frozen=True)
class LogLine:
    """One line of a vLLM log split into its parts; ``text`` is the line without prefix and
    header. ``proc`` is e.g. ``"EngineCore_DP0 pid=2345"`` (None without a prefix)."""

    raw: str
    text: str
    proc: str | None = None
    level: str | None = None
    ts: str | None = None
    loc: str | None = None

    @property
    def header(self) -> tuple[str | None, str | None, str | None, str | None]:
        return (self.proc, self.level, self.ts, self.loc)

    @property
    def process_name(self) -> str | None:
        """The process name without its pid (``EngineCore_DP0``)."""
        return self.proc.split(" ", 1)[0] if self.proc else None


def parse_line(raw: str) -> LogLine:
    """Split one log line into process prefix, level header and text."""
    rest, proc = raw, None
    m = _PREFIX.match(rest)
    if m:
        proc = f"{m.group('proc')} pid={m.group('pid')}"
        rest = rest[m.end() :]
    h = _HEADER.match(rest)
    if h:
        return LogLine(raw, rest[h.end() :], proc, h.group("level"), h.group("ts"), h.group("loc"))
    return LogLine(raw, rest, proc)


def split_lines(text: str) -> list[str]:
    """Log text into lines; a progress bar's carriage-return redraws count as lines."""
    return [part for line in text.split("\n") for part in line.split("\r")]


def drop_noise(lines: Sequence[str]) -> list[str]:
    """``lines`` without known-harmless start-up noise:

    - the "Chat template warmup failed" warning and its traceback, which vLLM logs on every start
      with ``--skip-tokenizer-init`` (ending "Tokenizer not available ...");
    - Python's ``resource_tracker`` warning about leaked shared memory or semaphores that
      follows a failed start, with its ``warnings.warn(`` source line.
    """
    out: list[str] = []
    i, n = 0, len(lines)
    while i < n:
        raw = lines[i]
        line = parse_line(raw)
        if "Chat template warmup failed" in line.text:
            j = i + 1
            end = i  # without the tokenizer line below, drop only the same-header continuation
            while j < n and j <= i + 80:
                nxt = parse_line(lines[j])
                if nxt.proc != line.proc:
                    break
                if "Tokenizer not available" in nxt.text and not nxt.text.startswith(" "):
                    end = j
                    break
                j += 1
            if end == i:
                while end + 1 < n and parse_line(lines[end + 1]).header == line.header:
                    end += 1
            i = end + 1
            continue
        if "resource_tracker: There appear to be" in raw:
            i += 1
            if i < n and lines[i].strip().startswith("warnings.warn("):
                i += 1
            continue
        out.append(raw)
        i += 1
    return out


@dataclass
class Traceback:
    """One traceback found in the log (a chain of exceptions counts as one)."""

    proc: str | None
    start: int  # index of its first line in the analysed lines
    frames: list[tuple[str, str]] = field(default_factory=list)  # the first part's frames
    exceptions: list[str] = field(default_factory=list)  # "Type: message", first part first

    @property
    def final(self) -> str:
        return self.exceptions[-1] if self.exceptions else ""


def find_tracebacks(lines: Sequence[LogLine]) -> list[Traceback]:
    """Every traceback in ``lines``, in order, each read within its own process's lines."""
    found: list[Traceback] = []
    consumed: set[int] = set()
    for i, line in enumerate(lines):
        if i in consumed or line.text.strip() != _TRACEBACK:
            continue
        tb = Traceback(line.proc, i)
        part_frames: list[tuple[str, str]] = []
        j = i + 1
        n = len(lines)
        while j < n:
            cur = lines[j]
            if cur.proc != line.proc:
                j += 1
                continue  # another process's line interleaved
            consumed.add(j)
            t = cur.text
            s = t.strip()
            if t.startswith("  File ") or s.startswith('File "'):
                code = ""
                k = j + 1
                while k < n and lines[k].proc != line.proc:
                    k += 1
                if k < n:
                    nxt = lines[k].text
                    if nxt.startswith("    ") and not nxt.strip().startswith('File "'):
                        code = nxt.strip()
                part_frames.append((s, code))
                j += 1
                continue
            if t.startswith((" ", "\t")) or s == "":
                j += 1  # source line, caret line, blank line between chained parts
                continue
            if s in _CHAINS or s == _TRACEBACK:
                j += 1
                continue
            # the exception line ends this part; a chain may follow
            if not tb.exceptions:
                tb.frames = part_frames
            tb.exceptions.append(s)
            part_frames = []
            j += 1
            while j < n and lines[j].proc == line.proc and lines[j].text.strip() == "":
                consumed.add(j)
                j += 1
            if j < n and lines[j].proc == line.proc and lines[j].text.strip() in _CHAINS:
                continue
            break
        if tb.exceptions:
            found.append(tb)
    return found


@dataclass
class RootCause:
    """Why the server failed, as far as its log says."""

    proc: str | None  # the process whose traceback it is
    exception: str | None  # "Type: message" of the original exception
    chained: list[str]  # later exceptions of the same chain, if any
    frames: list[tuple[str, str]]  # the frames nearest the raise, innermost last
    errors: list[str]  # the engine/worker processes' own ERROR messages

    def render(self) -> list[str]:
        """Display lines, most useful first."""
        who = f" ({self.proc})" if self.proc else ""
        out = [f"--- root cause, from the server log{who} ---"]
        if self.exception:
            out.append(self.exception)
            for c in self.chained:
                out.append(f"  which led to: {c}")
            if self.frames:
                out.append("  raised at (innermost last):")
                for where, code in self.frames:
                    out.append(f"    {_short_path(where)}" + (f": {code}" if code else ""))
        if self.errors:
            out.append("  ERROR lines of the engine/worker processes:")
            out.extend(f"    {e}" for e in self.errors)
        return out


def root_cause(text: str, max_frames: int = 3, max_errors: int = 6) -> RootCause | None:
    """The first traceback of the log that is not the API server's start-up wrapper nor known
    noise, with the ERROR lines of the engine and worker processes; None if the log has
    neither (then only its tail can help)."""
    lines = [parse_line(r) for r in drop_noise(split_lines(text))]
    tbs = [t for t in find_tracebacks(lines) if _WRAPPER not in t.final]
    in_tb = _traceback_line_indexes(lines)
    errors: list[str] = []
    for i, line in enumerate(lines):
        if (
            line.level in ("ERROR", "CRITICAL")
            and line.process_name not in _FRONTEND
            and i not in in_tb
            and line.text.strip()
            and line.text.strip() not in errors
            and _WRAPPER not in line.text
        ):
            errors.append(line.text.strip())
    if not tbs:
        plain = [ln.text.strip() for ln in lines if re.match(r"^\S+: error: ", ln.text)]
        errors += [e for e in plain if e not in errors]
        if not errors:
            return None
        return RootCause(None, None, [], [], errors[:max_errors])
    first = tbs[0]
    return RootCause(
        first.proc,
        first.exceptions[0],
        first.exceptions[1:],
        first.frames[-max_frames:],
        errors[:max_errors],
    )


def failure_report(text: str, tail_lines: int = 25) -> str:
    """What to show when the server failed: the root cause (if the log has one), then the
    last ``tail_lines`` lines without known-harmless noise (10 when a root cause was found:
    the tail is then the API server's wrapper)."""
    cause = root_cause(text)
    lines = [ln for ln in drop_noise(split_lines(text.rstrip("\n")))]
    keep = min(tail_lines, 10) if cause and cause.exception else tail_lines
    out: list[str] = []
    if cause is not None:
        out += cause.render()
    out.append("--- last lines of the server log (known-harmless lines left out) ---")
    out += lines[-keep:]
    return "\n".join(out)


def _traceback_line_indexes(lines: Sequence[LogLine]) -> set[int]:
    """Indexes of the lines of logged tracebacks: from a 'Traceback' line on, every later line
    with its header (process, level, time, location), even with other lines in between; and any
    indented or caret-only line of a logged record."""
    out: set[int] = set()
    started: dict[tuple[str | None, str | None, str | None, str | None], int] = {}
    for i, line in enumerate(lines):
        if line.level is None:
            continue
        if line.text.strip() == _TRACEBACK and line.header not in started:
            started[line.header] = i
        stripped = line.text.strip()
        carets = bool(stripped) and set(stripped) <= set("^~ ")
        if line.header in started or line.text.startswith((" ", "\t")) or carets:
            out.add(i)
    return out


def _short_path(frame: str) -> str:
    """``File "/x/site-packages/vllm/a.py", line 3, in f`` -> ``File "vllm/a.py", ...``."""
    return re.sub(r'"[^"]*/site-packages/', '"', frame)


_ENGINE_DTYPE = re.compile(r"Initializing a V1 LLM engine .*?\bdtype=torch\.(\w+)")
_QUANTIZING = re.compile(r"Quantizing (\d+) layers of types:")
#: torch dtype names -> the precision names infer-prof records.
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
           "float": "fp32"}


@dataclass(frozen=True)
class LoadedWeights:
    """What the log says was loaded: the engine's dtype (``bf16``; None when not found) and the
    layers an online quantization quantized (None when the log has no such line: no online
    quantization, or a vLLM that does not say)."""

    dtype: str | None
    quantized_layers: int | None


def weights_loaded(text: str) -> LoadedWeights:
    """:class:`LoadedWeights` read from a vLLM log's text (the first of each line; with several
    workers each logs the same count)."""
    dtype = _ENGINE_DTYPE.search(text)
    layers = _QUANTIZING.search(text)
    name = dtype.group(1) if dtype else None
    return LoadedWeights(_DTYPES.get(name, name) if name else None,
                         int(layers.group(1)) if layers else None)
