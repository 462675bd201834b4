"""The trace record's schema: its version, the one reader and writer every consumer uses, and
the projections of a record (the index line, the silence `show` names).

Readers (show, report, samples, replay) accept every version we ever wrote: each old version is
upgraded one step at a time, then decoded into the typed record (diagnostics/trace_record.py),
which checks every field's type; a record from a newer streamtap is refused with what to do.

Version 2 is the typed record: every field is written, None when unknown. Version 1 left out what
it did not know (a request's `model`, an error's `status`, sections added later such as `close`),
and the types' defaults are exactly those absences, so its upgrade is the version number.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from streamtap.diagnostics.errors import UserError
from streamtap.diagnostics.trace_record import Frame, Timeline, TraceRecord
from streamtap.diagnostics.verdict.outward import client_fields

SCHEMA_VERSION = 2


def _v1_to_v2(record: dict) -> dict:
    """Version 1 records written before the outcome said what the client sees get it derived
    (a function of the verdict and the stream alone, verdict/outward.py)."""
    outcome = record.get("outcome")
    if isinstance(outcome, dict):
        stream = record.get("stream") if isinstance(record.get("stream"), dict) else {}
        called = any(isinstance(call, dict) and call.get("completed")
                     for call in stream.get("tool_calls") or ())
        outcome = {**outcome, **client_fields(outcome, record.get("dialect"),
                                              stream.get("finish_reason"), called)}
    return {**record, "outcome": outcome, "schema_version": 2}


# convert_N_to_N+1 functions, in order.
_UPGRADES: dict[int, Callable[[dict], dict]] = {1: _v1_to_v2}
_ENCODER = msgspec.json.Encoder()


class RecordVersionError(UserError, ValueError):
    """A record this streamtap cannot read."""


def upgrade(record: dict) -> dict:
    """Return `record` in the current schema, or raise RecordVersionError saying what to do."""
    version = record.get("schema_version")
    if not isinstance(version, int) or version < 1:
        raise RecordVersionError(
            f"not a streamtap trace record (schema_version={version!r}); "
            "point the command at a streamtap trace directory")
    if version > SCHEMA_VERSION:
        raise RecordVersionError(
            f"record {record.get('trace_id')} has schema_version {version}, newer than this "
            f"streamtap understands ({SCHEMA_VERSION}); upgrade streamtap to read it")
    while version < SCHEMA_VERSION:
        record = _UPGRADES[version](record)
        version = record["schema_version"]
    return record


def record_from_dict(record: dict) -> TraceRecord:
    """A parsed record file (any version we wrote) as the typed record, or RecordVersionError
    saying which field is wrong."""
    if not isinstance(record, dict):
        raise RecordVersionError("not a streamtap trace record (not a JSON object); point the "
                                 "command at a streamtap trace directory")
    current = upgrade(record)
    try:
        return msgspec.convert(current, TraceRecord)
    except msgspec.ValidationError as exc:
        raise RecordVersionError(
            f"record {record.get('trace_id')} does not match schema_version "
            f"{current['schema_version']}: {exc}; was the file edited by hand?") from None


def encode_record(record: TraceRecord) -> bytes:
    """A record's file contents: compact JSON, fields in the types' order (the verdict right after
    the identity, so `head -c 600` of a file shows it)."""
    return _ENCODER.encode(record)


def record_as_dict(record: TraceRecord) -> dict:
    """The record as JSON-ready builtins, for the views that print it whole (`show --json`)."""
    return msgspec.to_builtins(record)


def upstream_host(upstream_url: str | None) -> str | None:
    """`host:port` of a record's upstream_url (the route's configured host: no secret, no
    content; upstream_url never holds a user or password, proxy/serve/passthrough.py)."""
    if not upstream_url or "://" not in upstream_url:
        return None
    return upstream_url.split("://", 1)[1].split("/", 1)[0] or None


def longest_silence_ms(timeline: Timeline, frames: list[Frame]) -> float | None:
    """The longest time without a frame, from the response headers to the end: the longest gap
    between frames (timeline.max_gap_ms, exact even when frames were dropped), or the silence
    from the last frame to the end if longer; the silence `show` names. None with no response."""
    last = frames[-1].t_ms if frames else timeline.response_headers
    if last is None:
        return None
    final = (timeline.duration_ms or 0.0) - last
    return round(max(timeline.max_gap_ms or 0.0, final, 0.0), 1)


# The error shape that is itself the terminal event (Responses' `response.failed`): a client is
# told the turn failed, so a terminal that carries it is no ending to take for success.
FAILED_TERMINAL = "failed_terminal"


def terminal_after_error(record: TraceRecord) -> bool:
    """The terminal event came after an error inside the stream: a gateway that writes `[DONE]`
    (or `message_stop`) after the provider failed, which a client takes for a finished turn."""
    errors = record.stream.errors
    terminal_ms = record.timeline.terminal_event
    if record.stream.terminal is None or terminal_ms is None:
        return False
    if any(error.shape == FAILED_TERMINAL for error in errors):
        return False
    return any((error.t_ms or 0.0) <= terminal_ms for error in errors)


def index_line(record: TraceRecord, file: str | None = None) -> dict:
    """The one-line summary of a record that goes to the session's index.jsonl: everything `ls`
    and `stats` read, so neither opens a record. `file` is the record's file name in its session
    folder (a time stamp and the trace id: no secret, no content). Every key is in INDEX_KEYS, in
    that order (`stats` reads lines written so without a JSON parse). `status` is the upstream's
    answer and `downstream_status` the client's, as in the log line (proxy/logs.py)."""
    outcome = record.outcome
    request = record.request
    timeline = record.timeline
    return {
        "schema_version": record.schema_version,
        "trace_id": record.trace_id,
        "started_at": record.started_at,
        "session_id": record.session_id,
        "message_id": record.message_id,
        "route": record.route,
        "provider": record.provider,
        # `host:port` of the route's configured URL: from the config, never a user, a password,
        # a path or a query, so no secret and no content.
        "upstream_host": upstream_host(record.upstream_url),
        "dialect": record.dialect,
        "dialect_source": record.dialect_source,
        "method": request.method,
        "path": request.path,
        "model": request.model,
        "status": record.response.status if record.response else None,
        "downstream_status": record.downstream.status,
        "ok": outcome.ok if outcome else None,
        "boundary": outcome.boundary if outcome else None,
        "phase": outcome.phase if outcome else None,
        # The code the deciding rule of diagnostics/verdict/classify.py names first: a fixed
        # vocabulary (`terminal_event`, `clean_close`, `upstream_reset`, `http_429`,
        # `injected_close`, an error shape...), never a provider's or a client's text.
        "evidence": outcome.evidence[0] if outcome and outcome.evidence else None,
        # one of five fixed words: no secret, no content
        "client_sees": outcome.client_sees if outcome else None,
        "terminal": record.stream.terminal is not None,
        "terminal_after_error": terminal_after_error(record),
        "headers_ms": timeline.response_headers,
        "ttfb_ms": timeline.first_byte,
        "first_event_ms": timeline.first_event,
        "duration_ms": timeline.duration_ms,
        "silence_ms": longest_silence_ms(timeline, record.frames),
        "frames": record.stream.frame_count,
        "fault": record.fault.name if record.fault else None,
        "file": file,
        "summary": outcome.summary if outcome else None,
    }


# The keys of an index line as index_line() writes them, in order.
INDEX_KEYS = ("schema_version", "trace_id", "started_at", "session_id", "message_id", "route",
              "provider", "upstream_host", "dialect", "dialect_source", "method", "path", "model",
              "status", "downstream_status", "ok", "boundary", "phase", "evidence", "client_sees",
              "terminal", "terminal_after_error", "headers_ms", "ttfb_ms", "first_event_ms",
              "duration_ms", "silence_ms", "frames", "fault", "file", "summary")
