"""Samples: content-free skeletons of real streams, built from trace records, that replay can play.

A sample keeps what a stream looked like (status, allowlisted headers, frame timing, sizes, kinds
and shapes) and how it ended, never a word of content: it is made only of record fields that are
content-free by construction (see shapes.py and redact.py). A sample describes the decoded stream
(a gzip stream replays uncompressed) and, for an injected fault, what the client saw.
"""

from __future__ import annotations

import hashlib
import json

from msgspec import to_builtins

from streamtap.diagnostics.dialects import dialect_for_path
from streamtap.diagnostics.errors import UserError
from streamtap.diagnostics.trace_record import StreamError, TraceRecord, stated

SAMPLE_SCHEMA_VERSION = 1
SAMPLE_ENDINGS = ("terminal", "clean_close", "reset", "truncated", "stalled", "client_gone",
           "http_error", "no_response")
# What each injected action looked like to the client.
_INJECTED_ENDINGS = {"reset": "reset", "truncate": "truncated", "close": "clean_close",
                     "drop_terminal": "clean_close", "error_chunk": "clean_close",
                     "stall": "stalled", "http_error": "http_error",
                     "bad_chunk_size": "truncated"}
# Request summary fields a sample keeps: flags, counts and settings, never content.
REQUEST_FIELDS = ("method", "path", "model", "stream", "message_count", "tool_count",
                  "tool_names", "tool_choice", "reasoning", "max_tokens", "temperature",
                  "stream_options.include_usage")
# Headers that describe the wire encoding of the original, not the decoded stream a sample holds.
_WIRE_HEADERS = ("content-encoding", "content-length")


class SampleError(UserError, ValueError):
    pass


def sample_ending(record: TraceRecord) -> str:
    """How the stream ended, as the client saw it."""
    fault = record.fault
    client_gone = record.downstream.ended == "client_gone"
    if fault is not None and fault.fired and fault.action in _INJECTED_ENDINGS:
        return "client_gone" if client_gone else _INJECTED_ENDINGS[fault.action]
    response = record.response
    if response is None:
        return "no_response"
    if response.status >= 400:
        return "http_error"
    if client_gone:
        return "client_gone"
    if record.watchdog.fired:
        return "stalled"
    upstream_error = record.error is not None and record.error.where == "upstream_read"
    evidence = record.outcome.evidence if record.outcome else []
    if "upstream_reset" in evidence or "shutdown_forced" in evidence:  # forced: the client is reset
        return "reset"
    if "upstream_truncated" in evidence or upstream_error or "proxy_shutdown" in evidence:
        return "truncated"
    return "terminal" if record.stream.terminal else "clean_close"


def answered_by_streamtap(record: TraceRecord) -> bool:
    """streamtap refused the request itself (no such route, a bad fault header, too large, a
    header too long): nothing reached a provider, so the record says nothing about one."""
    return (record.outcome is not None and record.outcome.boundary == "proxy"
            and record.response is None)


def sample_dialect(record: TraceRecord) -> str | None:
    return streamed_dialect(record.dialect,
                            record.response.status if record.response else None,
                            request_fields(record))


def request_fields(record: TraceRecord) -> dict:
    """The request summary's REQUEST_FIELDS the request stated, under their record names."""
    stated = to_builtins(record.request)
    return {key: stated[key] for key in REQUEST_FIELDS if stated.get(key) is not None}


def streamed_dialect(dialect: str | None, status: int | None, request: dict) -> str | None:
    """An HTTP error body (read as `json`) or no response belongs to the dialect the request
    streams, so replay can answer that dialect's requests with it."""
    if dialect not in (None, "json") or (status is not None and status < 400):
        return dialect
    by_path = dialect_for_path(request.get("path") or "")
    streaming = request.get("stream") is True or by_path == "gemini" or (
        by_path == "ollama-ndjson" and request.get("stream") is not False)
    return by_path if by_path and streaming else dialect


def _error_shape(error: StreamError) -> dict:
    """An in-stream error's shape, never its message (it can echo input)."""
    shape = to_builtins(error)
    del shape["message"]
    return shape


