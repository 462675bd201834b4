"""Provider dialects, and how one is chosen for a response.

Dialects are looked up by name (registry.py: the names are a contract, route config uses them)
and imported on first use, so a stream only pays for the dialect it speaks.
"""

from __future__ import annotations

import re

from streamtap.diagnostics.dialects.base import Dialect, Opaque
from streamtap.diagnostics.dialects.json_body import JsonBody
from streamtap.diagnostics.dialects.registry import DIALECT_NAMES, dialect_class  # noqa: F401
from streamtap.diagnostics.dialects.sniff import SniffingSse

# The endpoint table: every streaming endpoint a path can name, and its dialect. Patterns match
# the end of the path (query dropped, trailing `/` ignored), so any gateway prefix in front of
# them is fine (`/openai/deployments/{deployment}`, `/api/v1`, `/compatible-mode/v1`, ...).
# Rows are checked in order; README's "Dialects and endpoints recognised" lists the same rows.
ENDPOINTS: tuple[tuple[str, str, str], ...] = (
    (r"/chat/completions", "openai-chat",
     "Chat Completions under any prefix (OpenAI, Azure deployments, compatible servers)"),
    (r"/responses", "openai-responses", "Responses create (OpenAI `/v1`, Azure `/openai/v1`)"),
    (r"/responses/[^/]+", "openai-responses",
     "Responses retrieve with `?stream=true` (resume with `starting_after=N`)"),
    (r"/messages", "anthropic-messages", "Anthropic Messages under any prefix"),
    (r"/publishers/anthropic/models/[^/]+:streamRawPredict", "anthropic-messages",
     "Claude on Vertex AI"),
    (r":streamGenerateContent", "gemini",
     "Gemini API `/v1beta/models/{m}` and Vertex `/v1/projects/{p}/locations/{l}/publishers/"
     "google/models/{m}`"),
    (r"/api/chat", "ollama-ndjson", "Ollama native chat"),
    (r"/api/generate", "ollama-ndjson", "Ollama native generate"),
)
_ENDPOINT_PATTERNS = tuple((re.compile(f"(?:{pattern})$"), name)
                           for pattern, name, _ in ENDPOINTS)

# How a record's dialect was chosen (its `dialect_source`).
SOURCE_ROUTE = "route"  # the route's configured dialect
SOURCE_PATH = "path"  # the endpoint table above
SOURCE_SNIFF = "sniff"  # the first frames of an SSE stream (sniff.py)
SOURCE_CONTENT_TYPE = "content-type"  # a JSON body, or NDJSON on an unknown path
SOURCE_FALLBACK = "fallback"  # nothing told: plain `sse`, or bytes counted only (`unknown`)
DIALECT_SOURCES = (SOURCE_ROUTE, SOURCE_PATH, SOURCE_SNIFF, SOURCE_CONTENT_TYPE, SOURCE_FALLBACK)


def dialect_for_path(path: str) -> str | None:
    """The dialect the endpoint table names for a request path, or None."""
    path = path.split("?", 1)[0].rstrip("/")
    for pattern, name in _ENDPOINT_PATTERNS:
        if pattern.search(path):
            return name
    return None


def choose(configured: str | None, path: str,
           content_type: str | None) -> tuple[type[Dialect], str]:
    """The dialect a response speaks and how that was decided (a DIALECT_SOURCES name).

    A JSON body is a `json` reply (Gemini's streamed JSON array aside); a stream speaks the
    route's configured dialect, else the one its path names; an NDJSON stream on an unknown path
    is Ollama's, and an SSE stream on an unknown path is sniffed from its first frames."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    by_path = dialect_for_path(path)
    if mime == "application/json" or mime.endswith("+json"):
        if configured == "gemini":
            return dialect_class("gemini-array"), SOURCE_ROUTE
        if by_path == "gemini":
            return dialect_class("gemini-array"), SOURCE_PATH
        return JsonBody, SOURCE_CONTENT_TYPE
    streaming = mime in ("text/event-stream", "application/x-ndjson")
    if configured:
        found = dialect_class(configured)
        if found is not None:
            return found, SOURCE_ROUTE
    if streaming:
        found = dialect_class(by_path)
        if found is not None:
            return found, SOURCE_PATH
        if mime == "application/x-ndjson":
            return dialect_class("ollama-ndjson"), SOURCE_CONTENT_TYPE
        return SniffingSse, SOURCE_SNIFF
    return Opaque, SOURCE_FALLBACK


def choose_dialect(configured: str | None, path: str, content_type: str | None) -> type[Dialect]:
    """The dialect class alone (see `choose`)."""
    return choose(configured, path, content_type)[0]
