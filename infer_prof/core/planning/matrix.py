"""The comparison matrix: models x GPU types x engine configurations x workloads, as typed cells.

Pure: :func:`parse_matrix` takes the already-parsed TOML document (a mapping) and the file's
name (for messages only) and returns a :class:`Matrix`; every problem is a :class:`MatrixError`
whose text is one line ``FILE: KEY: problem``. :func:`cell_run_args` turns a cell into the
``infer-prof run`` options that measure it. Reading the file and resolving GPU names against the
catalog live in :mod:`infer_prof.run.matrix_file`.

The smallest file::

    models = ["tiny-llama"]
    gpus = ["H100-SXM", "A100-80GB-SXM"]
    concurrency = [2, 8]
    input_len = 64
    output_len = 32
    num_requests = 32

gives one cell per model x GPU (x engine x workload); each cell is one ``infer-prof run``: one
engine launch measuring every concurrency of its list (one result per point).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

CPU = "cpu"
"""The GPU entry meaning *this machine as it is* (no GPU type named; vLLM-CPU without a GPU)."""

TOP_KEYS = (
    "name", "models", "gpus", "concurrency", "input_len", "output_len", "num_requests",
    "workload", "endpoint", "frontier", "run_args", "gpus_per_node", "max_nodes", "engines",
    "workloads",
)
ENGINE_KEYS = (
    "name", "quantization", "dtype", "tensor_parallel_size", "max_model_len", "kv_cache_dtype",
    "gpu_memory_utilization", "enforce_eager", "load_format", "engine_args",
)
WORKLOAD_KEYS = ("name", "workload", "concurrency", "input_len", "output_len", "num_requests")


class MatrixError(ValueError):
    """A bad matrix file: one line, ``FILE: KEY: problem``."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        super().__init__(f"{source}: {key}: {problem}")
        self.source, self.key, self.problem = source, key, problem


@dataclass(frozen=True)
class EngineConfig:
    """One engine configuration: vLLM settings for a cell (None: ``run``'s default)."""

    name: str = "default"
    quantization: str | None = None
    dtype: str | None = None
    tensor_parallel_size: int | None = None
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None
    gpu_memory_utilization: float | None = None
    enforce_eager: bool = False
    load_format: str | None = None
    engine_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class MatrixWorkload:
    """One workload: a workload file or name and/or exact lengths, and the load points."""

    name: str = "default"
    workload: str | None = None
    concurrency: tuple[int, ...] = ()
    input_len: int | None = None
    output_len: int | None = None
    num_requests: int | None = None


class MatrixCellRecord(msgspec.Struct, kw_only=True):
    """A cell as its results record it (``matrix.cell``): ``index`` (from 1), ``id``
    (model/GPU/engine/workload), the model, the GPU key (or ``cpu``), the engine's and the
    workload's names, the load points' concurrencies, the endpoint (None: vLLM started here)
    and whether the cell runs ``--frontier``."""

    index: int
    id: str
    model: str
    gpu: str
    engine: str
    workload: str
    concurrency: list[int] = []
    endpoint: str | None = None
    frontier: bool = False


@dataclass(frozen=True)
class Cell:
    """One cell of the matrix: one ``infer-prof run`` (one engine launch) on one GPU type.

    ``gpu`` is a catalog key (or :data:`CPU`); ``index`` counts from 1 in matrix order.
    """

    index: int
    model: str
    gpu: str
    engine: EngineConfig
    workload: MatrixWorkload
    endpoint: str | None = None
    frontier: bool = False
    run_args: tuple[str, ...] = ()

    @property
    def cell_id(self) -> str:
        """``tiny-llama/H100-SXM/default/default``: model / GPU / engine / workload."""
        return f"{self.model}/{self.gpu}/{self.engine.name}/{self.workload.name}"

    def record(self) -> MatrixCellRecord:
        """The cell as recorded in each of its results' ``matrix`` section."""
        return MatrixCellRecord(
            index=self.index, id=self.cell_id, model=self.model, gpu=self.gpu,
            engine=self.engine.name, workload=self.workload.name,
            concurrency=list(self.workload.concurrency), endpoint=self.endpoint,
            frontier=self.frontier)

    def to_dict(self) -> dict[str, Any]:
        """:meth:`record` as JSON values (the matrix summary file's ``cell``)."""
        out: dict[str, Any] = msgspec.to_builtins(self.record())
        return out


