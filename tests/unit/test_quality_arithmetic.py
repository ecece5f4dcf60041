"""The quality check's pure arithmetic (core/quality): match rules, task file parsing, the
Wilson interval, the paired bootstrap, perplexity and top-k KL, on values worked by hand."""

import math

import pytest

from infer_prof.core.quality.intervals import paired_bootstrap_difference, wilson_interval
from infer_prof.core.quality.likelihood import kl_top_k, mean_kl, perplexity
from infer_prof.core.quality.tasks import TaskFileError, TaskItem, is_correct, parse_task_lines


def test_wilson_interval_matches_the_closed_form():
    # 8 of 10 at z = 1.96: the published Wilson interval is [0.4902, 0.9433]
    iv = wilson_interval(8, 10)
    assert iv.value == 0.8
    assert iv.low == pytest.approx(0.4902, abs=1e-4)
    assert iv.high == pytest.approx(0.9433, abs=1e-4)
    assert iv.level == pytest.approx(0.95, abs=1e-4)
    edge = wilson_interval(0, 20)  # never below 0, above 0 at the top
    assert edge.low == 0.0 and 0.1 < edge.high < 0.2
    assert wilson_interval(20, 20).high == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 0)


def test_paired_bootstrap_difference_brackets_the_difference_and_is_seeded():
    a = [True] * 90 + [False] * 10
    b = [True] * 60 + [False] * 40
    iv = paired_bootstrap_difference(a, b)
    assert iv.value == pytest.approx(0.30)
    assert iv.low < 0.30 < iv.high
    assert iv.low > 0.15 and iv.high < 0.45  # 100 items: about +-0.1 at 95 %
    assert paired_bootstrap_difference(a, b) == iv  # same seed, same interval
    same = paired_bootstrap_difference(a, a)  # identical outcomes: no variation at all
    assert (same.value, same.low, same.high) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        paired_bootstrap_difference(a, b[:5])


def test_perplexity_is_exp_of_mean_negative_logprob():
    assert perplexity([math.log(0.5)] * 4) == pytest.approx(2.0)
    assert perplexity([math.log(0.25), math.log(1.0)]) == pytest.approx(2.0)  # exp(ln4 / 2)
    with pytest.raises(ValueError):
        perplexity([])


def test_kl_top_k_equals_the_full_kl_when_top_k_covers_everything():
    p = {"a": 0.7, "b": 0.2, "c": 0.1}
    q = {"a": 0.5, "b": 0.3, "c": 0.2}
    full = sum(p[t] * math.log(p[t] / q[t]) for t in p)
    lp = {t: math.log(v) for t, v in p.items()}
    lq = {t: math.log(v) for t, v in q.items()}
    assert kl_top_k(lp, lq) == pytest.approx(full)
    assert kl_top_k(lp, lp) == pytest.approx(0.0, abs=1e-12)
    assert mean_kl([lp, lp], [lq, lp]) == pytest.approx(full / 2)


def test_kl_top_k_coarsens_the_rest_into_one_bucket():
    # reference top-2 of a larger vocabulary; the candidate lacks "b" in its top-2
    lp = {"a": math.log(0.6), "b": math.log(0.3)}  # rest 0.1
    lq = {"a": math.log(0.5), "c": math.log(0.2)}  # "b" gets 0.2 (its smallest): rest 0.3
    want = 0.6 * math.log(0.6 / 0.5) + 0.3 * math.log(0.3 / 0.2) + 0.1 * math.log(0.1 / 0.3)
    assert kl_top_k(lp, lq) == pytest.approx(want)


def test_match_rules():
    exact = TaskItem("q", "Paris", "exact")
    assert is_correct(exact, " Paris\nmore") and not is_correct(exact, "Paris.")
    number = TaskItem("3+4=", "7", "number")
    assert is_correct(number, "7\n") and is_correct(number, " 7.0 apples")
    assert not is_correct(number, "17") and not is_correct(number, "no number")
    regex = TaskItem("q", r"\bblue\b", "regex")
    assert is_correct(regex, "the sky is blue") and not is_correct(regex, "blueish")
    choice = TaskItem("q", "B", "choice", ("A", "B", "C"))
    assert is_correct(choice, " b) because") and not is_correct(choice, "A")
    longest = TaskItem("q", "no", "choice", ("n", "no"))
    assert is_correct(longest, "no way") and not is_correct(longest, "nay")


