"""A matrix cell's ``matrix`` section as types: the matrix, the cell
(:class:`~infer_prof.core.planning.matrix.MatrixCellRecord`), the attempt and where it ran.

Built by ``run.matrix_record`` (the section), ``run.matrix_local`` and ``run.matrix_ray`` (the
placement), ``run.matrix_cell.node_facts`` (the node). Keys a placement does not have are
``msgspec.UNSET`` and left out: a cell run here is placed ``{"where": "here"}``, a Ray cell by
its node's ids, IP and accelerator type (None while its node is not known).
"""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import UNSET, UnsetType

from infer_prof.core.planning.matrix import MatrixCellRecord
from infer_prof.results.document_base import Section


class NodeFacts(Section):
    """The machine a cell ran on, as it recorded itself (``run.matrix_cell.node_facts``): host
    name, infer-prof version, the GPUs NVML sees (names and catalog keys), and the placement the
    driver gave it (``where`` here; a Ray node's ``node_id``, ``ip`` and
    ``accelerator_type``)."""

    hostname: str | None = None
    infer_prof_version: str | None = None
    gpus: list[str] = []
    gpu_keys: list[str] = []
    where: Literal["here"] | UnsetType = UNSET
    node_id: str | None | UnsetType = UNSET
    ip: str | None | UnsetType = UNSET
    accelerator_type: str | None | UnsetType = UNSET


class Placement(Section):
    """Where one attempt at a cell ran: ``where = "here"`` (this machine), or a Ray node's ids,
    IP and accelerator type; ``node`` once the cell reported back (left out for a cell that never
    did)."""

    where: Literal["here"] | UnsetType = UNSET
    ray_node_id: str | None | UnsetType = UNSET
    node_id: str | None | UnsetType = UNSET
    ip: str | None | UnsetType = UNSET
    accelerator_type: str | None | UnsetType = UNSET
    node: NodeFacts | UnsetType = UNSET


class MatrixSection(Section):
    """A matrix cell's result: the matrix's ``name`` and ``file``, the ``cell``, which
    ``attempt`` (from 1; a cell whose node was lost is tried once more elsewhere) and its
    ``placement``."""

    name: str
    file: str
    cell: MatrixCellRecord
    attempt: int = 1
    placement: Placement = msgspec.field(default_factory=Placement)