@dataclass(frozen=True)
class Matrix:
    """A parsed matrix file: its cells in order, and what applies to all of them."""

    name: str
    source: str
    cells: tuple[Cell, ...]
    gpus_per_node: int = 1  # GPUs on each node of a type (pipeline-parallel planning)
    max_nodes: int = 1  # nodes of one type one cell may span (pipeline parallel across them)
    gpus: tuple[str, ...] = field(default=())

    @property
    def frontier(self) -> bool:
        """Whether any cell asks for ``run --frontier``."""
        return any(c.frontier for c in self.cells)


def _names(items: Sequence[str]) -> str:
    return ", ".join(items)


class _Reader:
    """Typed reads of one table of the document, each failure a :class:`MatrixError`."""

    def __init__(self, source: str, table: Mapping[str, Any], prefix: str, known: Sequence[str]):
        self.source, self.table, self.prefix = source, table, prefix
        for key in table:
            if key not in known:
                self.fail(key, f"unknown key; known keys: {_names(known)}")

    def fail(self, key: str, problem: str) -> MatrixError:
        raise MatrixError(self.source, self.prefix + key, problem)

    def text(self, key: str, default: str | None = None) -> str | None:
        v = self.table.get(key, default)
        if v is not None and (not isinstance(v, str) or not v.strip()):
            self.fail(key, f"must be a non-empty string, got {v!r}")
        return v

    def positive_int(self, key: str) -> int | None:
        v = self.table.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            self.fail(key, f"must be a positive integer, got {v!r}")
        return v

    def flag(self, key: str) -> bool:
        v = self.table.get(key, False)
        if not isinstance(v, bool):
            self.fail(key, f"must be true or false, got {v!r}")
        return v

    def fraction(self, key: str) -> float | None:
        v = self.table.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or not 0 < v <= 1):
            self.fail(key, f"must be a number within (0, 1], got {v!r}")
        return None if v is None else float(v)

    def strings(self, key: str, required: bool = False) -> tuple[str, ...]:
        v = self.table.get(key)
        if v is None:
            if required:
                self.fail(key, "missing; give a list, e.g. " + key + ' = ["..."]')
            return ()
        if isinstance(v, str):
            v = [v]
        if (not isinstance(v, list) or not v
                or not all(isinstance(x, str) and x.strip() for x in v)):
            self.fail(key, f"must be a non-empty list of strings, got {v!r}")
        if len(set(v)) != len(v):
            self.fail(key, f"lists an entry twice: {v!r}")
        return tuple(v)

    def levels(self, key: str) -> tuple[int, ...]:
        v = self.table.get(key)
        if v is None:
            return ()
        if isinstance(v, int) and not isinstance(v, bool):
            v = [v]
        if (not isinstance(v, list) or not v
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v)):
            self.fail(key, f"must be a positive integer or a list of them, got {v!r}")
        return tuple(v)


_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def _tables(r: _Reader, key: str) -> list[Mapping[str, Any]]:
    v = r.table.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not v or not all(isinstance(t, Mapping) for t in v):
        r.fail(key, f"must be tables ([[{key}]] with a name each), got {v!r}")
    return list(v)


def _named(r: _Reader, index: int, seen: set[str]) -> str:
    name = r.text("name")
    if name is None:
        r.fail("name", "missing; each table needs a name (letters, digits, . _ -)")
    assert name is not None
    if not _NAME.match(name):
        r.fail("name", f"{name!r} may hold only letters, digits, '.', '_' and '-'")
    if name in seen:
        r.fail("name", f"{name!r} is used twice")
    seen.add(name)
    return name


def _engine(source: str, table: Mapping[str, Any], i: int, seen: set[str]) -> EngineConfig:
    r = _Reader(source, table, f"engines[{i}].", ENGINE_KEYS)
    return EngineConfig(
        name=_named(r, i, seen), quantization=r.text("quantization"), dtype=r.text("dtype"),
        tensor_parallel_size=r.positive_int("tensor_parallel_size"),
        max_model_len=r.positive_int("max_model_len"), kv_cache_dtype=r.text("kv_cache_dtype"),
        gpu_memory_utilization=r.fraction("gpu_memory_utilization"),
        enforce_eager=r.flag("enforce_eager"), load_format=r.text("load_format"),
        engine_args=r.strings("engine_args"),
    )


def _workload(r: _Reader, name: str, base: MatrixWorkload | None) -> MatrixWorkload:
    b = base or MatrixWorkload()
    return MatrixWorkload(
        name=name, workload=r.text("workload") or b.workload,
        concurrency=r.levels("concurrency") or b.concurrency,
        input_len=r.positive_int("input_len") or b.input_len,
        output_len=r.positive_int("output_len") or b.output_len,
        num_requests=r.positive_int("num_requests") or b.num_requests,
    )


