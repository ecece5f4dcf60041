"""What reading a result file through its declared type costs: msgspec (what
``infer_prof/results/document.py`` uses) beside pydantic v2 with the same shape and plain
``json.loads`` without any check.

    python benchmarks/result_types.py [RESULT.json] [--repeat 2000]

Without a file it uses a result written by ``run`` against the built-in synthetic server
(made here in a temporary folder, about 5 s). For each way it prints the time to parse and
validate one document (median of ``--repeat``, microseconds) and the installed size of the
library. The pydantic models are built from the msgspec declaration (one class per Struct,
the same field types), so both check the same thing.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from infer_prof.results.document import Result


def _pydantic_model(struct: type, made: dict[type, Any]) -> Any:
    """A pydantic model with ``struct``'s fields (nested Structs become nested models)."""
    import typing

    import pydantic

    if struct in made:
        return made[struct]
    hints = typing.get_type_hints(struct)

    def convert(t: Any) -> Any:
        if isinstance(t, type) and issubclass(t, msgspec.Struct):
            return _pydantic_model(t, made)
        args = typing.get_args(t)
        origin = typing.get_origin(t)
        if not args:
            return t
        if origin in (typing.Union, __import__("types").UnionType):
            return typing.Union[tuple(convert(a) for a in args)]  # noqa: UP007
        if origin is typing.Literal:
            return t
        return origin[tuple(convert(a) for a in args)]

    fields = {}
    for f in msgspec.structs.fields(struct):
        default = ... if f.required else (f.default if f.default is not msgspec.NODEFAULT
                                          else f.default_factory())
        fields[f.name] = (convert(hints[f.name]), default)
    model = pydantic.create_model(struct.__name__, **fields)  # type: ignore[call-overload]
    made[struct] = model
    return model


def _median_us(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def _size_mb(dist: str) -> float:
    files = md.files(dist) or []
    return sum((f.locate().stat().st_size for f in files if Path(f.locate()).exists()), 0) / 1e6


def _sample_result(folder: Path) -> Path:
    from infer_prof.run.calibrate import start_synthetic

    server = start_synthetic(10.0, 2.0, 32)
    try:
        out = folder / "r.json"
        subprocess.run([sys.executable, "-m", "infer_prof", "run", "--model", "llama-2-7b",
                        "--endpoint", server.url, "-c", "4", "-n", "40", "--input-len", "32",
                        "--output-len", "32", "--no-progress", "--no-history", "--gpu",
                        "H100-SXM", "--price-per-hour", "2.0", "--output", str(out)],
                       check=True, capture_output=True)
        return out
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("result", nargs="?")
    ap.add_argument("--repeat", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.result) if args.result else _sample_result(Path(tmp))
        raw = path.read_bytes()
    model = _pydantic_model(Result, {})
    decoder = msgspec.json.Decoder(Result)
    ways = [
        ("json.loads, no check", lambda: json.loads(raw), "(stdlib)"),
        ("msgspec: decode + validate", lambda: decoder.decode(raw),
         f"msgspec {md.version('msgspec')}, {_size_mb('msgspec'):.1f} MB"),
        ("pydantic v2: decode + validate", lambda: model.model_validate_json(raw),
         f"pydantic {md.version('pydantic')} + pydantic-core, "
         f"{_size_mb('pydantic') + _size_mb('pydantic_core'):.1f} MB"),
    ]
    model.model_validate_json(raw)  # both accept the same document
    decoder.decode(raw)
    print(f"result document: {len(raw):,} bytes ({path.name}); median of {args.repeat}")
    print(f"{'way':34} {'us per document':>16}  library")
    for name, fn, lib in ways:
        print(f"{name:34} {_median_us(fn, args.repeat):16.1f}  {lib}")


if __name__ == "__main__":
    main()
