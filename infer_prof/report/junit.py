"""JUnit XML for CI systems: one test case per gated metric, a failure for each regression."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from infer_prof.core.analysis.regression import MetricComparison


def _num(v: float | None, digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def describe(c: MetricComparison) -> str:
    """One line: baseline -> current, change, CI, p-value, threshold, method, the confirming
    rerun (when there was one), and the note (for a gate over runs: the run-to-run spread and the
    smallest change it could see)."""
    ci = (
        f"CI [{_num(c.ci_low_pct)}%, {_num(c.ci_high_pct)}%]"
        if c.ci_low_pct is not None and c.ci_high_pct is not None
        else "CI n/a"
    )
    sig = {True: "significant", False: "not significant", None: "significance unknown"}[
        c.significant
    ]
    text = (
        f"{c.name} ({c.statistic}, {c.direction} is better): {c.baseline:.4g} -> {c.current:.4g}, "
        f"change {_num(c.change_pct)}%, {ci}, p={_num(c.p_value, 4)}, {sig}, "
        f"threshold {c.threshold_pct:g}%; {c.method}; n={c.n_baseline} vs {c.n_current}"
    )
    if c.confirm_current is not None:
        text += (
            f"; confirming rerun: {c.confirm_current:.4g}, change {_num(c.confirm_change_pct)}%, "
            f"{'a regression too' if c.confirm_regression else 'not a regression'}"
        )
    return f"{text}; {c.note}" if c.note else text


def junit_xml(
    comparisons: Sequence[MetricComparison],
    suite: str = "infer-prof regress",
    properties: dict[str, str] | None = None,
) -> str:
    """A JUnit XML document: ``<testsuites><testsuite name=suite>`` with one ``<testcase
    classname="infer_prof.regress" name=METRIC>`` per comparison; regressions carry a
    ``<failure type="regression">``, every case a ``<system-out>`` with :func:`describe`."""
    failures = sum(1 for c in comparisons if c.regression)
    root = ET.Element("testsuites", tests=str(len(comparisons)), failures=str(failures))
    ts = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(comparisons)),
        failures=str(failures),
        errors="0",
        skipped="0",
    )
    if properties:
        props = ET.SubElement(ts, "properties")
        for k, v in properties.items():
            ET.SubElement(props, "property", name=k, value=v)
    for c in comparisons:
        tc = ET.SubElement(ts, "testcase", classname="infer_prof.regress", name=c.name)
        if c.regression:
            f = ET.SubElement(
                tc,
                "failure",
                type="regression",
                message=f"{c.name} changed {_num(c.change_pct)}% "
                + (f"and {_num(c.confirm_change_pct)}% in the confirming rerun "
                   if c.confirm_change_pct is not None else "")
                + f"(threshold {c.threshold_pct:g}%, {c.direction} is better)",
            )
            f.text = describe(c)
        out = ET.SubElement(tc, "system-out")
        out.text = describe(c)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
