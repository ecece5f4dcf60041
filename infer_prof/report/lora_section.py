"""The HTML report's "LoRA adapters" section: for each run over adapters (``run --lora-mix``),
a row per adapter with its share asked and sent, requests, TTFT and TPOT p50/p99 and output
tokens/s (the rows of :mod:`infer_prof.report.adapter_table`); empty when no run used
adapters (:mod:`infer_prof.report.html`)."""

from __future__ import annotations

from collections.abc import Sequence

from infer_prof.report.adapter_table import COLUMNS, comparison_adapter_rows
from infer_prof.report.html_fragments import cell, esc
from infer_prof.report.run_data import RunData
from infer_prof.results.identity import readable_name


def lora_section(runs: Sequence[RunData], names: Sequence[str]) -> str:
    """The section: a table of every run's adapters, each run's mix and the most adapters the
    server ran at once under it; "" when no run has a ``lora`` section."""
    results = [run.result for run in runs]
    if all(r.lora is None for r in results):
        return ""
    shown = [readable_name(r) or n for r, n in zip(results, names, strict=True)]
    rows = comparison_adapter_rows(results, shown)
    head = "<tr><th>run</th>" + "".join(f"<th>{esc(h)}</th>" for _, h in COLUMNS) + "</tr>"
    body = []
    for row in rows:
        cells = [f"<td>{esc(str(row.run))}</td>", f"<td>{esc(row.adapter)}</td>"]
        for (key, _), value in zip(COLUMNS[1:], row.figures(), strict=True):
            if key.startswith("share_"):
                cells.append(f'<td class="num">{esc(f"{100 * value:.0f}%")}</td>'
                             if value is not None else cell(None))
            else:
                cells.append(cell(value))
        body.append("<tr>" + "".join(cells) + "</tr>")
    mixes = "; ".join(
        f"{name}: --lora-mix {r.lora.mix}"
        + (f", up to {r.lora.adapters_running_max:.0f} adapters running at once"
           if r.lora.adapters_running_max is not None else "")
        for r, name in zip(results, shown, strict=True) if r.lora is not None)
    note = ("Each adapter's requests (base: the served model itself), summarised as the run's "
            "are; output tokens/s over the run's window, so the adapters add up to the run. "
            + mixes + ".")
    return ('<section id="lora-adapters"><h2>LoRA adapters</h2>'
            f'<p class="note">{esc(note)}</p>'
            f'<div class="table-wrap"><table><thead>{head}</thead>'
            f"<tbody>{''.join(body)}</tbody></table></div></section>")
