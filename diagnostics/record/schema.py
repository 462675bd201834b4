"""The trace record's schema version, and the one reader every consumer uses.

Readers (show, report, samples, replay) accept every version we ever wrote: each old version is
upgraded one step at a time, and a record from a newer streamtap is refused with what to do.
"""

from __future__ import annotations

from streamtap.diagnostics.errors import UserError

SCHEMA_VERSION = 1

# convert_N_to_N+1 functions, in order. Empty until version 2 exists.
_UPGRADES: dict[int, object] = {}


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
        record = _UPGRADES[version](record)  # type: ignore[operator]
        version = record["schema_version"]
    return record


def upstream_host(upstream_url: str | None) -> str | None:
    """`host:port` of a record's upstream_url (the route's configured host: no secret, no
    content; upstream_url never holds a user or password, proxy/serve/passthrough.py)."""
    if not upstream_url or "://" not in upstream_url:
        return None
    return upstream_url.split("://", 1)[1].split("/", 1)[0] or None


def longest_silence_ms(timeline: dict, frames: list) -> float | None:
    """The longest time without a frame, from the response headers to the end: the longest gap
    between frames (timeline.max_gap_ms, exact even when frames were dropped), or the silence
    from the last frame to the end if longer; the silence `show` names. None with no response."""
    last = frames[-1][0] if frames else timeline.get("response_headers")
    if last is None:
        return None
    final = (timeline.get("duration_ms") or 0.0) - last
    return round(max(timeline.get("max_gap_ms") or 0.0, final, 0.0), 1)


# The error shape that is itself the terminal event (Responses' `response.failed`): a client is
# told the turn failed, so a terminal that carries it is no ending to take for success.
FAILED_TERMINAL = "failed_terminal"


def terminal_after_error(record: dict) -> bool:
    """The terminal event came after an error inside the stream: a gateway that writes `[DONE]`
    (or `message_stop`) after the provider failed, which a client takes for a finished turn."""
    stream = record.get("stream") or {}
    errors = stream.get("errors") or ()
    terminal_ms = (record.get("timeline") or {}).get("terminal_event")
    if stream.get("terminal") is None or terminal_ms is None:
        return False
    if any(error.get("shape") == FAILED_TERMINAL for error in errors):
        return False
    return any((error.get("t_ms") or 0.0) <= terminal_ms for error in errors)


def index_line(record: dict, file: str | None = None) -> dict:
    """The one-line summary of a record that goes to the session's index.jsonl: everything `ls`
    and `stats` read, so neither opens a record. `file` is the record's file name in its session
    folder (a time stamp and the trace id: no secret, no content). Every key is in INDEX_KEYS, in
    that order (`stats` reads lines written so without a JSON parse)."""
    outcome = record.get("outcome") or {}
    request = record.get("request") or {}
    response = record.get("response") or {}
    timeline = record.get("timeline") or {}
    stream = record.get("stream") or {}
    fault = record.get("fault") or {}
    evidence = outcome.get("evidence") or [None]
    return {
        "schema_version": record["schema_version"],
        "trace_id": record["trace_id"],
        "started_at": record["started_at"],
        "session_id": record.get("session_id"),
        "message_id": record.get("message_id"),
        "route": record["route"],
        "provider": record.get("provider"),
        # `host:port` of the route's configured URL: from the config, never a user, a password,
        # a path or a query, so no secret and no content.
        "upstream_host": upstream_host(record.get("upstream_url")),
        "dialect": record.get("dialect"),
        "dialect_source": record.get("dialect_source"),
        "method": request.get("method"),
        "path": request.get("path"),
        "model": request.get("model"),
        "status": response.get("status"),
        "downstream_status": (record.get("downstream") or {}).get("status"),
        "ok": outcome.get("ok"),
        "boundary": outcome.get("boundary"),
        "phase": outcome.get("phase"),
        # The code the deciding rule of diagnostics/verdict/classify.py names first: a fixed
        # vocabulary (`terminal_event`, `clean_close`, `upstream_reset`, `http_429`,
        # `injected_close`, an error shape...), never a provider's or a client's text.
        "evidence": evidence[0],
        "client_sees": outcome.get("client_sees"),  # one of five fixed words: no secret, no content
        "terminal": stream.get("terminal") is not None,
        "terminal_after_error": terminal_after_error(record),
        "headers_ms": timeline.get("response_headers"),
        "ttfb_ms": timeline.get("first_byte"),
        "first_event_ms": timeline.get("first_event"),
        "duration_ms": timeline.get("duration_ms"),
        "silence_ms": longest_silence_ms(timeline, record.get("frames") or ()),
        "frames": stream.get("frame_count"),
        "fault": fault.get("name"),
        "file": file,
        "summary": outcome.get("summary"),
    }


# The keys of an index line as index_line() writes them, in order.
INDEX_KEYS = ("schema_version", "trace_id", "started_at", "session_id", "message_id", "route",
              "provider", "upstream_host", "dialect", "dialect_source", "method", "path", "model",
              "status", "downstream_status", "ok", "boundary", "phase", "evidence", "client_sees",
              "terminal", "terminal_after_error", "headers_ms", "ttfb_ms", "first_event_ms",
              "duration_ms", "silence_ms", "frames", "fault", "file", "summary")
