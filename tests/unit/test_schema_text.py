"""The shipped JSON Schemas are written by ``schema_text_of``: its text must not depend on how
a msgspec release dedents a docstring, and must still change with any change of a field, a type
or a required key (which is what the shipped-schema tests exist to catch)."""

import json

import msgspec

from infer_prof.results.document import (
    Result,
    dedented_descriptions,
    schema_text_of,
    struct_schema,
)


class Point(msgspec.Struct):
    """One measured load: its concurrency and
    its output rate (tok/s).

    Indented continuation lines, as a docstring has them."""

    concurrency: int
    output_tok_s: float | None = None


class PointDedented(msgspec.Struct):
    """One measured load: its concurrency and
its output rate (tok/s).

Indented continuation lines, as a docstring has them."""

    concurrency: int
    output_tok_s: float | None = None


class PointNewType(msgspec.Struct):
    """One measured load: its concurrency and
    its output rate (tok/s).

    Indented continuation lines, as a docstring has them."""

    concurrency: float
    output_tok_s: float | None = None


class PointRequiredRate(msgspec.Struct):
    """One measured load: its concurrency and
    its output rate (tok/s).

    Indented continuation lines, as a docstring has them."""

    concurrency: int
    output_tok_s: float | None


class PointNewField(msgspec.Struct):
    """One measured load: its concurrency and
    its output rate (tok/s).

    Indented continuation lines, as a docstring has them."""

    concurrency: int
    output_tok_s: float | None = None
    gpus: int = 1


def _text(kind: type) -> str:
    return schema_text_of(kind, "point").replace(kind.__name__, "Point")


def test_a_docstrings_indentation_does_not_change_the_text():
    assert _text(Point) == _text(PointDedented)
    description = struct_schema(Point, "point")["$defs"]["Point"]["description"]  # type: ignore[index]
    assert description == ("One measured load: its concurrency and\nits output rate (tok/s).\n\n"
                           "Indented continuation lines, as a docstring has them.")


def test_a_changed_type_required_key_or_field_changes_the_text():
    base = _text(Point)
    for changed in (PointNewType, PointRequiredRate, PointNewField):
        assert _text(changed) != base, changed.__name__


def test_every_description_of_the_result_schema_is_dedented():
    schema = struct_schema(Result, "infer-prof result")
    descriptions = [d.get("description", "") for d in schema["$defs"].values()]  # type: ignore[attr-defined]
    assert descriptions and all("\n " not in d for d in descriptions)
    json.dumps(schema)


def test_descriptions_as_an_older_msgspec_writes_them_are_dedented():
    """msgspec 0.22 copies ``__doc__`` as it is (continuation lines indented); 0.23 dedents."""
    raw = {"$defs": {"A": {"description": "first\n    second\n\n    third",
                           "properties": {"x": {"description": "  one\n  two"}},
                           "examples": [{"description": "a\n    b"}]}}}
    assert dedented_descriptions(raw) == {"$defs": {"A": {
        "description": "first\nsecond\n\nthird",
        "properties": {"x": {"description": "one\ntwo"}},
        "examples": [{"description": "a\nb"}]}}}
