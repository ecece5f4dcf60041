"""An ``infer-prof estimate --json`` file as frontier curves, for the HTML report to draw
dashed beside measured ones (``infer-prof report --predicted FILE``)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from infer_prof.core.analysis.frontier import make_point
from infer_prof.core.analysis.frontier_compare import Curve
from infer_prof.estimate.document import EstimateDocument


class EstimateFileError(ValueError):
    """A file that is not an ``estimate --json`` document; the message says which and why."""


def load_estimate(path: Path) -> EstimateDocument:
    """Read an ``estimate --json`` file; :class:`EstimateFileError` in one line otherwise."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=EstimateDocument)
    except OSError as exc:
        raise EstimateFileError(f"--predicted {path}: {exc.strerror or exc}") from None
    except msgspec.ValidationError as exc:
        raise EstimateFileError(f"--predicted {path}: not an infer-prof estimate --json file "
                                f"({exc})") from None
    except msgspec.DecodeError:
        raise EstimateFileError(f"--predicted {path}: not JSON") from None


def predicted_curves(doc: EstimateDocument) -> list[Curve]:
    """One curve per row: its predicted points (tokens/s per GPU; TPOT p50 = p90, the model has
    no spread) at the row's price per GPU-hour; configuration ``<precision> · predicted``."""
    out = []
    for r in doc.rows:
        usd = r.instance.usd_per_gpu_hour if r.instance is not None else None
        points = tuple(make_point(p.concurrency, p.tpot_ms_p50, p.tpot_ms_p50,
                                  p.output_tok_s_per_gpu, p.input_tok_s_per_gpu, 1, usd)
                       for p in r.points)
        out.append(Curve(
            gpu=f"{r.gpu_count}x {r.gpu}" if r.gpu_count > 1 else r.gpu,
            instance=r.instance.instance_type if r.instance is not None else "",
            configuration=f"{r.precision} · predicted", points=points, usd_per_gpu_hour=usd,
            source="estimate"))
    return out
