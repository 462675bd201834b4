"""Terminal views: `ls` rows, the `show` page of one trace, a `tail` row.

Each view is a list of lines; a line is a list of (text, style) segments. Styles are names
(`ok`, `fail`, `dim`, `bold`, and the kind classes `text`, `reasoning`, `tool`, `keepalive`,
`error`, `other`): the caller prints them plain, or coloured on a terminal. Nothing here reads a
clock or a file.
"""

from __future__ import annotations

from streamtap.diagnostics.verdict.client_sees import QUIET_FAILURES
from streamtap.diagnostics.views.model import TraceView

Segment = tuple[str, str]
Line = list[Segment]

BAR_WIDTH = 40
STRIP_CELLS = 60
# One character per kind class in the density strip, so it reads without colour too.
STRIP_CHARS = {"text": "=", "reasoning": "~", "tool": "#", "keepalive": ".", "error": "X",
               "other": "-", "": " "}
LS_COLUMNS = ("TIME", "TRACE", "SESSION", "ROUTE", "MODEL", "STATUS", "TTFB", "DURATION",
              "FRAMES", "OUTCOME")


def ms(value: float | None) -> str:
    """A duration as a person reads it: `-` when never reached, ms below 10 s, else seconds."""
    if value is None:
        return "-"
    if value < 10_000:
        return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"
    return f"{value / 1000:.1f} s"


def short_time(iso: str | None) -> str:
    """`2026-11-25T21:50:10.123Z` -> `11-25 21:50:10` (UTC, as records store it)."""
    if not iso or len(iso) < 19:
        return iso or "-"
    return f"{iso[5:10]} {iso[11:19]}"


def outcome_text(line: dict) -> str:
    text = "ok" if line.get("ok") else f"FAIL {line.get('boundary')}/{line.get('phase')}"
    if line.get("fault") and not line.get("ok"):
        text += f" (fault {line['fault']})"
    if line.get("client_sees") in QUIET_FAILURES:  # the client was not told: say so in the row
        text += f", client sees {line['client_sees']}"
    return text


def ls_cells(line: dict) -> list[str]:
    """The cells of one index line, in LS_COLUMNS order."""
    status = line.get("downstream_status") or line.get("status")
    return [short_time(line.get("started_at")), str(line.get("trace_id", ""))[:8],
            str(line.get("session_id") or "-"), str(line.get("route") or "-"),
            str(line.get("model") or "-"), str(status) if status is not None else "-",
            ms(line.get("ttfb_ms")), ms(line.get("duration_ms")),
            str(line.get("frames") if line.get("frames") is not None else "-"),
            outcome_text(line)]


def ls_table(lines: list[dict]) -> list[Line]:
    """A table of index lines (already filtered and ordered), header first."""
    rows = [ls_cells(line) for line in lines]
    widths = [max([len(col)] + [len(row[i]) for row in rows]) for i, col in enumerate(LS_COLUMNS)]
    numeric = {5, 6, 7, 8}

    def fmt(cells: list[str]) -> list[str]:
        return [cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i])
                for i, cell in enumerate(cells)]

    out: list[Line] = [[("  ".join(fmt(list(LS_COLUMNS))).rstrip(), "bold")]]
    for line, row in zip(lines, rows):
        cells = fmt(row)
        style = "ok" if line.get("ok") else "fail"
        out.append([("  ".join(cells[:-1]) + "  ", ""), (cells[-1].rstrip(), style)])
    return out


# tail cannot know the widths of rows still to come: fixed ones (rjust for numbers).
TAIL_WIDTHS = (14, 8, -12, -10, -16, 3, 8, 9, 6)


def tail_row(line: dict) -> Line:
    """One finished request as `tail` prints it: the ls cells, then the summary."""
    cells = ls_cells(line)
    fixed = [cell.ljust(-width) if width < 0 else cell.rjust(width) if i > 4 else
             cell.ljust(width) for i, (cell, width) in enumerate(zip(cells, TAIL_WIDTHS))]
    style = "ok" if line.get("ok") else "fail"
    return [("  ".join(fixed) + "  ", ""), (cells[-1], style),
            ("  " + str(line.get("summary") or ""), "dim")]


def _bar(t_ms: float, end_ms: float) -> str:
    filled = round(t_ms / end_ms * BAR_WIDTH) if end_ms > 0 else 0
    return "|" + "█" * filled + " " * (BAR_WIDTH - filled) + "|"


