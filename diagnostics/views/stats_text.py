"""The stats table as people and tools read it: its cells (the terminal, Markdown and the HTML page
show the same ones), a terminal table, a Markdown table and JSON."""

from __future__ import annotations

from streamtap.diagnostics.views.stats import (CLIENT_SEES, MISTAKEN_FOR_SUCCESS, TIMINGS,
                                               UNKNOWN_SEES, Group, StatsTable, Timing)
from streamtap.diagnostics.views.text import Line, ms, printable

ENDING_LABELS = {"clean_close_no_terminal": "clean close, no terminal",
                 "terminal_after_error": "terminal after error"}
Cells = tuple[list[str], list[list[str]]]  # (header, rows)


def rate(count: int, requests: int) -> str:
    """A share as a person reads it: per mille below 1% (the rare endings that matter), else %."""
    share = count / requests if requests else 0.0
    if share >= 0.01:
        return f"{share * 100:.1f}%"
    permille = share * 1000
    return f"{permille:.1f}‰" if permille >= 1 else f"{permille:.2g}‰"


def count_cell(count: int, requests: int) -> str:
    return f"{count} ({rate(count, requests)})" if count else "0"


def timing_cell(timing: Timing) -> str:
    if not timing.n:
        return "-"
    return " / ".join(ms(value) for value in (timing.p50, timing.p90, timing.p99))


def _rows(table: StatsTable) -> list[Group]:
    """The groups, then the total when there is more than one group."""
    return list(table.groups) + ([table.total] if len(table.groups) > 1 else [])


def outcome_cells(table: StatsTable) -> Cells:
    header = [table.by.upper(), "REQUESTS", "COMPLETED",
              *(boundary.upper() for boundary in table.boundaries),
              *(label.upper() for label in ENDING_LABELS.values())]
    rows = [[printable(group.key), str(group.requests),
             count_cell(group.completed, group.requests),
             *(count_cell(group.boundaries.get(boundary, 0), group.requests)
               for boundary in table.boundaries),
             *(count_cell(group.endings.get(ending, 0), group.requests)
               for ending in ENDING_LABELS)] for group in _rows(table)]
    return header, rows


def client_sees_cells(table: StatsTable) -> Cells:
    header = [table.by.upper(), *(f"CLIENT SEES {sees.upper()}" for sees in table.client_sees)]
    rows = [[printable(group.key), *(count_cell(group.client_sees.get(sees, 0), group.requests)
                                     for sees in table.client_sees)] for group in _rows(table)]
    return header, rows


def timing_cells(table: StatsTable) -> Cells:
    header = [table.by.upper(), *(f"{label.upper()} p50 / p90 / p99" for _, label in TIMINGS)]
    rows = [[printable(group.key), *(timing_cell(group.timings[key]) for key, _ in TIMINGS)]
            for group in _rows(table)]
    return header, rows


def tables(table: StatsTable) -> list[Cells]:
    """The tables every view shows, in order: outcomes, what the client saw, timings."""
    return [outcome_cells(table), client_sees_cells(table), timing_cells(table)]


def title(table: StatsTable) -> str:
    return f"{table.total.requests} requests by {table.by}"


def notes(table: StatsTable) -> list[str]:
    """What the ending columns mean, and what the table could not know."""
    out = [f"{ENDING_LABELS[name]}: {text}" for name, text in MISTAKEN_FOR_SUCCESS.items()]
    out.append("A client most likely took both for success. Timings are nearest-rank "
               "percentiles of the requests that got that far.")
    out.append("client sees: what a client made of the ending, judged from the wire (as `show` "
               "says it); silent_truncation and hang can hide behind a completed request, and "
               "`ls --failed` lists them.")
    if table.unknown:
        out.append(f"{table.unknown} index line(s) from an older streamtap carry no evidence or "
                   "timings beyond ttfb and duration: their endings count as unknown, not as 0.")
    if table.unknown_client_sees:
        out.append(f"{table.unknown_client_sees} index line(s) do not say what the client saw "
                   "(written by an older streamtap): they count as unknown, in no other client "
                   "sees column.")
    return out


def _aligned(cells: Cells) -> list[Line]:
    header, rows = cells
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        return "  ".join(cell.ljust(widths[0]) if i == 0 else cell.rjust(widths[i])
                         for i, cell in enumerate(row))

    return [[(fmt(header), "bold")]] + [[(fmt(row), "")] for row in rows]


def text_table(table: StatsTable) -> list[Line]:
    """The terminal view: outcomes, then timings, then the notes."""
    out: list[Line] = [[(title(table), "bold")], []]
    for cells in tables(table):
        out += _aligned(cells) + [[]]
    out += [[(note, "dim")] for note in notes(table)]
    return out


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def markdown(table: StatsTable) -> str:
    out = [f"**{title(table)}**", ""]
    for header, rows in tables(table):
        out += [_md_row(header), "|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|"]
        out += [_md_row(row) for row in rows] + [""]
    out += [f"- {note}" for note in notes(table)]
    return "\n".join(out) + "\n"


def _share(count: int, requests: int) -> dict:
    return {"count": count, "rate": round(count / requests, 6) if requests else 0.0}


def _group_json(group: Group, boundaries: tuple[str, ...]) -> dict:
    return {"key": group.key, "requests": group.requests,
            "completed": _share(group.completed, group.requests),
            "boundaries": {b: _share(group.boundaries.get(b, 0), group.requests)
                           for b in boundaries},
            "endings": {e: _share(group.endings.get(e, 0), group.requests)
                        for e in MISTAKEN_FOR_SUCCESS},
            "client_sees": {sees: _share(group.client_sees.get(sees, 0), group.requests)
                            for sees in (*CLIENT_SEES, UNKNOWN_SEES)},
            "timings_ms": {key: {"p50": t.p50, "p90": t.p90, "p99": t.p99, "n": t.n}
                           for key, t in group.timings.items()}}


def as_json(table: StatsTable, skipped: list[str] | None = None,
            skipped_count: int = 0) -> dict:
    """`--format json`: counts with their rates as fractions, timings in ms, and the index lines
    that were not read (`skipped`, named file:line when known)."""
    return {"by": table.by, "percentiles": "nearest-rank", "endings": MISTAKEN_FOR_SUCCESS,
            "unknown_endings": table.unknown, "unknown_client_sees": table.unknown_client_sees,
            "groups": [_group_json(group, table.boundaries) for group in table.groups],
            "total": _group_json(table.total, table.boundaries),
            "skipped": {"count": skipped_count, "lines": skipped or []}}
