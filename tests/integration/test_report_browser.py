"""The HTML report in a real headless browser (Debian's Chromium).

Results come from real ``infer-prof run`` sweeps against the synthetic server (c = 1, 2, 4), plus
a copy of that sweep dressed as an "H100-SXM" run with a price, an energy figure and GPU
telemetry series: those are CONSTRUCTED here (no GPU on the test machine), so that every
section of the report has something to draw; the copy's records are the real ones with every
gap halved, and its summary is recomputed from them.

The page is served by a real ``http.server`` on 127.0.0.1 and driven through the DevTools
protocol (the stdlib WebSocket client in ``infer_prof.report.chromium``): console errors,
uncaught exceptions, failed or foreign network requests are collected and must be none;
every plot must have a rendered box and drawn marks; a full-page screenshot must be a
non-blank PNG. A control page with planted errors proves the collector catches them.

Needs ``/usr/bin/chromium``; install it with ``apt-get update && apt-get install -y chromium``.
"""

from __future__ import annotations

import base64
import copy
import http.server
import json
import os
import shutil
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infer_prof.core.catalog.prices import cost_report
from infer_prof.core.measurement.metrics import summarize_run
from infer_prof.report.chromium import CHROMIUM_FLAGS, chromium_devtools, open_page
from infer_prof.results.store import read_requests, write_requests

from .conftest import cli

CHROMIUM = "/usr/bin/chromium"
REQUIRED_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK),
        reason=f"{CHROMIUM} is absent: apt-get update && apt-get install -y chromium",
    ),
]


@pytest.fixture
def browser() -> Iterator[int]:
    """Headless Chromium with remote debugging (the report's own launcher, whose flags are
    --headless --no-sandbox --disable-gpu --disable-quic --no-first-run
    --disable-background-networking --disable-component-update --disable-sync and a
    throw-away --user-data-dir); yields the DevTools port."""
    for flag in REQUIRED_FLAGS:
        assert flag in CHROMIUM_FLAGS
    with chromium_devtools(CHROMIUM, extra_flags=["--window-size=1400,1000"]) as port:
        yield port


class Page:
    """What a page load produced: problems found, requests made, DOM facts, a screenshot."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.requested: list[str] = []
        self.plots: list[dict[str, Any]] = []
        self.screenshot = b""
        self.extra: Any = None  # what load_page's ``js`` returned
        self.element_shot = b""  # load_page's ``shoot`` element, at full scale


_PLOTS_JS = """
[...document.querySelectorAll('svg.plot')].map(s => {
  const r = s.getBoundingClientRect();
  const marks = [...s.querySelectorAll('polyline, circle, rect.bar')];
  const drawn = marks.filter(m => { const b = m.getBBox(); return b.width > 0 || b.height > 0; });
  return {name: s.dataset.plot, width: r.width, height: r.height, marks: marks.length,
          svgWidth: +s.getAttribute('width'), svgHeight: +s.getAttribute('height'),
          drawn: drawn.length, notMeasured: s.querySelectorAll('.not-measured').length};
})
"""


def load_page(
    port: int, url: str, origin: str, js: str | None = None, shoot: str | None = None
) -> Page:
    """Open ``url`` in a new tab; collect problems until the load event, then inspect it
    (``js``: an expression whose value is kept in ``page.extra``; ``shoot``: a CSS selector
    whose element is also captured on its own, at full scale)."""
    dt = open_page(port)
    page = Page()
    try:
        for domain in ("Runtime", "Log", "Network", "Page"):
            dt.call(f"{domain}.enable")
        dt.call("Page.navigate", url=url)
        dt.wait_for("Page.loadEventFired")
        dt.call("Runtime.evaluate", expression="1", awaitPromise=True)  # drain queued events
        for e in dt.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                page.problems.append(f"exception: {p['exceptionDetails'].get('text')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description"))) for a in p["args"])
                page.problems.append(f"console.{p['type']}: {args}")
            elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
                page.problems.append(f"log: {p['entry']['text']}")
            elif m == "Network.loadingFailed":
                page.problems.append(f"request failed: {p.get('errorText')}")
            elif m == "Network.responseReceived" and p["response"]["status"] >= 400:
                page.problems.append(f"HTTP {p['response']['status']}: {p['response']['url']}")
            elif m == "Network.requestWillBeSent":
                u = p["request"]["url"]
                page.requested.append(u)
                if not (u.startswith(origin + "/") or u.startswith("data:")):
                    page.problems.append(f"request outside the report: {u}")
        value = dt.call("Runtime.evaluate", expression=_PLOTS_JS, returnByValue=True)
        page.plots = value["result"]["value"]
        size = dt.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = dt.call(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 0.5},
        )
        page.screenshot = base64.b64decode(shot["data"])
        if js is not None:
            page.extra = dt.call("Runtime.evaluate", expression=js,
                                 returnByValue=True)["result"]["value"]
        if shoot is not None:
            box = dt.call("Runtime.evaluate", returnByValue=True, expression=(
                f"(() => {{const r = document.querySelector({json.dumps(shoot)})"
                ".getBoundingClientRect(); return {x: r.x + window.scrollX, "
                "y: r.y + window.scrollY, width: r.width, height: r.height};})()"
            ))["result"]["value"]
            part = dt.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                           clip={**box, "scale": 1})
            page.element_shot = base64.b64decode(part["data"])
    finally:
        dt.close()
    return page


# --------------------------------------------------------------------------- HTTP server


class _Handler(http.server.SimpleHTTPRequestHandler):
    served: list[tuple[str, int]] = []

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def send_response(self, code: int, message: str | None = None) -> None:
        self.served.append((self.path, code))
        super().send_response(code, message)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(folder: Path) -> tuple[str, list[tuple[str, int]]]:
        served: list[tuple[str, int]] = []
        handler = type("H", (_Handler,), {"served": served})

        def factory(*a: Any, **kw: Any) -> http.server.SimpleHTTPRequestHandler:
            return handler(*a, directory=str(folder), **kw)

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), factory)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}", served

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


# --------------------------------------------------------------------------- PNG checks


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    w, h = struct.unpack("!II", data[16:24])
    return w, h


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA, non-interlaced PNG: (width, height, rows of pixel bytes)."""
    w, h = png_size(data)
    depth, ctype, interlace = data[24], data[25], data[28]
    assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
    bpp = 3 if ctype == 2 else 4
    pos, idat = 8, b""
    while pos < len(data):
        (n,) = struct.unpack("!I", data[pos : pos + 4])
        if data[pos + 4 : pos + 8] == b"IDAT":
            idat += data[pos + 8 : pos + 8 + n]
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif f == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=True))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pr) & 0xFF
        rows.append(bytes(line if bpp == 3 else bytes(v for i, v in enumerate(line) if i % 4 != 3)))
        prev = line
    return w, h, rows