def client_line(view: TraceView) -> str:
    """What the client will make of the ending, and the finish reason in both vocabularies."""
    provider = view.provider_finish_reason or "-"
    return (f"client sees: {view.client_sees}  finish reason: {view.finish_reason or '-'} "
            f"(provider: {provider})")


def show(view: TraceView) -> list[Line]:
    """The page `show` prints: summary first, then timeline, frames, tools, error, ids, fault."""
    verdict = "ok" if view.ok else f"FAIL {view.boundary}/{view.phase}"
    out: list[Line] = [
        [(verdict, "ok" if view.ok else "fail"), ("  " + view.summary, "bold")],
        [(f"trace {view.trace_id}  {view.started_at}  {view.method or '-'} "
          f"/{view.route}{view.path or ''}  model {view.model or '-'}  "
          f"status {view.status if view.status is not None else '-'}  "
          f"dialect {view.dialect or '-'}", "dim")],
    ]
    if view.upstream_url:
        out.append([(f"upstream {view.upstream_url}", "dim")])
    details = f"evidence: {', '.join(view.evidence) or '-'}"
    if view.retryable is not None:
        details += f"  retryable: {'yes' if view.retryable else 'no'}"
    if view.confidence:
        details += f"  confidence: {view.confidence}"
    out.append([(details, "")])
    out.append([(client_line(view), "")])
    if view.lag_warning:
        out.append([("warning: " + view.lag_warning, "fail")])
    out.append([])

    out.append([("timeline", "bold")])
    width = max(len(mark.label) for mark in view.marks)
    for mark in view.marks:
        out.append([(f"  {mark.label:<{width}}  {ms(mark.t_ms):>9}  ", ""),
                    (_bar(mark.t_ms, view.end_ms), "dim")])
    out.append([])

    dropped = f", {view.frames_dropped} not kept" if view.frames_dropped else ""
    out.append([(f"frames  {view.frame_count}{dropped} over {ms(view.end_ms)}", "bold")])
    strip = view.strip(STRIP_CELLS)
    out.append([("  |", "")] + [(STRIP_CHARS[klass], klass or "") for klass in strip]
               + [("| end", "")])
    out.append([("  = text  ~ reasoning  # tool input  . keepalive  X error  - other", "dim")])
    if view.longest_silence is not None:
        silence = view.longest_silence
        text = (f"  longest silence {ms(silence.ms)} "
                f"({ms(silence.start_ms)} to {ms(silence.end_ms)})")
        if view.final_silence is not None and view.final_silence == silence:
            text += ", right before the end"
        out.append([(text, "")])
    out.append([])

    if view.tool_calls:
        out.append([("tool calls", "bold")])
        for call in view.tool_calls:
            done = "complete" if call.completed else "INCOMPLETE"
            out.append([(f"  #{call.index} {call.name or '?'}  "
                         f"{call.arg_chunks} chunks, {call.arg_bytes} bytes  ", ""),
                        (done, "ok" if call.completed else "fail")])
        out.append([])
    if view.error_lines or view.stream_errors:
        out.append([("error", "bold")])
        out += [[("  " + line, "error")] for line in view.error_lines]
        for error in view.stream_errors:
            text = f"  in-stream {error.shape} at {ms(error.t_ms)}"
            named = " ".join(str(value) for value in (error.type, error.code) if value)
            if named:
                text += f": {named}"
            if error.message:
                text += f": {error.message}"
            out.append([(text, "error")])
        out.append([])

    out.append([("ids", "bold")])
    out += [[(f"  {label:<12}{value}", "")] for label, value in view.correlation]
    if view.fault:
        fault = view.fault
        fired = (f"fired at {ms(fault.fired_at_ms)} after {fault.frames_before} "
                 "frames" if fault.fired else "armed, did not fire")
        out += [[], [("fault", "bold")],
                [(f"  {fault.name}: {fault.action} at {fault.at} "
                  f"({fault.source}), {fired}", "")]]
    return out


# Strings from the network (model names, error messages) must not smuggle terminal escapes in.
_CONTROL = {code: "?" for code in (*range(0x00, 0x20), 0x7f)} | {0x09: " ", 0x0a: " ", 0x0d: " "}


def printable(text: str) -> str:
    return text.translate(_CONTROL)


def plain(lines: list[Line]) -> str:
    """The lines as plain text, without styles."""
    return "".join(printable("".join(text for text, _ in line)).rstrip() + "\n"
                   for line in lines)
