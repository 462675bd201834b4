"""A trace record as one OpenTelemetry span: name, kind, times, attributes, events and status.

Pure: the record in, plain data out; the exporter (streamtap.proxy.export.otlp) turns it into SDK
objects. Everything here comes from the record and nothing else, so a span can hold nothing a
record may not hold (no prompt, no output, no tool argument, no header value but the kept ones).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from streamtap.diagnostics.trace_record import Outcome, TraceRecord
from streamtap.diagnostics.views import genai_conventions as sc
from streamtap.diagnostics.errors import UserError

AttributeValue = str | bool | int | float | tuple[str, ...]


class SpanError(UserError, ValueError):
    """A record that cannot become a span (it lacks a start time or a trace id)."""


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict[str, AttributeValue]


@dataclass(frozen=True, slots=True)
class SpanData:
    name: str
    kind: str  # always CLIENT: streamtap calls the provider on the client's behalf
    trace_id: int  # 128 bits
    span_id: int  # 64 bits
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue]
    events: tuple[SpanEvent, ...]
    status: str  # UNSET | ERROR
    status_description: str | None


def otel_ids(trace_id: str) -> tuple[int, int]:
    """OpenTelemetry trace and span ids from a record's trace id, the same every time.

    A streamtap trace id (16 hex digits) is the span id and, zero-padded, the trace id, so a
    user can paste it into a backend's search; a re-sent record (backfill) gets the same ids.
    """
    try:
        value = int(trace_id, 16) if len(trace_id) == 16 else 0
    except ValueError:
        value = 0
    if not value:  # not ours, or all zeros (invalid in OTel): a stable hash instead
        digest = hashlib.sha256(trace_id.encode()).digest()
        return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1
    return value, value


def epoch_ns(started_at: object) -> int:
    try:
        moment = datetime.fromisoformat(str(started_at).replace("Z", "+00:00"))
    except ValueError:
        raise SpanError(f"record has no usable started_at ({started_at!r})") from None
    if moment.tzinfo is None:
        raise SpanError(f"record started_at {started_at!r} has no time zone")
    return int(moment.timestamp() * 1_000_000) * 1000


def operation_name(path: str | None) -> str:
    path = path or ""
    for suffix, operation in sc.OPERATION_BY_PATH_SUFFIX:
        if path.endswith(suffix):
            return operation
    return sc.OPERATION_DEFAULT


def server_of(upstream_url: str | None) -> dict[str, AttributeValue]:
    if not upstream_url:
        return {}
    parts = urlsplit(upstream_url)
    if not parts.hostname:
        return {}
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {sc.SERVER_ADDRESS: parts.hostname, sc.SERVER_PORT: port}


def _put(attributes: dict, key: str, value: object) -> None:
    """Set an attribute if the record has it; OTel attributes cannot be None or mixed lists."""
    if value is None:
        return
    if isinstance(value, (list, tuple)):
        value = tuple(str(item) for item in value)
        if not value:
            return
    attributes[key] = value


def _attributes(record: TraceRecord, upstream_url: str | None,
                vocabulary: sc.Vocabulary) -> dict[str, AttributeValue]:
    request = record.request
    stream = record.stream
    outcome = record.outcome
    timeline = record.timeline
    fault = record.fault
    route = record.provider or record.route or ""
    attributes: dict[str, AttributeValue] = {}
    put = lambda key, value: _put(attributes, key, value)  # noqa: E731
    put(sc.GEN_AI_OPERATION_NAME, operation_name(request.path))
    put(sc.GEN_AI_PROVIDER_NAME, sc.PROVIDER_BY_ROUTE.get(route, route) or None)
    put(sc.GEN_AI_REQUEST_MODEL, request.model)
    if isinstance(request.stream, bool):
        put(sc.GEN_AI_REQUEST_STREAM, request.stream)
    put(sc.GEN_AI_RESPONSE_ID, record.correlation.response_id)
    put(sc.GEN_AI_RESPONSE_FINISH_REASONS, finish_reasons(record))
    first_chunk = timeline.first_event
    if first_chunk is not None and record.dialect != "json":  # a whole body is no chunk
        put(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, round(first_chunk / 1000, 4))
    for name, key in vocabulary.usage_attributes.items():
        put(key, stream.usage.get(name))
    attributes.update(server_of(upstream_url))
    put(sc.HTTP_RESPONSE_STATUS_CODE, record.response.status if record.response else None)
    put(sc.ERROR_TYPE, error_type(outcome))
    put(sc.SESSION_ID, record.session_id)
    put(sc.ST_SESSION_ID, record.session_id)
    put(sc.ST_MESSAGE_ID, record.message_id)
    put(sc.ST_TRACE_ID, record.trace_id)
    put(sc.ST_ROUTE, record.route)
    put(sc.ST_DIALECT, record.dialect)
    if outcome is not None:  # None only inside the recorder, before the verdict
        put(sc.ST_BOUNDARY, outcome.boundary)
        put(sc.ST_PHASE, outcome.phase)
        put(sc.ST_CONFIDENCE, outcome.confidence)
        put(sc.ST_EVIDENCE, outcome.evidence)
        put(sc.ST_RETRYABLE, outcome.retryable)
        put(sc.ST_SUMMARY, outcome.summary or None)
    if fault is not None:
        put(sc.ST_FAULT_NAME, fault.name)
        put(sc.ST_FAULT_ACTION, fault.action)
        put(sc.ST_FAULT_FIRED, fault.fired)
    put(sc.ST_MAX_GAP_MS, timeline.max_gap_ms)
    put(sc.ST_FRAME_COUNT, stream.frame_count)
    put(sc.ST_STREAM_BYTES, stream.bytes)
    put(sc.ST_DOWNSTREAM_ENDED, record.downstream.ended)
    return attributes


def error_type(outcome: Outcome | None) -> str | None:
    """`error.type` of a failed stream, from the documented closed lists (genai_conventions);
    None for a stream that did not fail."""
    if outcome is None or outcome.ok is not False:
        return None
    boundary = outcome.boundary
    if boundary not in sc.ERROR_TYPE_BOUNDARIES:
        return sc.ERROR_TYPE_OTHER
    code = outcome.evidence[0] if outcome.evidence else None
    if isinstance(code, str) and sc.ERROR_TYPE_CODE.fullmatch(code):
        return f"{boundary}:{code}"
    return boundary


def finish_reasons(record: TraceRecord) -> list[str] | None:
    """`["error"]` for every ending that did not complete (the GenAI conventions' rule for a
    stream that ended before its final event; `streamtap.boundary` says which ending), else the
    provider's reason in the one vocabulary of verdict/finish_reasons.py (`stop`, not
    `end_turn` or `STOP`), or the provider's own when that vocabulary has no word for it."""
    outcome = record.outcome
    if outcome is not None and outcome.ok is False:
        return [sc.FINISH_REASON_ERROR]
    reason = outcome.normalized_finish_reason if outcome else None
    reason = reason or record.stream.finish_reason
    return [reason] if reason else None


