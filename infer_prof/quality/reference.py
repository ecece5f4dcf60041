"""``--quality-reference RESULT`` and ``--min-quality SHARE``: this check against a reference
run of the same model (a higher precision), on the same task file and text.

- accuracy difference (here - reference) with a paired bootstrap interval over the items
  (``core.quality.intervals``), and ``quality_share`` = accuracy here / reference accuracy;
- perplexity ratio, here / reference;
- mean KL(reference || here) from the top-k log-probabilities, token by token
  (``core.quality.likelihood``), over the positions of text lines both tokenized alike.

``below_floor`` is true when ``quality_share < min_quality``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import msgspec

from infer_prof.core.quality.intervals import paired_bootstrap_difference
from infer_prof.core.quality.likelihood import kl_top_k
from infer_prof.quality.spec import QualityInputError
from infer_prof.results.quality_sections import Quality, QualityReference, decode_quality


@dataclass(frozen=True)
class Reference:
    """A reference run's quality section, where it came from, its run id and precision."""

    path: str
    quality: Quality
    run_id: str | None
    precision: str | None


def load_reference(path: str) -> Reference:
    """The ``quality`` section of a run result or of ``infer-prof quality --output``. Raises
    QualityInputError when the file cannot be read or holds no measured quality."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise QualityInputError(f"--quality-reference {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise QualityInputError(f"--quality-reference {path}: not JSON ({exc})") from None
    section = data.get("quality") if isinstance(data, dict) else None
    if not isinstance(section, dict):
        raise QualityInputError(f"--quality-reference {path}: no quality section; give a result "
                                "of `run --quality` or a file of `infer-prof quality --output`")
    try:
        q = decode_quality(section)
    except msgspec.ValidationError as exc:
        raise QualityInputError(f"--quality-reference {path}: bad quality section ({exc})") \
            from None
    if q.status != "measured":
        raise QualityInputError(f"--quality-reference {path}: its quality is {q.status} "
                                f"({q.reason}); give a reference whose quality was measured")
    return Reference(path, q, data.get("run_id"), data.get("precision"))


def check_same(ref: Reference, model: str, tasks_sha256: str | None,
               text_sha256: str | None) -> None:
    """Raise QualityInputError when the reference is of another model or read other files
    (known before the check runs)."""
    q = ref.quality
    if q.model != model:
        raise QualityInputError(f"--quality-reference {ref.path} is of model {q.model!r}, this "
                                f"check's is {model!r}; give a reference run of the same model")
    for what, here, there in (("task file", tasks_sha256, q.tasks_sha256),
                              ("text", text_sha256, q.text_sha256)):
        if here != there:
            raise QualityInputError(f"--quality-reference {ref.path} used another {what} "
                                    f"(SHA-256 {str(there)[:12]}, here {str(here)[:12]}); give "
                                    "the same files to both")


def compare(here: Quality, ref: Reference, min_quality: float | None) -> None:
    """Fill ``here.reference`` (and ``below_floor`` when ``min_quality`` is given)."""
    there = ref.quality
    out = QualityReference(result=ref.path, run_id=ref.run_id, precision=ref.precision,
                           accuracy=there.accuracy, perplexity=there.perplexity)
    if here.outcomes and len(here.outcomes) == len(there.outcomes):
        iv = paired_bootstrap_difference([o.correct for o in here.outcomes],
                                         [o.correct for o in there.outcomes])
        out.accuracy_difference, out.accuracy_difference_low = iv.value, iv.low
        out.accuracy_difference_high = iv.high
        out.accuracy_difference_method = f"{iv.method}, {iv.level:.0%}"
    if here.accuracy is not None and there.accuracy:
        out.quality_share = here.accuracy / there.accuracy
    if here.perplexity is not None and there.perplexity:
        out.perplexity_ratio = here.perplexity / there.perplexity
    kls = []
    for mine, theirs in zip(here.passages, there.passages, strict=False):
        if [t.token for t in mine.tokens] != [t.token for t in theirs.tokens]:
            continue  # tokenized differently: no position-by-position pairing
        kls += [kl_top_k(b.top, a.top) for a, b in zip(mine.tokens, theirs.tokens, strict=True)
                if a.top and b.top]
    if kls:
        out.mean_kl, out.kl_tokens = sum(kls) / len(kls), len(kls)
    here.reference = out
    if min_quality is not None:
        here.min_quality = min_quality
        if out.quality_share is not None:
            here.below_floor = out.quality_share < min_quality
        elif there.accuracy == 0 and here.accuracy is not None:
            here.below_floor = False