def ink(rows: list[bytes]) -> tuple[float, int]:
    """(share of pixels that are not near-white, distinct colours) of RGB rows."""
    dark = total = 0
    colours: set[bytes] = set()
    for row in rows:
        for i in range(0, len(row), 3):
            px = row[i : i + 3]
            total += 1
            if min(px) < 235:
                dark += 1
            if len(colours) < 5000:
                colours.add(px)
    return dark / total, len(colours)


# --------------------------------------------------------------------------- result fixtures


def _dress_as_gpu(result_path: Path, out_dir: Path) -> None:
    """Write a CONSTRUCTED "H100-SXM" copy of a real result: gaps halved, priced, telemetry."""
    result = json.loads(result_path.read_text())
    records = read_requests(result_path.parent / result["requests_file"])
    for r in records:
        if r.send_ns is not None:
            r.chunk_ns = [r.send_ns + (c - r.send_ns) // 2 for c in r.chunk_ns]
            r.done_ns = r.chunk_ns[-1] if r.done_ns is not None and r.chunk_ns else r.done_ns
    fake = copy.deepcopy(result)
    fake["run_id"] = result["run_id"] + "-h100"
    fake["requests_file"] = fake["run_id"] + ".requests.jsonl"
    fake["environment"].update({"gpu_name": "NVIDIA H100 80GB HBM3", "gpu_count": 1})
    fake["gpu"] = {"key": "H100-SXM", "count": 1, "how": "constructed by the test"}
    summary = summarize_run(records).to_dict()
    fake["summary"] = summary
    fake["cost"] = {
        "available": True,
        "reason": None,
        **cost_report(2.49, 1, summary["output_throughput"], summary["total_throughput"]),
        "price": {"provider": "test-constructed", "usd_per_hour": 2.49},
    }
    energy_j = 350.0 * (summary["duration_s"] or 0.0)
    fake["energy"] = {
        "energy_j": energy_j,
        "source": "constructed",
        "joules_per_output_token": energy_j / summary["total_output_tokens"],
        "reason": None,
    }
    n = 40
    t = [i * 0.05 for i in range(n)]
    util = [None if i == 17 else min(100.0, 5.0 + i * 4.0) for i in range(n)]
    fake["telemetry"]["gpu"] = {
        "available": True,
        "reason": None,
        "window": {"start_s": 0.2, "end_s": 1.8, "marked": True},
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "power_limit_w": 700.0,
                "series": {
                    "t_s": t,
                    "util_pct": util,
                    "power_w": [120.0 + 12.0 * i for i in range(n)],
                    "mem_used_bytes": [70 * 2**30] * n,
                    "sm_clock_mhz": [1980.0] * n,
                    "temp_c": [None] * n,
                },
            }
        ],
    }
    (out_dir / f"{fake['run_id']}.json").write_text(json.dumps(fake))
    write_requests(out_dir / fake["requests_file"], records)


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from infer_prof.run.calibrate import start_synthetic

    out = tmp_path_factory.mktemp("results")
    server = start_synthetic(20.0, 5.0, 16)
    try:
        for c in (1, 2, 4):
            res = cli(
                "run", "--endpoint", server.url, "--model", "llama-2-7b", "-c", str(c), "-n", "24",
                "--input-len", "32", "--output-len", "16", "--results-dir", str(out),
                "--no-progress",
            )  # fmt: skip
            assert res.returncode == 0, res.stderr
    finally:
        server.stop()
    for p in sorted(out.glob("*.json")):
        _dress_as_gpu(p, out)
    return out


