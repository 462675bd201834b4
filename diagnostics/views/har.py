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

from streamtap.diagnostics.record.schema import upgrade

HAR_VERSION = "1.2"


def _headers(headers: dict | None) -> list[dict]:
    return [{"name": name, "value": str(value)} for name, value in (headers or {}).items()]


def _epoch(started_at: str) -> float | None:
    try:
        return datetime.fromisoformat(started_at.replace("Z", "+00:00")).timestamp()
    except (AttributeError, ValueError):
        return None


def timings(record: dict) -> dict:
    """HAR timings from the timeline: blocked, dns, connect and ssl are not measured apart
    (-1); send, wait and receive are never negative, and add up to the entry's time."""
    timeline = record.get("timeline") or {}
    end = timeline.get("duration_ms") or 0.0
    headers = timeline.get("response_headers")
    sent = timeline.get("request_sent")
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


def _messages(record: dict, start: float | None) -> list[dict]:
    shapes = record.get("shapes") or []
    out = []
    for frame in record.get("frames") or ():
        t_ms, size, kind = frame[0], frame[1], frame[2]
        shape_index = frame[3] if len(frame) > 3 else None
        shape = shapes[shape_index] if isinstance(shape_index, int) and \
            0 <= shape_index < len(shapes) else None
        event = shape.get("event") if isinstance(shape, dict) else None
        out.append({
            "time": round((start or 0.0) + t_ms / 1000, 6),
            "eventName": event or ("comment" if kind == "keepalive" else "message"),
            "eventId": "",
            # Content-free: the frame's kind, size and shape (strings are markers).
            "data": json.dumps({"kind": kind, "bytes": size, "shape": shape},
                               separators=(",", ":")),
        })
    return out


def entry(record: dict, bodies: dict[str, bytes] | None = None) -> dict:
    """One HAR entry. `bodies` ({"request": ..., "response": ...}) only for a record made with
    --capture-bodies."""
    record = upgrade(record)
    request = record.get("request") or {}
    response = record.get("response") or {}
    downstream = record.get("downstream") or {}
    outcome = record.get("outcome") or {}
    stream = record.get("stream") or {}
    times = timings(record)
    start = _epoch(record.get("started_at") or "")
    url = record.get("upstream_url") or f"http://streamtap/{record.get('route')}" \
                                         f"{request.get('path') or '/'}"
    request_headers = request.get("headers") or {}
    har_request = {
        "method": request.get("method") or "GET", "url": url, "httpVersion": "HTTP/1.1",
        "cookies": [], "headers": _headers(request_headers),
        # Query values are never recorded; their names are.
        "queryString": [{"name": name, "value": "", "comment": "value not recorded"}
                        for name in request.get("query_keys") or ()],
        "headersSize": -1, "bodySize": request.get("body_bytes", -1),
    }
    if bodies and bodies.get("request") is not None:
        har_request["postData"] = {"mimeType": request_headers.get("content-type", ""),
                                   **_body(bodies["request"], "")}
        har_request["postData"].setdefault("text", "")
    mime = response.get("content_type") or ""
    status = downstream.get("status") or response.get("status") or 0
    content = {"size": stream.get("bytes", 0), "mimeType": mime,
               **_body((bodies or {}).get("response"), mime)}
    if "text" not in content:
        content["comment"] = "body not recorded (streamtap records shapes, never content)"
    har_response = {
        "status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": [],
        "headers": _headers(response.get("headers")), "content": content, "redirectURL": "",
        "headersSize": -1, "bodySize": downstream.get("bytes", -1),
    }
    verdict = "ok" if outcome.get("ok") else f"FAIL {outcome.get('boundary')}/" \
                                               f"{outcome.get('phase')}"
    return {
        "startedDateTime": record.get("started_at"),
        "time": round(sum(value for value in times.values() if value > 0), 3),
        "request": har_request, "response": har_response, "cache": {}, "timings": times,
        "comment": f"{verdict}: {outcome.get('summary')}",
        "_streamtap": {"trace_id": record.get("trace_id"),
                       "session_id": record.get("session_id"),
                       "message_id": record.get("message_id"), "outcome": outcome,
                       "fault": record.get("fault"), "error": record.get("error")},
        "_resourceType": "eventsource" if mime.startswith("text/event-stream") else "fetch",
        "_eventSourceMessages": _messages(record, start),
    }


def har_log(records: list[tuple[dict, dict[str, bytes] | None]], version: str) -> dict:
    """The whole HAR document; `records` are (record, captured bodies or None), oldest first."""
    return {"log": {
        "version": HAR_VERSION,
        "creator": {"name": "streamtap", "version": version},
        "pages": [],  # Firefox's importer refuses a log without it
        "entries": [entry(record, bodies) for record, bodies in records],
    }}
