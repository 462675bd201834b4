"""The trace record's schema version, and the one reader every consumer uses.

Readers (show, report, samples, replay) accept every version we ever wrote: each old version is
upgraded one step at a time, and a record from a newer streamtap is refused with what to do.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

# convert_N_to_N+1 functions, in order. Empty until version 2 exists.
_UPGRADES: dict[int, object] = {}


class RecordVersionError(ValueError):
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


def index_line(record: dict, file: str | None = None) -> dict:
    """The one-line summary of a record that goes to the session's index.jsonl: everything `ls`
    shows, so listing never opens a record. `file` is the record's file name in its session
    folder (a time stamp and the trace id: no secret, no content)."""
    outcome = record.get("outcome") or {}
    request = record.get("request") or {}
    response = record.get("response") or {}
    timeline = record.get("timeline") or {}
    fault = record.get("fault") or {}
    return {
        "schema_version": record["schema_version"],
        "trace_id": record["trace_id"],
        "started_at": record["started_at"],
        "session_id": record.get("session_id"),
        "message_id": record.get("message_id"),
        "route": record["route"],
        "provider": record.get("provider"),
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
        "client_sees": outcome.get("client_sees"),  # one of five fixed words: no secret, no content
        "ttfb_ms": timeline.get("first_byte"),
        "duration_ms": timeline.get("duration_ms"),
        "frames": (record.get("stream") or {}).get("frame_count"),
        "fault": fault.get("name"),
        "file": file,
        "summary": outcome.get("summary"),
    }
