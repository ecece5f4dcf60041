"""The result document's one declaration (results/document.py): the shipped JSON Schema is
generated from it, a result of the wrong shape is caught before it is written, older files
load, and the schema accepts what the writer writes."""

import functools
import json
import subprocess
import sys

import jsonschema
import msgspec
import pytest

from infer_prof.results.document import (
    Result,
    check_document,
    decode_result,
    json_schema,
    schema_path,
    schema_text,
    undeclared_keys,
)
from infer_prof.results.schema import SCHEMA_VERSION, load_typed_result
from infer_prof.results.store import ResultTypeError, write_result
from tests.unit.typed_results import validate_result


def _doc(**more):
    doc = {"kind": "infer-prof.run", "schema_version": 1, "run_id": "r1", "config": {},
           "summary": {"requests_completed": 4, "requests_failed": 0,
                       "ttft_ms": {"count": 4, "mean": 2.0, "p50": 2.0, "p90": 3.0, "p99": 3.0,
                                   "max": 3.0, "min": 1.0, "std": 0.5}},
           "load": {"mode": "closed", "concurrency": 2},
           "cost": {"available": True, "usd_per_gpu_hour": 2.0, "gpus": 1,
                    "price": {"usd_per_hour": 2.0, "cloud": "aws"}}}
    doc.update(more)
    return doc


def test_the_shipped_schema_is_the_declaration():
    assert schema_path(SCHEMA_VERSION).read_text() == schema_text(), (
        "run: python scripts/write_result_schema.py")
    jsonschema.Draft202012Validator.check_schema(json_schema())


def test_a_good_document_reads_as_attributes():
    r = decode_result(_doc())
    assert isinstance(r, Result)
    assert r.summary.ttft_ms is not None and r.summary.ttft_ms.p99 == 3.0
    assert r.load is not None and r.load.mode == "closed"
    assert r.cost is not None and r.cost.price is not None and r.cost.price.cloud == "aws"
    assert check_document(_doc()) == []
    validate_result(_doc())


def test_an_undeclared_key_is_named_by_its_path():
    doc = _doc()
    doc["summary"]["ttft_ms"]["p95"] = 2.5
    doc["cost"]["price"]["colour"] = "blue"
    doc["surprise"] = 1
    assert sorted(undeclared_keys(doc)) == ["$.cost.price.colour", "$.summary.ttft_ms.p95",
                                            "$.surprise"]
    assert "undeclared key $.surprise" in check_document(doc)


@pytest.mark.parametrize("path, value, words", [
    (("load", "mode"), "sideways", "$.load.mode"),
    (("summary", "ttft_ms", "p50"), "fast", "$.summary.ttft_ms.p50"),
    (("cost", "available"), "yes", "$.cost.available"),
])
def test_a_value_of_the_wrong_type_is_named_by_its_path(path, value, words):
    doc = _doc()
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    problems = check_document(doc)
    assert len(problems) == 1 and words in problems[0]
    with pytest.raises(jsonschema.ValidationError):
        validate_result(doc)


def test_an_older_file_without_the_newer_sections_loads(tmp_path):
    old = {"kind": "infer-prof.run", "schema_version": 1, "run_id": "20260101-tiny-c1",
           "config": {"model": "tiny-llama"},
           "summary": {"requests_completed": 3, "requests_failed": 0,
                       "tpot_ms": {"p50": 10.0}, "output_throughput": 50.0}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    r = load_typed_result(path)
    assert r.summary.tpot_ms is not None and r.summary.tpot_ms.p50 == 10.0
    assert r.summary.tpot_ms.count is None  # not recorded: None, never 0
    assert r.cost is None and r.stream is None and r.complete is True
    assert r.summary.interactivity_tok_s_user == pytest.approx(100.0)  # derived on load


def test_writing_a_drifted_result_raises_under_the_tests_and_warns_otherwise(tmp_path):
    doc = _doc(surprise=1)
    with pytest.raises(ResultTypeError, match=r"undeclared key \$\.surprise"):
        write_result(tmp_path / "a.json", doc)  # the suite runs with INFER_PROF_STRICT_SCHEMA=1
    assert not (tmp_path / "a.json").exists()
    code = ("import sys; from pathlib import Path; from infer_prof.results.store import "
            "write_result; write_result(Path(sys.argv[1]), {'kind': 'infer-prof.run', "
            "'schema_version': 1, 'run_id': 'r', 'config': {}, 'summary': {}, 'surprise': 1})")
    env = {k: v for k, v in __import__("os").environ.items() if k != "INFER_PROF_STRICT_SCHEMA"}
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "b.json")],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "b.json").read_text())["surprise"] == 1  # nothing lost
    assert p.stderr.startswith("warning: result document does not match its declared type: "
                               "undeclared key $.surprise")


