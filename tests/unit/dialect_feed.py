"""Feed a dialect one frame per chunk, frame i arriving at 3 + i ms, and read the facts a user
sees in the record: events, delta keys, finish, usage, terminal, tools, errors, ids, timeline."""

from __future__ import annotations

import json

from tests.support import record_stream

PATHS = {"openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses",
         "anthropic-messages": "/v1/messages",
         "gemini": "/v1beta/models/m:streamGenerateContent?alt=sse",
         "gemini-array": "/v1beta/models/m:streamGenerateContent",
         "ollama-ndjson": "/api/chat"}
CONTENT_TYPES = {"ollama-ndjson": "application/x-ndjson", "gemini-array": "application/json"}
TOOLS = ("apply_patch", "read_file")


def request_with_tools(names=TOOLS) -> dict:
    return {"model": "m", "stream": True,
            "tools": [{"type": "function", "function": {"name": name}} for name in names]}


def feed(dialect: str, frames: list[bytes], request: dict | None = None, **kwargs) -> dict:
    """The record of a stream made of `frames`, each its own chunk, 1 ms apart from t=3; the
    record must name the dialect the stream was fed as."""
    record = record_stream(b"".join(frames), path=PATHS[dialect],
                         content_type=CONTENT_TYPES.get(dialect, "text/event-stream"),
                         request=request or request_with_tools(),
                         chunks=[len(frame) for frame in frames], t_step=1.0, **kwargs)
    assert record["dialect"] == dialect.removesuffix("-array")
    return record


def sse(obj: object, event: str | None = None) -> bytes:
    """One SSE frame of compact JSON (or raw bytes/str as the data line)."""
    if isinstance(obj, bytes):
        data = obj
    elif isinstance(obj, str):
        data = obj.encode()
    else:
        data = json.dumps(obj, separators=(",", ":")).encode()
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + data + b"\n\n"


def line(obj: object) -> bytes:
    """One NDJSON line."""
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def kinds(record: dict) -> list[str]:
    """The frame table's kinds, in order."""
    return [entry[2] for entry in record["frames"]]


def facts(record: dict) -> dict:
    """The stream facts most tests pin, in one comparable dict."""
    stream = record["stream"]
    return {key: stream[key] for key in ("event_counts", "delta_keys", "finish_reason", "usage",
                                         "terminal", "unknown_types", "protocol_errors")}
