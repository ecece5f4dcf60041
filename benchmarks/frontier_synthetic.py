"""`run --frontier` against a server whose speed falls with load in a known way: the
interpolated throughput at targets between measured points against the exact value.

    .venv/bin/python benchmarks/frontier_synthetic.py [--ttft-ms 20] [--itl-ms 5]
        [--slope-ms 1] [--tokens 64] [--max-concurrency 32]

Starts the built-in synthetic server with ``--itl-per-stream-ms SLOPE``: a request arriving
with ``c`` streams in service gets ITL = itl_ms + slope_ms x c, as a batched engine's decode
step grows with its batch. Its exact frontier, for ``n`` output tokens per request, at
interactivity ``I`` (tokens/s/user):

    ITL(I) = 1000 / I ms      c(I) = (ITL - itl_ms) / slope_ms
    output tok/s(I) = c x n / ((ttft_ms + (n - 1) x ITL) / 1000)

(each of ``c`` closed-loop streams finishes ``n`` tokens every TTFT + (n - 1) ITL). Then runs
``infer-prof run --frontier --endpoint`` (concurrency 1, 2, 4, ... each measured until
precise) and reads the front with :func:`infer_prof.core.analysis.frontier.at_target` at the
interactivity midway between each pair of neighbouring points: the hardest place for an
interpolation. Prints measured and exact figures and the error in %; the target is within 3 %.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infer_prof.core.analysis.frontier import FrontierPoint, at_target  # noqa: E402
from infer_prof.run.calibrate import start_synthetic  # noqa: E402

TOLERANCE_PCT = 3.0


def exact_output_tok_s(interactivity: float, ttft_ms: float, itl_ms: float, slope_ms: float,
                       tokens: int) -> float:
    """The synthetic server's exact output tokens/s at ``interactivity`` (module docstring)."""
    itl = 1000.0 / interactivity
    c = (itl - itl_ms) / slope_ms
    return c * tokens / ((ttft_ms + (tokens - 1) * itl) / 1000.0)


def run_frontier(url: str, folder: Path, tokens: int, max_c: int) -> dict:
    """``infer-prof run --frontier --endpoint url``; the sweep file's ``frontier`` section."""
    cmd = [sys.executable, "-m", "infer_prof", "run", "--model", "llama-2-7b", "--endpoint", url,
           "--frontier", "--max-concurrency", str(max_c), "--input-len", "16",
           "--output-len", str(tokens), "--no-progress", "--no-history",
           "--results-dir", str(folder)]
    print(" ".join(["infer-prof", *cmd[3:]]), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"run --frontier failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    sweep = next(folder.glob("*.sweep.json"))
    return json.loads(sweep.read_text())["frontier"]


def rows(frontier: dict, ttft_ms: float, itl_ms: float, slope_ms: float,
         tokens: int) -> list[tuple[str, float, float, float]]:
    """(what, interactivity, infer-prof output tok/s, exact output tok/s): each measured point,
    then the interpolation midway between each pair of neighbours on the front."""
    keys = FrontierPoint.__dataclass_fields__
    points = [FrontierPoint(**{k: p[k] for k in keys}) for p in frontier["points"]]
    out = []
    for p in points:
        if p.interactivity is not None:
            out.append((f"measured c={p.concurrency:g}", p.interactivity, p.output_tok_s_per_gpu,
                        exact_output_tok_s(p.interactivity, ttft_ms, itl_ms, slope_ms, tokens)))
    front = sorted((p for p in points if p.interactivity is not None),
                   key=lambda p: p.interactivity or 0.0)
    for lo, hi in zip(front, front[1:], strict=False):
        x = ((lo.interactivity or 0.0) + (hi.interactivity or 0.0)) / 2
        a = at_target(points, x, None)
        if a is not None:
            out.append((f"interpolated {lo.concurrency:g}-{hi.concurrency:g}", x,
                        a.output_tok_s_per_gpu,
                        exact_output_tok_s(x, ttft_ms, itl_ms, slope_ms, tokens)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--itl-ms", type=float, default=5.0)
    ap.add_argument("--slope-ms", type=float, default=1.0)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--max-concurrency", type=int, default=32)
    args = ap.parse_args()
    server = start_synthetic(args.ttft_ms, args.itl_ms, args.tokens,
                             extra_args=("--itl-per-stream-ms", str(args.slope_ms)))
    try:
        with tempfile.TemporaryDirectory(prefix="infer-prof-frontier-") as tmp:
            frontier = run_frontier(server.url, Path(tmp), args.tokens, args.max_concurrency)
    finally:
        server.stop()
    print(f"server: TTFT {args.ttft_ms:g} ms, ITL {args.itl_ms:g} + {args.slope_ms:g} x streams "
          f"ms, {args.tokens} output tokens; stopped: {frontier['stopped_because']}")
    print(f"{'':26} {'tok/s/user':>10} {'infer-prof':>11} {'exact':>9} {'error %':>8}")
    worst = 0.0
    for what, x, got, want in rows(frontier, args.ttft_ms, args.itl_ms, args.slope_ms,
                                   args.tokens):
        err = (got / want - 1) * 100
        if what.startswith("interpolated"):
            worst = max(worst, abs(err))
        print(f"{what:26} {x:10.1f} {got:11.1f} {want:9.1f} {err:+8.2f}")
    verdict = "within" if worst <= TOLERANCE_PCT else "OUTSIDE"
    print(f"worst interpolation error {worst:.2f} % ({verdict} {TOLERANCE_PCT:g} %)")
    return 0 if worst <= TOLERANCE_PCT else 1


if __name__ == "__main__":
    raise SystemExit(main())
