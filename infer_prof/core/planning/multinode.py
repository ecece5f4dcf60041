"""A model larger than one node: pipeline parallel across nodes of one GPU type.

Pure. vLLM spreads a model over several machines with tensor parallel inside a node and
pipeline parallel across nodes (``--tensor-parallel-size`` = GPUs per node,
``--pipeline-parallel-size`` = nodes), its Ray executor placing one worker per GPU on a
placement group that spans the nodes (``--distributed-executor-backend ray``).

:func:`choose_pipeline` picks the fewest nodes whose GPUs hold the model and its load, asking a
``fits(total_gpus)`` callback (the planner over ``tp x pp`` GPUs: the per-GPU share of weights
and KV cache is the same whether the layers or the heads are split, to within the activation
and fixed overheads each GPU carries either way); :func:`multinode_engine_args` and
:func:`placement_bundles` are what the cell starts vLLM and reserves the GPUs with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Parallelism:
    """How a cell spreads its model: ``tensor`` GPUs per node x ``pipeline`` nodes."""

    tensor: int
    pipeline: int
    fits: bool  # whether the load fits at this size (False: the largest size tried, still short)

    @property
    def gpus(self) -> int:
        """GPUs in all: tensor x pipeline."""
        return self.tensor * self.pipeline

    @property
    def nodes(self) -> int:
        """Nodes the cell spans (one pipeline stage per node)."""
        return self.pipeline


def choose_pipeline(fits: Callable[[int], bool], gpus_per_node: int, max_nodes: int,
                    tensor: int | None = None) -> Parallelism:
    """The fewest nodes (pipeline stages, 1 to ``max_nodes``) on which ``fits(tp x pp)`` holds,
    ``tp`` = ``tensor`` or ``gpus_per_node``; when none fits, the largest size, ``fits=False``.
    Raises ValueError when ``tensor`` exceeds ``gpus_per_node`` (a stage is one node)."""
    tp = tensor or gpus_per_node
    if tp > gpus_per_node:
        raise ValueError(f"tensor_parallel_size {tp} is more than the {gpus_per_node} GPUs of "
                         "a node (gpus_per_node); pipeline stages span nodes, tensor ranks not")
    if gpus_per_node < 1 or max_nodes < 1:
        raise ValueError("gpus_per_node and max_nodes must be at least 1")
    for pp in range(1, max_nodes + 1):
        if fits(tp * pp):
            return Parallelism(tp, pp, True)
    return Parallelism(tp, max_nodes, False)


def multinode_engine_args(tensor: int, pipeline: int) -> list[str]:
    """vLLM's options for ``tensor`` GPUs per node x ``pipeline`` nodes on the Ray executor
    (``--flag=value`` form, so that they replace the single-node ``--tensor-parallel-size``)."""
    return [f"--tensor-parallel-size={tensor}", f"--pipeline-parallel-size={pipeline}",
            "--distributed-executor-backend=ray"]


def placement_bundles(tensor: int, pipeline: int, accelerator_resource: str
                      ) -> list[dict[str, float]]:
    """The placement group vLLM's Ray executor runs on: one bundle per GPU worker
    (``{"GPU": 1}``, as vLLM's own groups are made), each pinned to the cell's GPU type through
    its ``accelerator_type:<TYPE>`` resource, ``tensor x pipeline`` bundles in all (placed with
    the PACK strategy: a node's GPUs filled before the next node's)."""
    return [{"GPU": 1.0, accelerator_resource: 0.001} for _ in range(tensor * pipeline)]