# --------------------------------------------------------------------------- tests


def test_collector_catches_planted_errors(browser: int, serve: Any, tmp_path: Path) -> None:
    """Control: a page with a console error, an exception, a 404 and a foreign request."""
    (tmp_path / "bad.html").write_text(
        '<!doctype html><html><head><link rel="icon" href="data:,"></head><body>'
        '<img src="missing.png"><img src="http://127.0.0.1:1/x.png">'
        '<script>console.error("planted"); no_such_function();</script></body></html>'
    )
    origin, _ = serve(tmp_path)
    page = load_page(browser, f"{origin}/bad.html", origin)
    text = "\n".join(page.problems)
    assert "console.error: planted" in text
    assert "no_such_function" in text or "exception" in text
    assert "HTTP 404" in text
    assert "request outside the report: http://127.0.0.1:1/x.png" in text


def test_report_renders_in_chromium(
    browser: int, serve: Any, results_dir: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    pngs = tmp_path / "png"
    site.mkdir()
    res = cli("report", str(results_dir), "-o", str(site / "report.html"), "--png-dir", str(pngs))
    assert res.returncode == 0, res.stderr
    assert "6 runs" in res.stdout

    origin, served = serve(site)
    page = load_page(browser, f"{origin}/report.html", origin)
    assert page.problems == []
    assert served == [("/report.html", 200)]  # nothing else fetched: self-contained
    assert page.requested == [f"{origin}/report.html"]

    # every plot rendered with a real box and drawn marks (or says "not measured")
    names = [p["name"] for p in page.plots]
    expected = {
        "cdf_ttft", "cdf_tpot", "cdf_itl", "cdf_e2e", "sweep_concurrency_throughput",
        "sweep_concurrency_ttft", "sweep_concurrency_tpot", "sweep_concurrency_e2e",
        "cost_per_million",
    }  # fmt: skip
    assert expected <= set(names)
    assert sum("_util_pct" in n for n in names) == 3  # the three constructed H100 runs
    assert sum(n.endswith("_requests") for n in names) == 6  # /metrics of all six runs
    for p in page.plots:
        assert p["width"] > 300 and p["height"] > 150, p
        assert p["drawn"] > 0, p
    cost = next(p for p in page.plots if p["name"] == "cost_per_million")
    assert cost["drawn"] == 3 and cost["notMeasured"] == 3  # CPU runs have no price
    sweep = next(p for p in page.plots if p["name"] == "sweep_concurrency_throughput")
    assert sweep["drawn"] == 2 * 3 + 2  # 3 dots per GPU, one line each

    # full-page screenshot: a plausible, non-blank PNG
    (tmp_path / "report.png").write_bytes(page.screenshot)
    keep = os.environ.get("INFER_PROF_SCREENSHOT_DIR")
    if keep:
        shutil.copy(tmp_path / "report.png", Path(keep) / "report.png")
    w, h, rows = png_pixels(page.screenshot)
    assert 600 <= w <= 1000 and h > 1500, (w, h)  # 1400 CSS px at scale 0.5; a long page
    share, colours = ink(rows)
    assert 0.02 < share < 0.6, share
    assert colours > 50, colours

    # PNG of every plot, at 2x the SVG's size
    files = sorted(pngs.glob("*.png"))
    assert {f.stem for f in files} == set(names)
    for f in files:
        pw, ph = png_size(f.read_bytes())
        plot = next(p for p in page.plots if p["name"] == f.stem)
        assert (pw, ph) == (2 * plot["svgWidth"], 2 * plot["svgHeight"]), f.name
        assert f.stat().st_size > 10_000, f.name
    pw, ph, prow = png_pixels((pngs / "cdf_ttft.png").read_bytes())
    share, colours = ink(prow)
    assert 0.01 < share < 0.5 and colours > 20, (share, colours)


_BADGES_JS = """
[...document.querySelectorAll('table tbody tr')].filter(tr => tr.querySelector('td')).map(tr => {
  const badges = [...tr.querySelectorAll('.badge')].map(b => {
    const r = b.getBoundingClientRect();
    const st = getComputedStyle(b);
    return {cls: b.className, text: b.innerText, title: b.getAttribute('title'),
            width: r.width, height: r.height, display: st.display, visibility: st.visibility,
            colour: st.color};
  });
  return {run: tr.querySelector('td').innerText, badges: badges};
})
"""


def test_report_marks_an_invalid_run_with_its_reason(
    browser: int, serve: Any, tmp_path: Path
) -> None:
    """Two real runs against the synthetic server; one is invalid for real (24 requests where
    --min-requests asks for 50; both accept a window of 0.1 s). The report must show an
    "invalid" badge with the reason on that run's row, visible and in its title (hover), and
    none on the valid one."""
    from infer_prof.run.calibrate import start_synthetic

    out = tmp_path / "results"
    # 100 ms between tokens: the client-health checks (read lag p99 < half the ITL) hold even
    # with both cores busy elsewhere, so only --min-requests makes a run invalid here
    server = start_synthetic(20.0, 100.0, 4)
    try:
        for extra in ((), ("--min-requests", "50")):
            res = cli(
                "run", "--endpoint", server.url, "--model", "llama-2-7b", "-c", "2", "-n", "24",
                "--input-len", "32", "--output-len", "4", "--results-dir", str(out),
                "--no-progress", "--no-history", "--min-duration", "0.1", *extra,
            )  # fmt: skip
            assert res.returncode == 0, res.stderr
    finally:
        server.stop()
    results = sorted(out.glob("*.json"))
    docs = [json.loads(p.read_text()) for p in results]
    invalid = [r for r in docs if not r["validity"]["valid"]]
    assert len(results) == 2 and len(invalid) == 1, [(r["run_id"], r["validity"]) for r in docs]
    reason = "; ".join(invalid[0]["validity"]["reasons"])
    assert "50" in reason

    site = tmp_path / "site"
    site.mkdir()
    res = cli("report", str(out), "-o", str(site / "report.html"))
    assert res.returncode == 0, res.stderr
    origin, _ = serve(site)
    page = load_page(browser, f"{origin}/report.html", origin)
    assert page.problems == []
    dt = open_page(browser)
    try:
        dt.call("Page.enable")
        dt.call("Page.navigate", url=f"{origin}/report.html")
        dt.wait_for("Page.loadEventFired")
        rows = dt.call("Runtime.evaluate", expression=_BADGES_JS, returnByValue=True)
    finally:
        dt.close()
    rows = rows["result"]["value"]
    marked = [r for r in rows if r["badges"]]
    assert len(marked) == 1 and marked[0]["run"].startswith(invalid[0]["run_name"]), rows
    (badge,) = marked[0]["badges"]
    assert "invalid" in badge["cls"].split()
    assert badge["text"] == f"invalid: {reason}"
    assert badge["title"] == f"invalid: {reason}"
    assert badge["width"] > 20 and badge["height"] > 5
    assert badge["display"] != "none" and badge["visibility"] == "visible"
    assert badge["colour"] == "rgb(164, 14, 38)"  # the invalid badge's red, not the default
    # the valid run's row is there and carries no badge
    assert sum(1 for r in rows if not r["badges"]) >= 1

    # compare marks it too, in the table and in markdown
    for fmt in ("table", "markdown"):
        res = cli("compare", str(out), "--format", fmt)
        assert res.returncode == 0, res.stderr
        assert f"INVALID: {reason}" in res.stdout, res.stdout
        assert res.stdout.count("| ok |" if fmt == "markdown" else " ok ") == 1, res.stdout
    assert f"invalid runs: {invalid[0]['run_name']}" in res.stderr


_FRONTIER_JS = """
(() => {
  const out = {};
  for (const name of ['frontier_throughput', 'frontier_cost']) {
    const svg = document.querySelector(`svg[data-plot="${name}"]`);
    if (!svg) continue;
    out[name] = {
      series: [...svg.querySelectorAll('g.series')].map(g => ({
        name: g.dataset.series,
        lines: [...g.querySelectorAll('polyline')].map(p => p.getAttribute('points').split(' ')
          .length),
        dots: [...g.querySelectorAll('circle')].filter(c => c.getBBox().width > 0).length,
        rings: [...g.querySelectorAll('circle')].filter(c => c.getAttribute('fill') === '#ffffff')
          .length})),
      vlines: [...svg.querySelectorAll('line.vline')].map(l => l.getBoundingClientRect().height),
      vlabels: [...svg.querySelectorAll('text.vline-label')].map(t => t.textContent)};
  }
  out.table = [...document.querySelectorAll('table.frontier-at-target tbody tr')]
    .map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent));
  return out;
})()
"""


def test_frontier_charts_render_in_chromium(browser: int, serve: Any, tmp_path: Path) -> None:
    """Three frontiers written by hand (tests/unit/test_compare_frontiers: two sweeps whose TPOT
    grows with load, TPOT = a + b c, and a `run --frontier` result; one A100 point dominated):
    a curve each on tokens/s per GPU and on $ per 1M against interactivity, the Pareto points as
    dots, the dominated one as a ring, the target line, and the table at the target."""
    from tests.unit.test_compare_frontiers import (
        A100,
        H100,
        LOADS,
        frontier_result,
        point_result,
    )

    results = tmp_path / "results"
    results.mkdir()
    for gpu in (H100, A100):
        for c in LOADS:
            (results / f"{gpu.name}-c{c}.json").write_text(json.dumps(point_result(gpu, c)))
    slow = point_result(A100, 6)  # slower for users and less throughput than c4: off the front
    slow["summary"].update(output_throughput=100.0, total_throughput=500.0)
    (results / "A100-c6.json").write_text(json.dumps(slow))
    (results / "L4.json").write_text(json.dumps(frontier_result()))
    site = tmp_path / "site"
    site.mkdir()
    res = cli("report", str(results), "-o", str(site / "report.html"),
              "--target-interactivity", "60")
    assert res.returncode == 0, res.stderr
    origin, _ = serve(site)
    page = load_page(browser, f"{origin}/report.html", origin, js=_FRONTIER_JS,
                     shoot="#frontier")
    assert page.problems == []
    fr = page.extra
    tput = fr["frontier_throughput"]
    fronts = [s for s in tput["series"] if s["name"].endswith("· front")]
    paretos = [s for s in tput["series"] if s["name"].endswith("· Pareto points")]
    rings = [s for s in tput["series"] if s["name"].endswith("· other points")]
    assert len(fronts) == 3 and len(paretos) == 3, tput["series"]
    for f in fronts:  # Steffen's curve sampled along each front, drawn as one line
        assert len(f["lines"]) == 1 and f["lines"][0] > 40, f
    assert sorted(p["dots"] for p in paretos) == [3, 4, 4] and not any(p["lines"] for p in paretos)
    assert [(r["name"], r["dots"], r["rings"]) for r in rings] == [
        ("A100-80GB · cloud=b · other points", 1, 1)]
    assert len(tput["vlines"]) == 1 and tput["vlines"][0] > 100
    assert tput["vlabels"] == ["target 60 tok/s/user"]
    cost = fr["frontier_cost"]
    assert len([s for s in cost["series"] if s["name"].endswith("· front")]) == 3
    assert cost["vlabels"] == ["target 60 tok/s/user"]
    table = fr["table"]
    assert [r[0] for r in table] == ["L4", "H100-SXM", "A100-80GB"]  # cheapest first
    assert table[0][-1] == "measured at 2"
    assert table[1][-1] == "interpolated between 8 and 4"
    assert table[2][-1].startswith("does not reach 60 tok/s/user")
    shot = tmp_path / "frontier.png"
    shot.write_bytes(page.element_shot)
    keep = os.environ.get("INFER_PROF_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / "frontier.png")
    w, h, rows = png_pixels(page.element_shot)
    assert w > 600 and h > 300, (w, h)
    share, colours = ink(rows)
    assert 0.01 < share < 0.6 and colours > 30, (share, colours)