def test_task_file_lines_parse_and_bad_lines_name_their_line():
    items = parse_task_lines(
        '{"prompt": "1+1=", "answer": "2", "match": "number"}\n\n'
        '{"prompt": "pick", "answer": "B", "match": "choice", "choices": ["A", "B"]}\n', "t.jsonl")
    assert items == [TaskItem("1+1=", "2", "number"), TaskItem("pick", "B", "choice", ("A", "B"))]
    bad = {
        '{"prompt": "x", "answer": "2"': "t.jsonl:1: not JSON",
        '{"prompt": "x", "answer": "2", "match": "fuzzy"}': "match 'fuzzy' is not one of",
        '{"prompt": "", "answer": "2", "match": "exact"}': "'prompt' missing",
        '{"prompt": "x", "answer": "two", "match": "number"}': "needs a number",
        '{"prompt": "x", "answer": "(", "match": "regex"}': "not a regular expression",
        '{"prompt": "x", "answer": "C", "match": "choice", "choices": ["A"]}': "not one of its",
        '[1, 2]': "not a JSON object",
    }
    for line, says in bad.items():
        with pytest.raises(TaskFileError, match=r".*") as err:
            parse_task_lines(line, "t.jsonl")
        assert says in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(TaskFileError, match="no task items"):
        parse_task_lines("\n\n", "t.jsonl")


def test_shipped_addition_set_is_what_trained_tiny_generates():
    from infer_prof.catalog import trained_tiny as t

    assert t.ADDITION_TASKS.read_text().splitlines() == t.task_lines()
    assert t.ADDITION_TEXT.read_text().splitlines() == t.text_lines()
    items = parse_task_lines(t.ADDITION_TASKS.read_text(), "addition.jsonl")
    assert len(items) == 100 and len({i.prompt for i in items}) == 100  # every sum once


def test_quality_spec_parsing():
    from infer_prof.quality.spec import QualityInputError, parse_spec

    built_in = parse_spec("addition")
    assert len(built_in.items) == 100 and built_in.text_lines and built_in.tasks_sha256
    for bad, says in {"nope": "give addition", "tasks=": "give addition",
                      "text=/no/such/file": "text /no/such/file",
                      "tasks=x.jsonl,top_k=many": "integers"}.items():
        with pytest.raises(QualityInputError, match=r".*") as err:
            parse_spec(bad)
        assert says in str(err.value)


def test_random_weights_are_told_from_trained_ones(tmp_path):
    """run --quality: dummy load format, a random weights decision, or tiny-llama's marker
    (generated, never trained) make the check not measured; tiny-adder's marker does not."""
    import json
    from types import SimpleNamespace

    from infer_prof.results.model_sections import WeightsUsed
    from infer_prof.run.quality_phase import random_weights_reason

    def ctx(load_format=None, weights=None, generator=None):
        folder = tmp_path / str(generator)
        folder.mkdir(exist_ok=True)
        if generator:
            (folder / "infer_prof_tiny.json").write_text(json.dumps({"generator": generator}))
        return SimpleNamespace(load_format=load_format, weights=weights, engine_path=str(folder),
                               model=SimpleNamespace(name="m"))

    assert random_weights_reason(ctx("dummy")) == "random weights (--load-format dummy)"
    assert random_weights_reason(ctx(weights=WeightsUsed(weights="random"))) == "random weights"
    assert "never trained" in random_weights_reason(ctx(generator="infer_prof.tinymodel"))
    assert random_weights_reason(ctx(generator="infer_prof.catalog.trained_tiny")) is None
    assert random_weights_reason(ctx(weights=WeightsUsed(weights="real"))) is None
