"""HTML fragments shared by the report's sections: escaped text, number cells, figures and
"not measured" notes."""

from __future__ import annotations

import html
from typing import Any

from infer_prof.report.run_data import NOT_MEASURED
from infer_prof.report.svg import Plot, fmt_number


def esc(text: Any) -> str:
    """``text`` as a string, HTML-escaped."""
    return html.escape(str(text))


def cell(value: float | None, title: str = "") -> str:
    """A right-aligned table cell with ``value`` for people (or "not measured"); ``title``:
    its hover text."""
    t = f' title="{esc(title)}"' if title else ""
    if value is None:
        return f'<td class="num"{t}><span class="nm">{NOT_MEASURED}</span></td>'
    return f'<td class="num"{t}>{esc(fmt_number(value))}</td>'


def figure(plot: Plot) -> str:
    """``plot``'s SVG in a ``<figure>`` whose id is ``fig-<plot name>``."""
    return f'<figure id="fig-{esc(plot.name)}">{plot.svg}</figure>'


def not_measured(what: str, why: str | None = None) -> str:
    """A note that ``what`` was not measured, and ``why`` when known."""
    reason = f": {esc(why)}" if why else ""
    return f'<p class="note"><span class="nm">{NOT_MEASURED}</span> &mdash; {esc(what)}{reason}</p>'
