"""The probe's result as a terminal table, markdown and JSON: one row per ending with its grade,
the client's last error line, how many requests it made and how long it took."""

from __future__ import annotations

from dataclasses import dataclass

from streamtap.diagnostics.probe.grade import Verdict

# The file in a session folder that `streamtap probe` appends its result to (one JSON line per
# run) and `streamtap report` reads; not `*.json`, so no reader of records or samples takes it
# for one.
RESULT_FILE = "probe.jsonl"
HEADER = ("ending", "grade", "client's last error line", "requests", "time", "expectation")


@dataclass(frozen=True)
class ProbeResult:
    """A whole probe run: its session (where its records are), the dialect, the verdicts."""

    session: str
    dialect: str
    verdicts: tuple[Verdict, ...]
    missing_pins: tuple[str, ...] = ()  # endings an --expect file pins that were not graded

    @property
    def broken(self) -> list[Verdict]:
        return [verdict for verdict in self.verdicts if not verdict.meets]

    @property
    def passed(self) -> bool:
        return not self.broken and not self.missing_pins

    def as_dict(self) -> dict:
        return {"probe": self.session, "dialect": self.dialect,
                "endings": [verdict.as_dict() for verdict in self.verdicts],
                "missing_pins": list(self.missing_pins)}


def row_cells(row: dict) -> tuple[str, ...]:
    """One row's cells from a verdict's JSON form (the HTML report reads it back from the
    session folder)."""
    if row.get("skipped"):
        return (row["ending"], "-", "", "", "", f"skipped: {row['skipped']}")
    return (row["ending"], row.get("grade") or "-", row.get("error_line") or "-",
            str(row.get("requests", 0)), f"{row.get('seconds') or 0:.1f}s",
            "meets" if row.get("meets") else (row.get("why") or "").replace("breaks:", "BREAKS:"))


def cells(verdict: Verdict) -> tuple[str, ...]:
    return row_cells(verdict.as_dict())


def text_table(result: ProbeResult) -> list[str]:
    rows = [cells(verdict) for verdict in result.verdicts]
    widths = [max(len(row[i]) for row in [HEADER, *rows]) for i in range(len(HEADER))]
    widths[2] = min(widths[2], 48)  # a long error line is cut, the row stays on one line

    def line(row: tuple[str, ...]) -> str:
        fitted = [cell if len(cell) <= width else cell[:width - 1] + "…"
                  for cell, width in zip(row, widths)]
        return "  ".join(cell.ljust(width) for cell, width in zip(fitted, widths)).rstrip()

    return [line(HEADER), line(tuple("-" * width for width in widths)),
            *[line(row) for row in rows], summary(result)]


def summary(result: ProbeResult) -> str:
    ran = [verdict for verdict in result.verdicts if not verdict.skipped]
    broken = result.broken
    text = (f"{len(ran)} ending(s) of {result.dialect} run, {len(broken)} broke the "
            f"expectation; records in session {result.session}")
    text += f": {', '.join(v.ending for v in broken)}" if broken else ""
    if result.missing_pins:
        text += (f"; pinned but not graded in this run: {', '.join(result.missing_pins)}")
    return text


def markdown(result: ProbeResult) -> list[str]:
    def escape(cell: str) -> str:
        return cell.replace("|", "\\|")

    return ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER),
            *["| " + " | ".join(escape(cell) for cell in cells(verdict)) + " |"
              for verdict in result.verdicts], "", summary(result)]


def report_section(data: dict) -> dict:
    """What the HTML report shows of one probe run (its `--format json` form): the session, the
    dialect, and each row's cells with whether it broke its expectation."""
    return {"session": str(data.get("probe") or ""), "dialect": str(data.get("dialect") or ""),
            "rows": [{"cells": row_cells(row), "broken": not row.get("meets", True)}
                     for row in data.get("endings") or [] if isinstance(row, dict)]}
