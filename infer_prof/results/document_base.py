"""What every section of the result document is built on (:mod:`infer_prof.results.document`):
the section base class, an open JSON object, and a distribution."""

from __future__ import annotations

from typing import Any

import msgspec

from infer_prof.core.measurement.distribution_record import Distribution as Distribution

#: A JSON object whose shape is documented by the module that builds it.
Obj = dict[str, Any]


class Section(msgspec.Struct, kw_only=True, omit_defaults=False):
    """Every section: keyword construction; keys an older or newer file adds are ignored on
    load (:func:`infer_prof.results.document.undeclared_keys` finds them when writing)."""
