"""Tables that fit the terminal: never a word broken across lines, never a row past the edge.

rich wraps a cell at spaces, but when a table is wider than the console it narrows the widest
columns first, below their longest word if need be, and breaks that word. Here each column's
narrowest width is its longest word (its whole text where it does not wrap, e.g. an instance
type); :func:`fit_table` leaves out the columns a table can spare, in the order given, until the
columns at those widths fit (as a last resort it cuts an identifier column short, with an
ellipsis), then shares the room left among the columns (:func:`share`) towards what each needs
to read on one line (or its ``max_width``). The console's width is the terminal's, else
``$COLUMNS``, else 80 (rich's rule: a pipe is read at 80 columns).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table

_WIDE = 1 << 16


def column_range(console: Console, column: Column) -> tuple[int, int]:
    """(narrowest, widest) content width of ``column`` in console cells: its longest word (or
    longest cell when it does not wrap) and its longest cell (at most its ``max_width``), the
    header included."""
    options = console.options.update_width(_WIDE)
    lo = hi = 1
    for cell in (column.header, *column.cells):
        m = Measurement.get(console, options, cell)
        lo, hi = max(lo, m.minimum), max(hi, m.maximum)
    if column.max_width is not None:  # as wide as it is allowed, never below its longest word
        hi = max(lo, min(hi, column.max_width))
    return (hi if column.no_wrap else lo), hi


def table_width(console: Console, table: Table) -> int:
    """The table's width in cells as it would print on a console wide enough."""
    return Measurement.get(console, console.options.update_width(_WIDE), table).maximum


def fit_table(console: Console, table: Table, optional: Sequence[str] = (),
              shorten: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Make ``table`` fit ``console``'s width without breaking a word: leave out ``optional``
    columns (by header, in this order) while it cannot; if it still cannot, cut the long cells
    of the ``shorten`` columns with an ellipsis (to no less than 8 cells); then fix each column's
    width (see the module docstring). Returns (the headers left out, the headers shortened)."""
    if table_width(console, table) <= console.width:
        return [], []
    natural = [c.width for c in table.columns]
    dropped: list[str] = []
    while True:
        ranges = [column_range(console, c) for c in table.columns]
        for c, (lo, _) in zip(table.columns, ranges, strict=True):
            c.width = lo
        room = console.width - table_width(console, table)
        left = [h for h in optional if h not in dropped and _index(table, h) is not None]
        if room >= 0 or not left:
            break
        index = _index(table, left[0])
        assert index is not None
        table.columns.pop(index)
        natural.pop(index)
        dropped.append(left[0])
    cut: list[str] = []
    for header in shorten:
        index = _index(table, header)
        if room >= 0 or index is None:
            break
        column = table.columns[index]
        lo, hi = ranges[index]
        less = min(-room, lo - 8)
        if less > 0:
            column.width, column.overflow, column.no_wrap = lo - less, "ellipsis", True
            ranges[index] = (lo - less, lo - less)
            room += less
            cut.append(header)
    if room < 0:  # nothing left to leave out or cut: rich narrows it as it can
        for c, width in zip(table.columns, natural, strict=True):
            c.width = width
        return dropped, cut
    for column, (lo, _), grow in zip(table.columns, ranges, share(
            [hi - lo for lo, hi in ranges], room), strict=True):
        column.width = lo + grow
    return dropped, cut


def share(needs: list[int], room: int) -> list[int]:
    """``room`` cells shared among columns needing ``needs`` more: in equal parts, a column
    needing less than its part getting what it needs and the rest shared again (max-min fair).
    """
    grows = [0] * len(needs)
    open_ = [i for i, n in enumerate(needs) if n > 0]
    while room > 0 and open_:
        part = max(room // len(open_), 1)
        for i in list(open_):
            grow = min(part, needs[i] - grows[i], room)
            grows[i] += grow
            room -= grow
            if grows[i] == needs[i]:
                open_.remove(i)
    return grows


def _index(table: Table, header: str) -> int | None:
    return next((i for i, c in enumerate(table.columns) if c.header == header), None)


def print_fitted(console: Console, table: Table, optional: Sequence[str] = (),
                 shorten: Sequence[str] = (), more: str = "--json") -> list[str]:
    """Print ``table`` at the console's width (:func:`fit_table`); a line then names the
    columns left out or cut short and where they are whole (``more``: e.g. ``--json``).
    Returns the headers left out."""
    dropped, cut = fit_table(console, table, optional, shorten)
    console.print(table)
    said = [f"left out: {', '.join(dropped)}"] if dropped else []
    said += [f"cut short with …: {', '.join(cut)}"] if cut else []
    if said:
        console.print(f"at {console.width} columns, {'; '.join(said)}: a wider terminal or "
                      f"COLUMNS=200 shows them whole, {more} too", markup=False, highlight=False)
    return dropped
