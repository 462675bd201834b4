"""What each dialect's errors look like on the wire, for streamtap to inject (fault injection) or
replay. Built from the shapes the providers document; the text is streamtap's own, never a
provider's or a user's.
"""

from __future__ import annotations

import json

DEFAULT_MESSAGE = "streamtap injected error"

# Per dialect: the native in-stream error and its defaults (type, code).
_NATIVE_DEFAULTS = {
    "anthropic-messages": ("overloaded_error", None),
    "openai-responses": ("server_error", "server_error"),
    "openai-chat": ("server_error", None),
    "gemini": ("UNAVAILABLE", 503),
    "ollama-ndjson": (None, None),
}
_STATUS_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                 403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                 429: "rate_limit_error", 500: "api_error", 502: "api_error", 503: "api_error",
                 529: "overloaded_error"}
_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                  404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                  503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def _sse(obj: dict, event: str | None = None, crlf: bool = False) -> bytes:
    end = "\r\n" if crlf else "\n"
    head = f"event: {event}{end}" if event else ""
    return f"{head}data: {json.dumps(obj, separators=(',', ':'))}{end}{end}".encode()


def wrapped_error_frame(dialect: str, type: str | None = None, code: object = None,
                        message: str | None = None) -> bytes:
    """The gateway shape: a data frame `{"error": {...}}` with no `type` (opencode 21979)."""
    error = {"code": code if code is not None else "", "message": message or DEFAULT_MESSAGE,
             "type": type or "server_error"}
    body = {"error": error, "request_id": ""}
    if dialect == "ollama-ndjson":
        return json.dumps(body).encode() + b"\n"
    return _sse(body, crlf=dialect == "gemini")


def native_error_frame(dialect: str, type: str | None = None, code: object = None,
                       message: str | None = None, sequence_number: int = 0) -> bytes:
    """The dialect's own mid-stream error event."""
    default_type, default_code = _NATIVE_DEFAULTS.get(dialect, ("server_error", None))
    type = type or default_type
    code = code if code is not None else default_code
    message = message or DEFAULT_MESSAGE
    if dialect == "anthropic-messages":
        return _sse({"type": "error", "error": {"type": type, "message": message}}, "error")
    if dialect == "openai-responses":
        return _sse({"type": "error", "code": code, "message": message, "param": None,
                     "sequence_number": sequence_number}, "error")
    if dialect == "gemini":
        return _sse({"error": {"code": code, "message": message, "status": type}}, crlf=True)
    if dialect == "ollama-ndjson":
        return json.dumps({"error": message}).encode() + b"\n"
    # openai-chat and any other OpenAI-style stream: a bare error chunk, no [DONE] after it
    return _sse({"error": {"message": message, "type": type, "param": None, "code": code}})


def body_error_frame(dialect: str, body: str) -> bytes:
    """A data frame (an NDJSON line for Ollama) carrying `body`, one line of JSON text, as given:
    any shape at all, such as `{"code":"InternalError","message":"..."}`, which no dialect
    documents and some servers send."""
    if dialect == "ollama-ndjson":
        return body.encode() + b"\n"
    end = "\r\n" if dialect == "gemini" else "\n"
    return f"data: {body}{end}{end}".encode()


def error_body(dialect: str | None, status: int, type: str | None = None, code: object = None,
               message: str | None = None) -> dict:
    """The JSON body a provider of this dialect answers an HTTP error with."""
    message = message or f"{DEFAULT_MESSAGE} (HTTP {status})"
    if dialect == "anthropic-messages":
        return {"type": "error", "error": {"type": type or _STATUS_TYPES.get(status, "api_error"),
                                           "message": message}, "request_id": "req_streamtap"}
    if dialect == "gemini":
        return {"error": {"code": status, "message": message,
                          "status": type or _GEMINI_STATUS.get(status, "UNKNOWN")}}
    if dialect == "ollama-ndjson":
        return {"error": message}
    openai_type = {429: "rate_limit_exceeded", 401: "invalid_request_error",
                   400: "invalid_request_error"}.get(status, "server_error")
    return {"error": {"message": message, "type": type or openai_type, "param": None,
                      "code": code if code is not None else (
                          "rate_limit_exceeded" if status == 429 else None)}}
