"""Reading a matrix file: TOML -> :class:`infer_prof.core.planning.matrix.Matrix`, GPU names
resolved against the catalog. Every problem is a :class:`ConfigError` of one line (file, key,
problem)."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

from infer_prof.catalog.gpus import find_gpu
from infer_prof.core.planning.matrix import CPU, Matrix, MatrixError, parse_matrix
from infer_prof.run.config import ConfigError


def read_matrix(path: str | Path) -> Matrix:
    """The matrix in the TOML file at ``path``; its ``gpus`` entries become catalog keys (an
    alias or NVML name is accepted), ``cpu`` stays ``cpu``. Raises ConfigError (one line)."""
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such matrix file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    try:
        matrix = parse_matrix(doc, str(p))
    except MatrixError as exc:
        raise ConfigError(str(exc)) from None
    keys: dict[str, str] = {}
    for i, name in enumerate(dict.fromkeys(c.gpu for c in matrix.cells)):
        if name.lower() in (CPU, "none"):
            keys[name] = CPU
            continue
        try:
            keys[name] = find_gpu(name).key
        except ValueError as exc:
            raise ConfigError(f"{p}: gpus[{i}]: {exc}, or cpu (this machine)") from None
    cells = tuple(replace(c, gpu=keys[c.gpu]) for c in matrix.cells)
    return replace(matrix, cells=cells, gpus=tuple(dict.fromkeys(keys.values())))
