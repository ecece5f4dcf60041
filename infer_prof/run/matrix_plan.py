"""What each matrix cell will be, before anything starts: the model checked, the planner's
verdict for the cell's GPU and load (the same pure planner ``infer-prof plan`` runs), and, for a
model larger than one node, the pipeline-parallel split across nodes of its type."""

from __future__ import annotations

from dataclasses import dataclass

from infer_prof.catalog.gpus import catalog, find_gpu
from infer_prof.catalog.models import ModelError, resolve_model
from infer_prof.core.planning.matrix import CPU, Cell, Matrix
from infer_prof.core.planning.multinode import Parallelism, choose_pipeline
from infer_prof.core.planning.plan_result import Plan
from infer_prof.core.planning.planner import PlanRequest, plan
from infer_prof.core.planning.precisions import PRECISION_LABELS, PlanError
from infer_prof.run.config import ConfigError
from infer_prof.run.engine_setup import engine_capabilities


@dataclass(frozen=True)
class CellPlan:
    """A cell's plan: the verdict line, the split (None: not planned, e.g. on a CPU or for a
    model without a known architecture) and the planner's result."""

    verdict: str
    parallelism: Parallelism | None
    plan: Plan | None

    @property
    def gpus(self) -> int:
        """GPUs the cell's engine holds (1 when not planned)."""
        return self.parallelism.gpus if self.parallelism else 1

    @property
    def pipeline(self) -> int:
        """Nodes the cell spans."""
        return self.parallelism.pipeline if self.parallelism else 1


def _load(cell: Cell) -> tuple[int, int, int]:
    w = cell.workload
    return max(w.concurrency or (16,)), w.input_len or 128, w.output_len or 128


def plan_cell(cell: Cell, matrix: Matrix) -> CellPlan:
    """The planner's verdict for ``cell`` (raises ConfigError for a model that cannot be
    resolved, a tensor-parallel size that does not fit a node or the model)."""
    try:
        model = resolve_model(cell.model, create_tiny=False)
    except ModelError as exc:
        try:  # a hub id whose config.json cannot be had here: the node may reach the hub
            model = resolve_model(cell.model, create_tiny=False, fetch=False)
        except ModelError:
            raise ConfigError(f"{matrix.source}: models: {exc}") from None
        if model.source != "hub":
            raise ConfigError(f"{matrix.source}: models: {exc}") from None
    if cell.gpu == CPU:
        return CellPlan("this machine as it is (run plans its engine when it starts)", None, None)
    if model.spec is None:
        return CellPlan(f"{cell.model}: architecture not known before the run (planned on "
                        "the node)", None, None)
    gpu = find_gpu(cell.gpu)
    spec = model.spec
    conc, inp, out = _load(cell)
    e = cell.engine
    results: dict[int, Plan] = {}

    def fits(gpus: int) -> bool:
        try:
            results[gpus] = plan(
                PlanRequest(spec, gpu, gpus=gpus, concurrency=conc, input_len=inp, output_len=out,
                gpu_memory_utilization=e.gpu_memory_utilization or 0.9,
                quantization=e.quantization or "auto", kv_cache_dtype=e.kv_cache_dtype or "auto",
                load_format=e.load_format, caps=engine_capabilities(True),
                catalog=list(catalog().values())), with_suggestions=False)
        except PlanError:
            return False
        return results[gpus].fits

    try:
        split = choose_pipeline(fits, matrix.gpus_per_node, matrix.max_nodes,
                                e.tensor_parallel_size)
    except ValueError as exc:
        raise ConfigError(f"{matrix.source}: engines: {exc}") from None
    p = results.get(split.gpus)
    if p is None or not p.fits:
        return CellPlan(f"nothing fits on up to {split.nodes} node(s) of {split.tensor} x "
                        f"{cell.gpu} (raise max_nodes, or quantize)", split, p)
    where = (f"{split.tensor} x {cell.gpu}" if split.pipeline == 1 else
             f"pipeline parallel over {split.pipeline} nodes of {split.tensor} x {cell.gpu}")
    queue = "fits the load" if p.fits_load else "runs, with queueing"
    label = PRECISION_LABELS.get(p.precision or "", p.precision)
    return CellPlan(f"{label} on {where}: {queue}", split, p)
