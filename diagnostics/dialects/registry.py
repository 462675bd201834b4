"""The dialects by name: the names are a contract (route config uses them), and a dialect's module
is imported the first time it is needed, so a stream only pays for the dialect it speaks. Kept out
of the package's __init__ because the sniffer, which __init__ imports, looks dialects up too.
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


def dialect_class(name: str | None) -> type[Dialect] | None:
    """The dialect registered under `name`, or None."""
    if not name:
        return None
    if name in _BUILTIN:
        return _BUILTIN[name]
    entry = _DIALECTS.get(name)
    if entry is None:
        return None
    module = importlib.import_module(f"{__package__}.{entry[0]}")
    cls = getattr(module, entry[1])
    _BUILTIN[name] = cls
    return cls