@functools.cache
def _result_type_info() -> msgspec.inspect.Type:
    """``msgspec.inspect.type_info(Result)``, made once (the metric table asks for a few hundred
    paths)."""
    return msgspec.inspect.type_info(Result)


def _declared(path: str) -> bool:
    """Whether a dotted result path (``summary.ttft_ms.p50``) is a field of :class:`Result`
    (a JSON-object section holds any key below it)."""
    info: object = _result_type_info()
    for part in path.split("."):
        while isinstance(info, msgspec.inspect.UnionType):  # X | None: the non-null member
            info = next(t for t in info.types if not isinstance(t, msgspec.inspect.NoneType))
        if isinstance(info, msgspec.inspect.DictType):
            return True  # an open section
        if not isinstance(info, msgspec.inspect.StructType):
            return False
        field = next((f for f in info.fields if f.encode_name == part), None)
        if field is None:
            return False
        info = field.type
    return True


def test_every_metric_of_the_metric_table_is_a_declared_field():
    """The metric table (core/measurement/metric_table.py) and the result type name the same fields:
    a metric added to the table without its field in results/document.py fails here."""
    from infer_prof.core.measurement.metric_table import METRICS, SUMMARY_STATS

    missing = []
    for m in METRICS:
        path = m.path.split("|")[0]  # what is written now; the rest are older files' places
        paths = [f"{path}.{s}" for s in SUMMARY_STATS] if m.kind == "latency" else [path]
        missing += [p for p in paths if not _declared(p)]
    assert not missing, f"declare these in results/document.py: {missing}"
    assert not _declared("summary.ttft_ms.p95") and not _declared("summary.nope")


def test_failure_kinds_are_the_documented_ones_and_others_are_refused():
    """``summary.failure_kinds`` keys are a declared set (docs/error-kinds.md's tables, plus
    ``http_<status>``): a kind the writer misspells is caught when the result is written."""
    import re
    from pathlib import Path

    from infer_prof.results.document import FAILURE_KINDS, is_failure_kind

    doc_text = (Path(__file__).resolve().parents[2] / "docs" / "error-kinds.md").read_text()
    documented = set(re.findall(r"^\| `([a-z_0-9]+)` \|", doc_text, re.M))
    assert documented == set(FAILURE_KINDS)
    good = _doc()
    good["summary"]["failure_kinds"] = {"http_503": 2, "timeout": 1, "server_died": 1}
    assert check_document(good) == []
    assert decode_result(good).summary.failure_kinds == {"http_503": 2, "timeout": 1,
                                                         "server_died": 1}
    bad = _doc()
    bad["summary"]["failure_kinds"] = {"time_out": 1}
    problems = check_document(bad)
    assert len(problems) == 1 and "$.summary.failure_kinds" in problems[0]
    with pytest.raises(jsonschema.ValidationError):
        validate_result(bad)
    assert is_failure_kind("http_404") and not is_failure_kind("http_") and \
        not is_failure_kind("time_out")


