"""The verdict's facts (diagnostics/verdict/classify.py `Facts`) read from the typed record the
recorder just built, and from what only the recorder knows (the stream's phase, the ending)."""

from __future__ import annotations

from streamtap.diagnostics.dialects import dialect_class as registered_dialect
from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.dialects.stream import StreamState
from streamtap.diagnostics.record.ending import Ending
from streamtap.diagnostics.trace_record import TraceRecord
from streamtap.diagnostics.verdict.classify import Facts, media_type


def facts_from_record(record: TraceRecord, state: StreamState, ending: Ending) -> Facts:
    """What the rules read: the typed record's facts and the recorder's own (the phase, the
    ending as the proxy saw it)."""
    stream = record.stream
    timeline = record.timeline
    dialect_class = registered_dialect(record.dialect)
    tools = stream.tool_calls
    response = record.response
    return Facts(
        provider=record.provider or record.route or "the provider",
        dialect=record.dialect,
        status=response.status if response else None,
        error=record.error,
        upstream=ending.upstream,
        downstream=ending.downstream,
        watchdog_fired=ending.watchdog_fired,
        watchdog=ending.watchdog,
        shutdown=ending.shutdown,
        proxy_reason=ending.proxy_reason,
        fault=ending.fault,
        terminal=stream.terminal,
        dialect_has_terminal=bool(dialect_class and dialect_class.terminal_names),
        finish_reason=stream.finish_reason,
        stream_errors=stream.errors,
        phase=state.phase,
        event_counts=stream.event_counts,
        frame_count=stream.frame_count,
        open_tools=[call for call in tools if not call.completed],
        completed_tools=[call for call in tools if call.completed],
        protocol_errors=stream.protocol_errors,
        unterminated=any(frame.kind == ev.UNTERMINATED for frame in record.frames[-3:]),
        max_gap_ms=timeline.max_gap_ms,
        all_forwarded=(record.downstream.bytes or 0) >= stream.bytes,
        server_tools=stream.server_tools,
        upstream_retried=record.upstream_retry is not None,
        stream_requested=record.request.stream is True,
        content_type=media_type(response.content_type if response else None),
        notes=list(getattr(ending, "notes", ())),
        tool_call_end=dialect_class.tool_call_end if dialect_class else None,
        shutdown_forced=ending.shutdown_forced,
        headers_ms=timeline.response_headers,
        first_byte_ms=timeline.first_byte,
        last_event_ms=timeline.last_event,
        terminal_ms=timeline.terminal_event,
        close=record.close,
        **silence_facts(record),
    )


def silence_facts(record: TraceRecord) -> dict:
    """The facts a verdict resting on a silence reads: the proxy's own lag, and where the final
    silence starts and ends."""
    timeline = record.timeline
    frames = record.frames
    last = frames[-1].t_ms if frames else timeline.response_headers
    end = next((value for value in (timeline.downstream_end, timeline.upstream_end,
                                    timeline.duration_ms) if value is not None), 0.0)
    return {"proxy_lag_max_ms": timeline.proxy_lag_max_ms,
            "proxy_lag_at_ms": timeline.proxy_lag_at_ms,
            "last_frame_ms": last or 0.0, "end_ms": end}
