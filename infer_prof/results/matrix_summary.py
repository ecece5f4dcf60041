"""The matrix summary file (``<stamp>-<name>.matrix.json``) as types: every attempt at every
cell (:class:`CellAttempt`), its status, placement and files, and the wall time of the whole
matrix (:class:`MatrixSummary`). ``run.matrix_record.write_summary`` builds it and
:func:`infer_prof.results.store.write_result` holds it to this type before writing; its JSON
Schema ships as ``results/schemas/matrix-v<N>.schema.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import msgspec

from infer_prof.core.planning.matrix import MatrixCellRecord
from infer_prof.results.document import schema_text_of, shipped_schema_path, type_problems
from infer_prof.results.document_base import Section
from infer_prof.results.matrix_sections import Placement

#: What became of one attempt at a cell: it ran to the end, stopped early (its node lost mid-cell,
#: or Ctrl-C), failed (no result), was skipped (it cannot run here), or was cancelled before
#: it started.
CellStatus = Literal["done", "incomplete", "failed", "skipped", "cancelled"]
MATRIX_SUMMARY_KIND: Literal["infer-prof-matrix"] = "infer-prof-matrix"


class CellAttempt(Section):
    """One attempt at one cell as the matrix summary lists it: the cell, its ``status`` and
    ``reason``, the attempt (from 1) and its placement, the result files it wrote, seconds from
    submission to its start on the node (``submit_to_start_s``, node clock minus driver clock)
    and its duration (s), and history writes that failed."""

    cell: MatrixCellRecord
    status: CellStatus
    reason: str | None = None
    attempt: int = 1
    placement: Placement = msgspec.field(default_factory=Placement)
    results: list[str] = []
    submit_to_start_s: float | None = None
    duration_s: float | None = None
    history_errors: list[str] = []


class MatrixSummary(Section):
    """The matrix summary file (``<stamp>-<name>.matrix.json``): the matrix's name and file,
    where its cells ran (``here`` or ``ray``), the wall time of the whole matrix (s), and every
    attempt at every cell."""

    kind: Literal["infer-prof-matrix"]
    name: str
    file: str
    mode: Literal["here", "ray"]
    wall_s: float
    cells: list[CellAttempt] = []


def check_matrix_summary(data: Any) -> list[str]:
    """What is wrong with a matrix summary built for writing, in words (empty when it matches
    :class:`MatrixSummary`): each undeclared key by its path, or the first value of a wrong
    type."""
    return type_problems(data, MatrixSummary)


def matrix_schema_text() -> str:
    """The JSON Schema (2020-12) of :class:`MatrixSummary` as the shipped file's text
    (``results/schemas/matrix-v<N>.schema.json``; sorted keys, 2-space indent)."""
    return schema_text_of(MatrixSummary, "infer-prof matrix summary")


def matrix_schema_path(version: int) -> Path:
    """Where the matrix summary's JSON Schema of ``schema_version`` ``version`` is shipped."""
    return shipped_schema_path("matrix", version)
