"""The provider matrix for a terminal: one block per provider and dialect, a field per line,
wrapped to the width given, because a table with thirteen columns cannot fit a terminal."""

from __future__ import annotations

import textwrap

from streamtap.diagnostics.samples.matrix import COLUMNS, _cell

DEFAULT_WIDTH = 100


def render_table(rows: list[dict], width: int = DEFAULT_WIDTH) -> str:
    """Each row transposed: `provider / dialect (n samples)`, then one wrapped line per field."""
    label_width = max(len(title) for _, title in COLUMNS) + 2
    blocks = []
    for row in rows:
        lines = [f"{row['provider']} / {row['dialect']}  ({row['samples']} "
                 f"sample{'s' if row['samples'] != 1 else ''})"]
        for column, title in COLUMNS:
            if column in ("provider", "dialect", "samples"):
                continue
            text = _cell(row, column).replace("`", "")
            lines += textwrap.wrap(text, width=width, initial_indent=f"  {title:<{label_width}}",
                                   subsequent_indent=" " * (label_width + 2),
                                   break_on_hyphens=False) or [f"  {title}"]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