def build_sample(record: TraceRecord) -> dict:
    """A sample from a trace record (any schema version we wrote, as read by the schema)."""
    notes = []
    response = record.response
    timeline = record.timeline
    start = timeline.response_headers or 0.0
    frames = [[round(frame.t_ms - start, 1), frame.bytes, frame.kind, frame.shape]
              for frame in record.frames]
    if frames and not record.shapes:
        notes.append("frames have no shapes: the record predates shapes; replay pads frames "
                     "with comments")
    if record.frames_dropped:
        notes.append(f"{record.frames_dropped} frames were dropped from the record's middle; "
                     "the sample holds its head and tail")
    encoding = response.content_encoding if response else None
    if encoding:
        notes.append(f"the original body was {encoding}-encoded; the sample describes the "
                     "decoded stream and replays it uncompressed")
    headers = {name: value for name, value in (response.headers if response else {}).items()
               if name not in _WIRE_HEADERS}
    error = record.error
    end_ms = timeline.upstream_end or timeline.downstream_end or 0.0
    stream = record.stream
    outcome = record.outcome
    sample = {
        "schema_version": SAMPLE_SCHEMA_VERSION,
        "source_trace_id": record.trace_id,
        "provider": record.provider,
        "route": record.route,
        "dialect": sample_dialect(record),
        "model": record.request.model,
        "request": request_fields(record),
        "status": response.status if response else None,
        "content_type": response.content_type if response else None,
        "headers": headers,
        "decoded": True,
        "original_encoding": encoding,
        # Kinds and codes only: a provider's error message can echo its input.
        "error": {"where": error.where, "type": error.type, "code": error.code,
                  "status": stated(error.status), "error_type": stated(error.error_type),
                  "error_code": stated(error.error_code)} if error is not None else None,
        "frames": frames,
        "shapes": record.shapes,
        "body_shape": stream.body_shape,
        "timing": {"response_headers_ms": start, "end_ms": round(max(end_ms - start, 0.0), 1),
                   "first_byte_ms": timeline.first_byte,
                   "first_progress_ms": timeline.first_progress,
                   "max_gap_ms": timeline.max_gap_ms},
        "stream": {"bytes": stream.bytes, "terminal": stream.terminal,
                   "finish_reason": stream.finish_reason, "event_counts": stream.event_counts,
                   "delta_keys": stream.delta_keys, "usage": stream.usage,
                   "tool_calls": to_builtins(stream.tool_calls),
                   "unknown_types": stream.unknown_types,
                   "errors": [_error_shape(error) for error in stream.errors]},
        "ending": sample_ending(record),
        "outcome": {"boundary": outcome.boundary if outcome else None,
                    "phase": outcome.phase if outcome else None,
                    "evidence": outcome.evidence if outcome else None},
        "injected": bool(record.fault and record.fault.fired),
        "notes": notes,
    }
    return sample


def sample_digest(sample: dict) -> str:
    """Identity of a sample's content: the same stream exported twice is written once."""
    body = {key: value for key, value in sample.items() if key != "source_trace_id"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def sample_stem(sample: dict) -> str:
    """`<provider>__<dialect>__<ending>`; the exporter appends `__<n>.sample.json`."""
    def part(value: object) -> str:
        text = str(value or "unknown")
        return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text)[:48]

    return f"{part(sample['provider'])}__{part(sample['dialect'])}__{part(sample['ending'])}"


def check_sample(sample: object) -> dict:
    """Validate a loaded sample; refuse one from a newer streamtap with what to do."""
    if not isinstance(sample, dict) or "frames" not in sample or "ending" not in sample:
        raise SampleError("not a streamtap sample (no frames/ending); export one with "
                          "`streamtap samples export`")
    version = sample.get("schema_version")
    if not isinstance(version, int) or version > SAMPLE_SCHEMA_VERSION:
        raise SampleError(f"sample schema_version {version!r} is newer than this streamtap "
                          f"understands ({SAMPLE_SCHEMA_VERSION}); upgrade streamtap")
    if sample["ending"] not in SAMPLE_ENDINGS:
        raise SampleError(f"unknown ending {sample['ending']!r}; expected one of "
                          f"{', '.join(SAMPLE_ENDINGS)}")
    return sample
