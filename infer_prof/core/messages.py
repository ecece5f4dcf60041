"""Error messages for people: one line, short enough to read, whatever the input held.

A value quoted from a bad input file can be megabytes long (a 20 MB line) or hold line breaks;
the message built around it must still be one readable line naming the file, the line, the
problem and the fix.
"""

from __future__ import annotations

#: The longest message :func:`one_line` returns (characters).
MAX_MESSAGE_CHARS = 500
_HEAD_CHARS = 320  # kept from the start: the file, the line, the field, the problem


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` as one line of at most ``limit`` characters: line breaks (and other control
    characters) are written as spaces; a longer text keeps its start and its end (where a
    message names what to do) around ``... (N characters left out) ...``."""
    flat = "".join(" " if ord(c) < 32 or c == "\x7f" else c for c in text)
    if len(flat) <= limit:
        return flat
    head = min(_HEAD_CHARS, limit * 2 // 3)
    marker = " ... ({} characters left out) ... "
    tail = max(0, limit - head - len(marker.format(len(flat))))
    cut = len(flat) - head - tail
    return flat[:head] + marker.format(cut) + (flat[-tail:] if tail else "")


class OneLineError(ValueError):
    """A ValueError whose message is made one short line (:func:`one_line`) when raised."""

    def __init__(self, message: str = "", *args: object) -> None:
        super().__init__(one_line(str(message)), *args)
