"""The view model of a trace record: what every view (show, the page, the report, HAR) shows,
computed once from the record and nothing else, so the views can never disagree."""

from __future__ import annotations

from dataclasses import dataclass

from streamtap.diagnostics.trace_record import (ErrorFacts, FaultFacts, StreamError, ToolCall,
                                                  TraceRecord, stated)
from streamtap.diagnostics.verdict.proxylag import lag_warning

# (timeline key, label) in the order a request lives through them.
PHASE_MARKS = (
    ("request_received", "received"),
    ("upstream_connected", "connected"),
    ("response_headers", "headers"),
    ("first_byte", "first byte"),
    ("first_event", "first event"),
    ("first_progress", "first progress"),
    ("last_progress", "last progress"),
    ("terminal_event", "terminal"),
)
# Frame kinds grouped into the classes a view colours; the first class wins a strip cell.
KIND_CLASSES = ("error", "tool", "reasoning", "text", "keepalive", "other")
_CLASS_OF = {
    "text_start": "text", "text_delta": "text", "text_end": "text",
    "reasoning_start": "reasoning", "reasoning_delta": "reasoning", "reasoning_end": "reasoning",
    "tool_input_start": "tool", "tool_input_delta": "tool", "tool_input_end": "tool",
    "tool_call": "tool", "keepalive": "keepalive", "error": "error", "unterminated": "error",
}


def kind_class(kind: str) -> str:
    """text, reasoning, tool, keepalive, error or other."""
    return _CLASS_OF.get(kind, "other")


@dataclass(frozen=True)
class Mark:
    label: str
    t_ms: float


@dataclass(frozen=True)
class Silence:
    start_ms: float
    end_ms: float

    @property
    def ms(self) -> float:
        return round(self.end_ms - self.start_ms, 1)


@dataclass(frozen=True)
class TraceView:
    trace_id: str
    session_id: str
    message_id: str | None
    started_at: str
    route: str
    provider: str | None
    dialect: str | None
    upstream_url: str | None
    method: str | None
    path: str | None
    model: str | None
    status: int | None
    ok: bool
    boundary: str | None
    phase: str | None
    summary: str
    evidence: tuple[str, ...]
    retryable: bool | None
    confidence: str | None
    client_sees: str  # what the client will make of the ending (verdict/client_sees.py)
    finish_reason: str | None  # normalized (verdict/finish_reasons.py)
    provider_finish_reason: str | None  # the provider's own word for it
    ttfb_ms: float | None
    end_ms: float
    frame_count: int
    frames_dropped: int
    marks: tuple[Mark, ...]
    frames: tuple[tuple[float, str], ...]  # (t_ms, kind class)
    longest_silence: Silence | None
    final_silence: Silence | None  # from the last frame (or headers) to the end
    tool_calls: tuple[ToolCall, ...]
    error_lines: tuple[str, ...]
    stream_errors: tuple[StreamError, ...]
    correlation: tuple[tuple[str, str], ...]
    fault: FaultFacts | None
    # "streamtap itself was 25 ms late ...": the record's own timing is not to be trusted below
    # that (verdict/proxylag.py); None when the proxy kept time.
    lag_warning: str | None = None

    def strip(self, cells: int) -> list[str]:
        """The frame-density strip: per time cell the kind class that matters most, or ""."""
        span = self.end_ms or 1.0
        out = [""] * cells
        for t_ms, klass in self.frames:
            cell = min(int(t_ms / span * cells), cells - 1) if span else 0
            current = out[cell]
            if not current or KIND_CLASSES.index(klass) < KIND_CLASSES.index(current):
                out[cell] = klass
        return out


def _error_lines(error: ErrorFacts | None) -> tuple[str, ...]:
    if error is None:
        return ()
    first = f"{error.where}: {error.type}"
    if error.code is not None:
        first += f" [{error.code}]"
    if error.message:
        first += f": {error.message}"
    lines = [first]
    if stated(error.status) is not None:
        provider = " ".join(str(value) for value in (stated(error.error_type),
                                                      stated(error.error_code)) if value)
        detail = f"HTTP {error.status}" + (f" {provider}" if provider else "")
        if stated(error.error_message):
            detail += f": {error.error_message}"
        lines.append(detail)
    cause = error.cause
    if cause is not None:
        text = f"caused by {cause.type}"
        if cause.code is not None:
            text += f" [{cause.code}]"
        if cause.message:
            text += f": {cause.message}"
        lines.append(text)
    return tuple(lines)


def _silences(frame_times: list[float], start: float | None, end: float) -> tuple:
    points = ([start] if start is not None else []) + frame_times
    longest = None
    for before, after in zip(points, points[1:]):
        if longest is None or after - before > longest.end_ms - longest.start_ms:
            longest = Silence(before, after)
    final = None
    if points and end > points[-1]:
        final = Silence(points[-1], end)
        if longest is None or final.ms > longest.ms:
            longest = final
    return longest, final


def build_view(record: TraceRecord) -> TraceView:
    """The view model of one record (any schema version this streamtap reads: older ones are
    upgraded on reading, diagnostics/record/schema.py)."""
    outcome = record.outcome
    request = record.request
    timeline = record.timeline
    stream = record.stream
    end_ms = next((value for value in (timeline.downstream_end, timeline.upstream_end,
                                       timeline.duration_ms) if value is not None), 0.0)
    end_ms = max(end_ms, timeline.duration_ms or 0.0)
    marks = [Mark(label, getattr(timeline, key)) for key, label in PHASE_MARKS
             if getattr(timeline, key) is not None]
    marks.append(Mark("end", end_ms))
    frames = tuple((float(frame.t_ms), kind_class(frame.kind)) for frame in record.frames)
    longest, final = _silences([t for t, _ in frames], timeline.response_headers, end_ms)
    correlation = [("trace id", record.trace_id), ("session", record.session_id)]
    if record.message_id:
        correlation.append(("message id", record.message_id))
    for label, value in (("request id", record.correlation.request_id),
                         ("response id", record.correlation.response_id)):
        if value:
            correlation.append((label, value))
    return TraceView(
        trace_id=record.trace_id, session_id=record.session_id or "",
        message_id=record.message_id, started_at=record.started_at or "",
        route=record.route or "", provider=record.provider,
        dialect=record.dialect, upstream_url=record.upstream_url,
        method=request.method, path=request.path, model=request.model,
        status=record.downstream.status or (record.response.status if record.response else None),
        ok=bool(outcome and outcome.ok), boundary=outcome.boundary if outcome else None,
        phase=outcome.phase if outcome else None,
        summary=outcome.summary if outcome else "",
        evidence=tuple(outcome.evidence) if outcome else (),
        retryable=outcome.retryable if outcome else None,
        confidence=outcome.confidence if outcome else None,
        client_sees=outcome.client_sees if outcome else None,
        finish_reason=outcome.normalized_finish_reason if outcome else None,
        provider_finish_reason=stream.finish_reason,
        ttfb_ms=timeline.first_byte, end_ms=float(end_ms),
        frame_count=stream.frame_count or 0,
        frames_dropped=record.frames_dropped or 0,
        marks=tuple(marks), frames=frames, longest_silence=longest, final_silence=final,
        tool_calls=tuple(stream.tool_calls),
        error_lines=_error_lines(record.error),
        stream_errors=tuple(stream.errors),
        correlation=tuple((label, str(value)) for label, value in correlation),
        fault=record.fault,
        lag_warning=lag_warning(timeline.proxy_lag_max_ms, timeline.proxy_lag_at_ms),
    )
