"""Typed result fixtures: a :class:`Result` from only the sections a test is about."""

from __future__ import annotations

from typing import Any

from infer_prof.results.document import Result, decode_result


def result_of(**sections: Any) -> Result:
    """A result holding ``sections`` (as JSON objects, the way a run writes them) and the header
    every result has (kind, schema version, run id, an empty config and summary unless given)."""
    doc: dict[str, Any] = {"kind": "infer-prof.run", "schema_version": 1, "run_id": "r",
                           "config": {}, "summary": {}}
    return decode_result({**doc, **sections})
