"""Printing text views: plain on a pipe or with NO_COLOR, coloured on a terminal.

The views need a handful of colours, so this maps their style names to ANSI SGR codes itself
rather than depending on rich: structlog imports rich (and pygments) eagerly whenever it is
installed, which would slow every `streamtap serve` start for a few colours here.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from streamtap.diagnostics.views.text import Line, plain, printable

# SGR parameters for the style names the text views use.
SGR = {"ok": "32", "fail": "1;31", "dim": "2", "bold": "1", "text": "32", "reasoning": "35",
       "tool": "33", "keepalive": "34", "error": "31", "other": "37"}


def wants_colour(stream: TextIO) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def coloured(lines: list[Line]) -> str:
    out = []
    for line in lines:
        parts = [(printable(text), style) for text, style in line]
        while parts and not parts[-1][0].strip():
            parts.pop()
        if parts:
            parts[-1] = (parts[-1][0].rstrip(), parts[-1][1])
        out.append("".join(f"\x1b[{SGR[style]}m{text}\x1b[0m" if style in SGR and text else text
                           for text, style in parts) + "\n")
    return "".join(out)


def emit(lines: list[Line], stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    stream.write(coloured(lines) if wants_colour(stream) else plain(lines))
    stream.flush()
