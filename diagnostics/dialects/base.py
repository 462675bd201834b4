"""The contract every provider dialect implements: frames in, normalized events out.

A dialect is fed decoded frames in order, with the time each arrived, and writes what it learns
into a `StreamState`. It returns the frame's kind (the most telling event it carried) for the
record's frame table. It must be cheap: probe the bytes before decoding JSON, and never keep
content (text, arguments, output).
"""

from __future__ import annotations

import json

from streamtap.diagnostics.decode.jsonarray import JsonArrayDecoder
from streamtap.diagnostics.decode.sse import DEFAULT_MAX_LINE, Frame, NdjsonDecoder, SseDecoder
from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.dialects.stream import StreamState
from streamtap.diagnostics.dialects.usage import normalize_usage

# How the response body is cut into frames before a dialect sees them.
FRAMING_SSE = "sse"
FRAMING_NDJSON = "ndjson"
FRAMING_JSON_ARRAY = "json-array"
FRAMING_BODY = "body"  # one whole JSON body, handed over at the end
FRAMING_NONE = "none"  # bytes counted, never parsed


def frame_decoder(framing: str, max_line: int = DEFAULT_MAX_LINE, keep_fields: bool = False):
    """The incremental decoder that cuts a body of this framing into frames; None for a body
    read whole (FRAMING_BODY) or not at all (FRAMING_NONE). `keep_fields`: an SSE decoder holds
    unknown field lines for `take_fields()` (the recorder reads them for errors)."""
    if framing == FRAMING_SSE:
        return SseDecoder(max_line, keep_fields=keep_fields)
    if framing == FRAMING_NDJSON:
        return NdjsonDecoder(max_line)
    if framing == FRAMING_JSON_ARRAY:
        return JsonArrayDecoder(max_line)
    return None


class Dialect:
    name = "unknown"
    framing = FRAMING_SSE
    # Names of the frames that end a well-formed stream (what `drop_terminal` would remove).
    terminal_names: tuple[str, ...] = ()
    # What finalizes a tool call on the wire, as a summary names it ("no finish_reason"), for a
    # dialect whose calls can stay open after their arguments arrived whole.
    tool_call_end: str | None = None

    def __init__(self, state: StreamState):
        self.state = state

    def on_frame(self, frame: Frame, t_ms: float) -> str:
        """Fold one complete frame into the state; return its kind."""
        self.state.emit(ev.UNKNOWN, t_ms)
        return ev.UNKNOWN

    def on_body(self, body: bytes, t_ms: float) -> None:
        """For FRAMING_BODY dialects: the whole (decoded) body at the end of the response."""

    def on_end(self, t_ms: float) -> None:
        """The stream ended (however it ended): settle what only the end can tell."""


def compact_json(value: object) -> str:
    """A decoded JSON value as compact text: a whole call's arguments, sized (and checked) the
    same however the provider spaced them."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def load_json(data: bytes, state: StreamState) -> object:
    """Decode a frame's JSON, counting (not raising) what does not parse: a bad frame is evidence."""
    try:
        return json.loads(data)
    except ValueError:
        state.protocol_error("invalid_json")
        return None


def error_fields(obj: object) -> dict | None:
    """`{type, code, message}` from any provider's error object (a body or a data frame), or
    None if it has none. Unwraps the `{"error":{"type":"error",...,"error":{...}}}` envelope."""
    if not isinstance(obj, dict):
        return None
    error = obj.get("error")
    if isinstance(error, dict):
        inner = error.get("error")
        if isinstance(inner, dict):
            error = inner
        return {"type": error.get("type") or error.get("status"), "code": error.get("code"),
                "message": error.get("message")}
    if isinstance(error, str):  # Ollama: {"error": "..."}
        return {"type": None, "code": None, "message": error}
    return None


def wrapped_error(obj: object, state: StreamState, t_ms: float,
                  shape: str = "wrapped_chunk") -> bool:
    """The gateway/OpenAI shape: a data frame whose JSON has a truthy top-level `error`."""
    if not isinstance(obj, dict) or not obj.get("error"):
        return False
    fields = error_fields(obj) or {}
    state.stream_error(shape, t_ms, type=fields.get("type"), code=fields.get("code"),
                       message=fields.get("message"))
    return True


# The evidence code, and the record's error `shape`, of an error in a frame no dialect documents.
UNKNOWN_SHAPE = "error_frame_unknown_shape"


def error_like(obj: object) -> dict | None:
    """`{type, code, message}` of an error-like object in a frame no dialect documents: an
    `error` member, or a `code` plus a string `message` (GPUStack's and a Responses gateway's
    `{"code":"InternalError","message":"..."}`); None if it is neither. The caller has already
    ruled out a known event and a content delta."""
    if not isinstance(obj, dict):
        return None
    if obj.get("error"):
        return error_fields(obj)
    code, message = obj.get("code"), obj.get("message")
    if code in (None, "") or isinstance(code, (bool, dict, list)) or not isinstance(message, str):
        return None
    return {"type": obj.get("type") or obj.get("status"), "code": code, "message": message}


def unknown_shape_error(obj: object, state: StreamState, t_ms: float,
                        field: str | None = None) -> bool:
    """Record an error-like object in an undocumented frame (or, `field` named, on an unknown
    SSE field line) as an in-band provider error; False if `obj` is not error-like. The message
    goes through `stream_error`, like every provider message."""
    fields = error_like(obj)
    if fields is None:
        return False
    state.stream_error(UNKNOWN_SHAPE, t_ms, field=field, **fields)
    return True


def field_line_error(name: str, value: bytes, state: StreamState, t_ms: float) -> bool:
    """An unknown SSE field line (`error: {...}`) whose value is JSON with an error-like object.
    Clients never see it (WHATWG ignores unknown fields), so it is evidence for the record only;
    a value that is not such JSON is no protocol error of the stream and is left alone. (The
    decoder holds no value longer than its MAX_FIELD_VALUE.)"""
    if value[:1] != b"{":
        return False
    try:
        obj = json.loads(value)
    except ValueError:
        return False
    return unknown_shape_error(obj, state, t_ms, field=name)


class GenericSse(Dialect):
    """Any SSE stream we have no dialect for: frames timed and counted, and only the markers every
    OpenAI-style stream shares (`[DONE]`, a wrapped `{"error":...}` chunk) recognised."""

    name = "sse"
    terminal_names = ("[DONE]",)

    def on_frame(self, frame: Frame, t_ms: float) -> str:
        data = frame.data
        if data == b"[DONE]":
            self.state.emit(ev.META, t_ms)
            self.state.set_terminal("[DONE]", t_ms)
            return ev.META
        if b'"error"' in data:
            obj = load_json(data, self.state)
            if wrapped_error(obj, self.state, t_ms):
                # The same chunk may carry its id and the final usage (OpenRouter does).
                self.state.set_response_id(obj.get("id"))
                counts = normalize_usage(obj.get("usage"))
                if counts:
                    self.state.set_usage(**counts)
                    self.state.emit(ev.USAGE, t_ms)
                return ev.ERROR
        elif b'"code"' in data and b'"message"' in data:
            if unknown_shape_error(load_json(data, self.state), self.state, t_ms):
                return ev.ERROR
        self.state.emit(ev.UNKNOWN, t_ms)
        return ev.UNKNOWN


class Opaque(Dialect):
    """A body we do not understand: its bytes are counted, nothing is inferred."""

    name = "unknown"
    framing = FRAMING_NONE