def test_the_warmup_end_is_a_declared_word():
    """``warmup.ended_by`` is a ``WarmupEnd``: the words the warm-up gates and
    core/measurement/warmup.py give, and nothing else."""
    from typing import get_args

    from infer_prof.core.measurement.warmup import WARMUP_JUDGED
    from infer_prof.loadgen.worker_shared import SharedWarmupGate
    from infer_prof.results.load_sections import WarmupEnd

    words = set(get_args(WarmupEnd))
    assert set(WARMUP_JUDGED) | {"requests"} == words
    assert set(SharedWarmupGate.REASONS) <= words
    for word in words:
        assert check_document(_doc(warmup={"mode": "steady", "ended_by": word})) == []
    problems = check_document(_doc(warmup={"mode": "steady", "ended_by": "stedy"}))
    assert len(problems) == 1 and "$.warmup.ended_by" in problems[0]


def test_the_slo_section_is_typed_as_core_slo_writes_it():
    """``slo`` is what ``core.workload.slo.SloReport.section`` builds, read by attribute (the
    console's SLO and goodput rows)."""
    from rich.console import Console

    from infer_prof.core.workload.slo import Slo, SloCheck, SloReport
    from infer_prof.report.console import totals_table

    checks = [SloCheck(Slo("ttft", "p99", 100.0), 120.0, False),
              SloCheck(Slo("tpot", "p50", 50.0), None, False)]
    block = SloReport(checks, good_requests=3, completed_requests=4, duration_s=2.0,
                      goodput=1.5, failures=["ttft_p99 120 > 100 ms"]).section()
    block = msgspec.to_builtins(block)  # as the result file holds it
    doc = _doc(slo=block, cost=None)
    assert check_document(doc) == []
    slo = decode_result(doc).slo
    assert slo is not None and slo.passed is False and slo.goodput == 1.5
    assert [c.slo for c in slo.checks] == ["ttft_p99", "tpot_p50"]
    assert slo.checks[1].value_ms is None  # not measured
    console = Console(width=200, record=True)
    console.print(totals_table(decode_result(doc)))
    text = console.export_text()
    assert "FAIL: ttft_p99 120 > 100 ms" in text and "1.500" in text
    bad = _doc(slo={**block, "passed": "no"})
    assert any("$.slo.passed" in p for p in check_document(bad))


def test_the_config_section_has_every_run_option_typed_as_declared():
    """The result's config is made from the option declarations: each option of `infer-prof
    run` is a field, typed as its declaration (or None for files that predate it), so an
    option added to its group is recorded and in the schema with nothing else changed."""
    import typing
    from dataclasses import fields as dc_fields

    from infer_prof.config.run_groups import SUB_CONFIGS
    from infer_prof.results.config_record import ConfigRecord, ResolvedConfig

    declared = {f.name for f in msgspec.structs.fields(ConfigRecord)}
    for kind in SUB_CONFIGS.values():
        hints = typing.get_type_hints(kind)
        for f in dc_fields(kind):
            assert f.name in declared, f.name
            if f.name not in ResolvedConfig.__struct_fields__:
                field = next(x for x in msgspec.structs.fields(ConfigRecord) if x.name == f.name)
                assert field.type == (hints[f.name] | None), f.name
    props = json_schema()["$defs"]["ConfigRecord"]["properties"]
    assert props["think_time_s"]["anyOf"][0]["type"] == "number"
    assert props["engine_args"]["anyOf"][0]["type"] == "array"


def test_a_misspelt_or_mistyped_config_key_is_caught_before_writing():
    from infer_prof.results.config_record import config_record

    with pytest.raises(TypeError, match="'modle'"):
        config_record({"modle": "tiny-llama"})
    with pytest.raises(msgspec.ValidationError, match=r"\$\.think_time_s"):
        config_record({"think_time_s": "soon"})
    doc = {"kind": "infer-prof.run", "schema_version": 1, "run_id": "r", "summary": {},
           "config": {"concurency": 4}}
    assert check_document(doc) == ["undeclared key $.config.concurency"]


def test_an_older_file_naming_the_rate_request_rate_reads_it_as_the_rate():
    doc = {"kind": "infer-prof.run", "schema_version": 1, "run_id": "r", "summary": {},
           "config": {"request_rate": 2.5, "model": "tiny-llama"}}
    config = decode_result(doc).config
    assert config.rate == 2.5 and config.model == "tiny-llama"
