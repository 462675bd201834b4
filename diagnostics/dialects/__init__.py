"""Provider dialects, and how one is chosen for a response.

Dialects are looked up by name (the names are a contract: route config uses them) and imported
on first use, so a stream only pays for the dialect it speaks.
"""

from __future__ import annotations

import importlib

from streamtap.diagnostics.dialects.base import Dialect, GenericSse, Opaque
from streamtap.diagnostics.dialects.json_body import JsonBody

# name -> (module, class). The module is imported the first time the dialect is needed.
_DIALECTS: dict[str, tuple[str, str]] = {
    "openai-chat": ("openai_chat", "OpenAIChat"),
    "openai-responses": ("openai_responses", "OpenAIResponses"),
    "anthropic-messages": ("anthropic_messages", "AnthropicMessages"),
    "gemini": ("gemini", "Gemini"),
    "gemini-array": ("gemini", "GeminiArray"),
    "ollama-ndjson": ("ollama_ndjson", "OllamaNdjson"),
}
_BUILTIN: dict[str, type[Dialect]] = {
    GenericSse.name: GenericSse,
    JsonBody.name: JsonBody,
    Opaque.name: Opaque,
}
# Names a user may configure on a route.
DIALECT_NAMES = tuple(name for name in (*_DIALECTS, *_BUILTIN) if name != "gemini-array")

# Path endings that name a dialect, checked in order.
_BY_PATH = (
    ("/chat/completions", "openai-chat"),
    ("/responses", "openai-responses"),
    ("/messages", "anthropic-messages"),
    (":streamGenerateContent", "gemini"),
    ("/api/chat", "ollama-ndjson"),
    ("/api/generate", "ollama-ndjson"),
)


def dialect_class(name: str | None) -> type[Dialect] | None:
    """The dialect registered under `name`, or None."""
    if not name:
        return None
    if name in _BUILTIN:
        return _BUILTIN[name]
    entry = _DIALECTS.get(name)
    if entry is None:
        return None
    module = importlib.import_module(f"{__name__}.{entry[0]}")
    cls = getattr(module, entry[1])
    _BUILTIN[name] = cls
    return cls


def dialect_for_path(path: str) -> str | None:
    path = path.split("?", 1)[0].rstrip("/")
    for ending, name in _BY_PATH:
        if path.endswith(ending):
            return name
    return None


def choose_dialect(configured: str | None, path: str, content_type: str | None) -> type[Dialect]:
    """A JSON body is a `json` reply (Gemini's streamed JSON array aside); a stream speaks the
    route's configured dialect, else the one its path names, else a generic one by content type."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    by_path = dialect_for_path(path)
    if mime == "application/json" or mime.endswith("+json"):
        if by_path == "gemini" or configured == "gemini":
            return dialect_class("gemini-array")
        return JsonBody
    streaming = mime in ("text/event-stream", "application/x-ndjson")
    if configured or streaming:
        found = dialect_class(configured or by_path)
        if found is not None:
            return found
        if mime == "application/x-ndjson":
            return dialect_class("ollama-ndjson")
        if mime == "text/event-stream":
            return GenericSse
    return Opaque
