"""Typed result fixtures: a :class:`Result` from only the sections a test is about, and the
shipped JSON Schema's validator."""

from __future__ import annotations

import functools
from typing import Any

from infer_prof.results.document import Result, decode_result, json_schema


def result_of(**sections: Any) -> Result:
    """A result holding ``sections`` (as JSON objects, the way a run writes them) and the header
    every result has (kind, schema version, run id, an empty config and summary unless given)."""
    doc: dict[str, Any] = {"kind": "infer-prof.run", "schema_version": 1, "run_id": "r",
                           "config": {}, "summary": {}}
    return decode_result({**doc, **sections})


@functools.cache
def _result_validator() -> Any:
    """The validator of :func:`json_schema`, made once: the schema is checked against its
    metaschema (2020-12) here, once per session."""
    import jsonschema

    schema = json_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_result(doc: Any) -> None:
    """``jsonschema.validate(doc, json_schema())``: raises the best-matching
    ``jsonschema.ValidationError`` when ``doc`` does not match the result schema. The same check,
    without re-checking the whole schema against its metaschema on every call (0.6-1 s each on
    the 2-core VM)."""
    import jsonschema

    error = jsonschema.exceptions.best_match(_result_validator().iter_errors(doc))
    if error is not None:
        raise error