def parse_matrix(doc: Mapping[str, Any], source: str) -> Matrix:
    """The matrix in ``doc`` (a parsed TOML document) as cells, in order model, GPU, engine,
    workload. ``source`` names the file in messages. Raises :class:`MatrixError` (one line:
    file, key, problem) for an unknown key, a wrong type or value, a missing ``models`` or
    ``gpus``, a name used twice, or a workload without lengths or a workload file.
    """
    r = _Reader(source, doc, "", TOP_KEYS)
    models, gpus = r.strings("models", required=True), r.strings("gpus", required=True)
    base = _workload(r, "default", None)
    frontier = r.flag("frontier")
    endpoint = r.text("endpoint")
    run_args = r.strings("run_args")
    gpus_per_node = r.positive_int("gpus_per_node") or 1
    max_nodes = r.positive_int("max_nodes") or 1
    seen: set[str] = set()
    engines = [_engine(source, t, i, seen) for i, t in enumerate(_tables(r, "engines"))]
    seen = set()
    workloads = []
    for i, t in enumerate(_tables(r, "workloads")):
        wr = _Reader(source, t, f"workloads[{i}].", WORKLOAD_KEYS)
        workloads.append(_workload(wr, _named(wr, i, seen), base))
    workloads = workloads or [base]
    for i, w in enumerate(workloads):
        where = f"workloads[{i}]." if r.table.get("workloads") else ""
        if w.workload is None and (w.input_len is None or w.output_len is None):
            r.fail(where + "input_len", "give input_len and output_len (tokens), or a "
                   "workload file or name (workload = \"chat\")")
        if frontier and w.concurrency:
            r.fail(where + "concurrency", "frontier = true chooses the concurrencies itself; "
                   "drop the concurrency list")
    cells: list[Cell] = []
    for model in models:
        for gpu in gpus:
            for engine in engines or [EngineConfig()]:
                for wl in workloads:
                    cells.append(Cell(len(cells) + 1, model, gpu, engine, wl, endpoint,
                                      frontier, run_args))
    return Matrix(r.text("name") or "matrix", source, tuple(cells), gpus_per_node, max_nodes,
                  gpus)


def cell_run_args(cell: Cell, results_dir: str, pipeline_parallel: int = 1) -> list[str]:
    """The ``infer-prof run`` options (after ``run``) that measure ``cell``, its files written
    to ``results_dir`` and not recorded in a history (the driver records them when they come
    home). ``pipeline_parallel`` > 1 adds vLLM's multi-node options
    (:func:`infer_prof.core.planning.multinode.multinode_engine_args`)."""
    from infer_prof.core.planning.multinode import multinode_engine_args

    e, w = cell.engine, cell.workload
    args = ["--model", cell.model, "--results-dir", results_dir, "--no-history",
            "--label", f"matrix_cell={cell.cell_id}"]
    if cell.gpu != CPU:
        args += ["--gpu", cell.gpu]
    if cell.endpoint:
        args += ["--endpoint", cell.endpoint]
    if w.workload:
        args += ["--workload", w.workload]
    if cell.frontier:
        args += ["--frontier"]
    elif w.concurrency:
        args += ["--concurrency", ",".join(str(c) for c in w.concurrency)]
    for flag, value in (("--input-len", w.input_len), ("--output-len", w.output_len),
                        ("--num-requests", w.num_requests), ("--quantization", e.quantization),
                        ("--dtype", e.dtype), ("--max-model-len", e.max_model_len),
                        ("--kv-cache-dtype", e.kv_cache_dtype),
                        ("--gpu-memory-utilization", e.gpu_memory_utilization),
                        ("--load-format", e.load_format)):
        if value is not None:
            args += [flag, str(value)]
    tp = e.tensor_parallel_size
    if tp is not None and pipeline_parallel == 1:
        args += ["--tensor-parallel-size", str(tp)]
    if e.enforce_eager:
        args += ["--enforce-eager"]
    extra = list(e.engine_args)
    if pipeline_parallel > 1:
        extra += multinode_engine_args(tp or 1, pipeline_parallel)
        args += ["--gpus", str((tp or 1) * pipeline_parallel)]
    for a in extra:
        args.append(f"--engine-arg={a}")
    return [*args, *cell.run_args]