def _frame_events(record: TraceRecord, start_ns: int, cap: int) -> tuple[list[SpanEvent], int]:
    """One event per frame, the first and last `cap / 2` when there are more."""
    frames = record.frames
    if len(frames) > cap:
        head = cap // 2
        frames = frames[:head] + (frames[-(cap - head):] if cap - head else [])
    events = []
    for frame in frames:
        attributes: dict[str, AttributeValue] = {sc.FRAME_KIND: frame.kind,
                                                 sc.FRAME_BYTES: frame.bytes}
        _put(attributes, sc.FRAME_SHAPE, frame.shape)
        events.append(SpanEvent(sc.EVENT_FRAME, start_ns + int(frame.t_ms * 1_000_000),
                                attributes))
    total = record.stream.frame_count or 0
    return events, max(total - len(events), 0)


def record_to_span(record: TraceRecord, *, upstream_url: str | None = None,
                   frame_events: int = sc.FRAME_EVENTS_DEFAULT,
                   vocabulary: sc.Vocabulary = sc.V1_41) -> SpanData:
    """The span of one trace record. `upstream_url` is the route's provider URL (for
    `server.address`/`server.port`; the record names the route, not its URL); `vocabulary` is
    the version of the GenAI conventions the attribute names follow (the span's name is the same
    in both: `{operation} {model}`)."""
    trace_id = record.trace_id
    if not trace_id:
        raise SpanError("record has no trace_id")
    start_ns = epoch_ns(record.started_at)
    timeline = record.timeline
    end_ns = start_ns + int((timeline.duration_ms or 0.0) * 1_000_000)
    attributes = _attributes(record, upstream_url, vocabulary)
    model = record.request.model
    name = f"{attributes[sc.GEN_AI_OPERATION_NAME]} {model}" if model else \
        str(attributes[sc.GEN_AI_OPERATION_NAME])
    events: list[SpanEvent] = []
    for event_name, mark in sc.PHASE_EVENTS:
        at_ms = getattr(timeline, mark)
        if at_ms is not None:
            events.append(SpanEvent(event_name, start_ns + int(at_ms * 1_000_000), {}))
    frames, dropped = _frame_events(record, start_ns, frame_events)
    attributes[sc.ST_FRAME_EVENTS_DROPPED] = dropped
    events += frames
    events.append(SpanEvent(sc.EVENT_END, end_ns, {}))
    events.sort(key=lambda event: event.time_ns)  # stable: a phase point precedes its frame
    outcome = record.outcome
    broke = outcome is not None and outcome.ok is False
    trace, span = otel_ids(trace_id)
    return SpanData(name=name, kind="CLIENT", trace_id=trace, span_id=span, start_ns=start_ns,
                    end_ns=end_ns, attributes=attributes, events=tuple(events),
                    status="ERROR" if broke else "UNSET",
                    status_description=outcome.summary if broke else None)
