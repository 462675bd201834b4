"""HTML views: the live page, the self-contained report, and one trace's section.

Rendered by Jinja2 templates with autoescaping on for every template, so a model name, a tool
name or a provider's error message (all from the network) is always text, never markup. The SVG
timeline's geometry is computed here, so templates only place what they are given. Jinja2 is
imported when a page is rendered, never by the proxy's request path.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtap.diagnostics.verdict.client_sees import listed_as_failed
from streamtap.diagnostics.views import stats_text
from streamtap.diagnostics.views.model import TraceView
from streamtap.diagnostics.views.probe import HEADER as PROBE_HEADER
from streamtap.diagnostics.views.stats import tally_lines
from streamtap.diagnostics.views.text import ls_cells, ms

SVG_WIDTH = 640
SVG_HEIGHT = 56
_LANE_Y = {"error": 6, "tool": 14, "reasoning": 22, "text": 30, "keepalive": 38, "other": 38}


@dataclass(frozen=True)
class Timeline:
    """What the SVG draws, in pixels."""

    frames: list[tuple[float, int, str]]  # (x, y, kind class)
    marks: list[tuple[float, str, str]]  # (x, label, time)
    silence: tuple[float, float] | None  # the shaded silence before the end
    end_x: float


def timeline(view: TraceView) -> Timeline:
    span = view.end_ms or 1.0

    def x(t_ms: float) -> float:
        return round(min(max(t_ms / span, 0.0), 1.0) * (SVG_WIDTH - 2) + 1, 1)

    silence = None
    if view.final_silence is not None and view.final_silence.ms > 0:
        silence = (x(view.final_silence.start_ms), x(view.final_silence.end_ms))
    return Timeline(frames=[(x(t), _LANE_Y[klass], klass) for t, klass in view.frames],
                    marks=[(x(mark.t_ms), mark.label, ms(mark.t_ms)) for mark in view.marks],
                    silence=silence, end_x=x(view.end_ms))


def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("streamtap.diagnostics.views", "templates"),
                      autoescape=True, undefined=StrictUndefined, trim_blocks=True,
                      lstrip_blocks=True)
    env.globals.update(ms=ms, timeline=timeline, SVG_WIDTH=SVG_WIDTH, SVG_HEIGHT=SVG_HEIGHT,
                       section_failed=section_failed)
    return env


def section_failed(view: TraceView) -> bool:
    """Whether "failures only" keeps a trace's section: the rule of `ls --failed`, so a client
    that hung or got a silently short answer behind an ok verdict is kept too."""
    return listed_as_failed({"ok": view.ok, "client_sees": view.client_sees})


def row(line: dict) -> dict:
    """One table row from an index line (the same cells `ls` prints); `failed`: whether
    `ls --failed` lists it, which "failures only" keeps."""
    cells = ls_cells(line)
    return {"trace_id": str(line.get("trace_id", "")), "ok": bool(line.get("ok")),
            "failed": listed_as_failed(line),
            "provider": str(line.get("provider") or line.get("route") or ""),
            "session": str(line.get("session_id") or ""), "cells": cells,
            "summary": str(line.get("summary") or "")}


def render_page(lines: list[dict], views: list[TraceView], *, title: str, live: bool,
                nonce: str, generated_at: str, probes: list[dict] = ()) -> str:
    """The page: sessions, filters, the grade table of each probe run (`probes`, from
    views.probe.report_section), the `stats` table of `lines` (the cells `streamtap stats`
    prints), the table of `lines`, and a section per view. `live` adds the EventSource script
    that adds rows as requests finish."""
    rows = [row(line) for line in lines]
    sessions = sorted({r["session"] for r in rows if r["session"]})
    providers = sorted({r["provider"] for r in rows if r["provider"]})
    table = tally_lines(lines)
    stats = {"title": stats_text.title(table), "notes": stats_text.notes(table),
             "tables": stats_text.tables(table)}
    return _environment().get_template("page.html.j2").render(
        title=title, rows=rows, views=views, sessions=sessions, providers=providers,
        stats=stats, live=live, nonce=nonce, generated_at=generated_at, probes=probes,
        probe_header=PROBE_HEADER)


def render_trace(view: TraceView) -> str:
    """One trace's section alone (the live page fetches it for a new row)."""
    return _environment().get_template("trace.html.j2").render(view=view)
