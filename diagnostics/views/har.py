"""A HAR 1.2 log of trace records, for a browser's network monitor (Firefox, Chrome).

One entry per record: the recorded (allowlisted, redacted) headers, no bodies unless the caller
passes bodies captured with --capture-bodies, timings mapped from the record's timeline, each
frame as an `_eventSourceMessages` item whose `data` is the frame's shape (never content), and the
outcome in `comment` and `_streamtap`. Spec: http://www.softwareishard.com/blog/har-12-spec/
"""

from __future__ import annotations

import base64
import json
from datetime import datetime

from msgspec import to_builtins

from streamtap.diagnostics.trace_record import TraceRecord

HAR_VERSION = "1.2"


def _headers(headers: dict | None) -> list[dict]:
    return [{"name": name, "value": str(value)} for name, value in (headers or {}).items()]


def _epoch(started_at: str) -> float | None:
    try:
        return datetime.fromisoformat(started_at.replace("Z", "+00:00")).timestamp()
    except (AttributeError, ValueError):
        return None


def timings(record: TraceRecord) -> dict:
    """HAR timings from the timeline: blocked, dns, connect and ssl are not measured apart
    (-1); send, wait and receive are never negative, and add up to the entry's time."""
    timeline = record.timeline
    end = timeline.duration_ms or 0.0
    headers = timeline.response_headers
    sent = timeline.request_sent
    if sent is None:
        sent = headers if headers is not None else end
    send = max(sent, 0.0)
    wait = max((headers if headers is not None else end) - sent, 0.0)
    receive = max(end - headers, 0.0) if headers is not None else 0.0
    return {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1,
            "send": round(send, 3), "wait": round(wait, 3), "receive": round(receive, 3)}


def _body(data: bytes | None, mime: str) -> dict:
    if data is None:
        return {}
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"text": base64.b64encode(data).decode(), "encoding": "base64"}


def _messages(record: TraceRecord, start: float | None) -> list[dict]:
    shapes = record.shapes
    out = []
    for frame in record.frames:
        index = frame.shape
        shape = shapes[index] if index is not None and 0 <= index < len(shapes) else None
        event = shape.get("event") if isinstance(shape, dict) else None
        out.append({
            "time": round((start or 0.0) + frame.t_ms / 1000, 6),
            "eventName": event or ("comment" if frame.kind == "keepalive" else "message"),
            "eventId": "",
            # Content-free: the frame's kind, size and shape (strings are markers).
            "data": json.dumps({"kind": frame.kind, "bytes": frame.bytes, "shape": shape},
                               separators=(",", ":")),
        })
    return out


def entry(record: TraceRecord, bodies: dict[str, bytes] | None = None) -> dict:
    """One HAR entry. `bodies` ({"request": ..., "response": ...}) only for a record made with
    --capture-bodies."""
    request = record.request
    response = record.response
    downstream = record.downstream
    outcome = record.outcome
    times = timings(record)
    start = _epoch(record.started_at or "")
    url = record.upstream_url or f"http://streamtap/{record.route}{request.path or '/'}"
    har_request = {
        "method": request.method or "GET", "url": url, "httpVersion": "HTTP/1.1",
        "cookies": [], "headers": _headers(request.headers),
        # Query values are never recorded; their names are.
        "queryString": [{"name": name, "value": "", "comment": "value not recorded"}
                        for name in request.query_keys],
        "headersSize": -1, "bodySize": request.body_bytes,
    }
    if bodies and bodies.get("request") is not None:
        har_request["postData"] = {"mimeType": request.headers.get("content-type", ""),
                                   **_body(bodies["request"], "")}
        har_request["postData"].setdefault("text", "")
    mime = (response.content_type if response else None) or ""
    status = downstream.status or (response.status if response else None) or 0
    content = {"size": record.stream.bytes, "mimeType": mime,
               **_body((bodies or {}).get("response"), mime)}
    if "text" not in content:
        content["comment"] = "body not recorded (streamtap records shapes, never content)"
    har_response = {
        "status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": [],
        "headers": _headers(response.headers if response else None), "content": content,
        "redirectURL": "", "headersSize": -1, "bodySize": downstream.bytes,
    }
    ok = outcome is not None and outcome.ok
    verdict = "ok" if ok else f"FAIL {outcome.boundary if outcome else None}/" \
                              f"{outcome.phase if outcome else None}"
    return {
        "startedDateTime": record.started_at,
        "time": round(sum(value for value in times.values() if value > 0), 3),
        "request": har_request, "response": har_response, "cache": {}, "timings": times,
        "comment": f"{verdict}: {outcome.summary if outcome else None}",
        "_streamtap": {"trace_id": record.trace_id, "session_id": record.session_id,
                       "message_id": record.message_id, "outcome": to_builtins(outcome),
                       "fault": to_builtins(record.fault), "error": to_builtins(record.error)},
        "_resourceType": "eventsource" if mime.startswith("text/event-stream") else "fetch",
        "_eventSourceMessages": _messages(record, start),
    }


def har_log(records: list[tuple[TraceRecord, dict[str, bytes] | None]], version: str) -> dict:
    """The whole HAR document; `records` are (record, captured bodies or None), oldest first."""
    return {"log": {
        "version": HAR_VERSION,
        "creator": {"name": "streamtap", "version": version},
        "pages": [],  # Firefox's importer refuses a log without it
        "entries": [entry(record, bodies) for record, bodies in records],
    }}
