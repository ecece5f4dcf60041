"""What telling a reasoning chunk from an answer chunk costs the client's hot path, per read.

    python benchmarks/chunk_kind_cost.py [--old-tree DIR] [--reads 100000] [--repeats 7]

Two figures, each the fastest of ``--repeats`` rounds (the least disturbed by other work on a
shared machine):

- ns per call of the C ``chunk_kind`` and ``match_token_chunk`` on one token chunk of each kind
  vLLM 0.32 streams (a completion's text, a chat answer, a chat thought with the
  ``completion_tokens_details`` every reasoning server adds to its usage);
- us per read of a whole C ``StampedReader`` call on those chunks: one chunk is written into a
  socket pair (untimed), then the reader's call is timed (``recvmsg``, kernel timestamp, fast
  path, two clock reads around it), ``--reads`` times. With ``--old-tree DIR`` (a checkout
  built with ``setup.py build_ext --inplace`` from before the classification, e.g. ``git
  archive 514ed02``) its reader is timed on the same chunks, in turn with this one's.
"""

from __future__ import annotations

import argparse
import importlib.util
import socket
import time
import timeit
from pathlib import Path
from types import ModuleType
from typing import Any

from infer_prof.loadgen import _stamped as new_stamped  # type: ignore[attr-defined]
from infer_prof.loadgen.stamped_reader import SO_TIMESTAMPNS

HEAD = b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",' \
       b'"choices":[{"index":0,"delta":'
TAIL = b',"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":512,' \
       b'"total_tokens":%d,"completion_tokens":%d%s}}\n\n'
DETAILS = b',"completion_tokens_details":{"reasoning_tokens":%d}'
COMPLETION = b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m",' \
             b'"choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null}],' \
             b'"usage":{"prompt_tokens":512,"total_tokens":%d,"completion_tokens":%d}}\n\n'


def event(kind: str, n: int) -> bytes:
    """The ``n``-th token chunk of ``kind`` (completion, answer, thought), HTTP-chunked."""
    if kind == "completion":
        data = COMPLETION % (512 + n, n)
    else:
        delta = b'{"reasoning":" tok"}' if kind == "thought" else b'{"content":" tok"}'
        data = HEAD + delta + TAIL % (512 + n, n, DETAILS % n)
    return b"%x\r\n%s\r\n" % (len(data), data)


def load_old(tree: Path) -> ModuleType:
    """The ``_stamped`` extension built in another checkout."""
    so = next((tree / "infer_prof" / "loadgen").glob("_stamped*.so"))
    spec = importlib.util.spec_from_file_location("_stamped", so)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def per_read_us(mod: Any, kind: str, reads: int) -> float:
    """us per reader call (one chunk waiting in the socket each time; the writes untimed) on
    ``reads`` chunks of ``kind``."""
    chunks = [event(kind, n) for n in range(1, reads + 1)]
    a, b = socket.socketpair()
    b.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    b.setblocking(False)
    ns: list[int] = []
    toks: list[int] = []
    lags: list[int] = []
    reader = mod.StampedReader(b.fileno(), ns, toks, lags, lambda d, t: True, lambda e: None,
                               None, 1 << 30)
    reader.fast = 1
    send, clock = a.send, time.perf_counter_ns
    total = 0
    for c in chunks:
        send(c)
        t0 = clock()
        reader()
        total += clock() - t0
    assert len(ns) == reads, "a chunk missed the fast path"
    a.close()
    b.close()
    return total / reads / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old-tree", type=Path, default=None)
    ap.add_argument("--reads", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    kinds = ("completion", "answer", "thought")
    print("C function ns per call (fastest of repeats):")
    for kind in kinds:
        data = event(kind, 7)
        row = []
        for name in ("match_token_chunk", "chunk_kind"):
            f = getattr(new_stamped, name)
            best = min(timeit.repeat(lambda f=f, d=data: f(d), number=200_000, repeat=a.repeats))
            row.append(f"{name} {best / 200_000 * 1e9:6.1f}")
        print(f"  {kind:10s} {len(data)} B  " + "  ".join(row))
    readers = {"new": new_stamped}
    if a.old_tree is not None:
        readers["old"] = load_old(a.old_tree)
    print("StampedReader us per read (fastest of repeats, rounds of old and new in turn):")
    for kind in kinds:
        runs: dict[str, list[float]] = {name: [] for name in readers}
        for _ in range(a.repeats):
            for name, mod in readers.items():
                runs[name].append(per_read_us(mod, kind, a.reads))
        best = {name: min(v) for name, v in runs.items()}
        print(f"  {kind:10s} " + "  ".join(f"{n} {v:.3f}" for n, v in best.items()))


if __name__ == "__main__":
    main()
