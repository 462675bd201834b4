"""The attribute and span names streamtap exports, pinned in one place.

The `gen_ai.*` names follow the OpenTelemetry GenAI semantic conventions v1.41.0 (all of them are
at Development status there, so they may change: when a newer version renames one, change it here
and nowhere else). `server.*`, `http.*`, `error.type`, `session.id` and `service.*` are the
general OpenTelemetry conventions. Everything streamtap adds lives under `streamtap.*`.
Sources: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/ and
https://github.com/open-telemetry/semantic-conventions-genai (attribute registry).
"""

from __future__ import annotations

SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# -- GenAI (Development) -------------------------------------------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"  # seconds
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"

# The record's usage names (diagnostics/dialects/usage.py) -> the convention's.
USAGE_ATTRIBUTES = {
    "input": GEN_AI_USAGE_INPUT_TOKENS,
    "output": GEN_AI_USAGE_OUTPUT_TOKENS,
    "cache_read": GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    "cache_write": GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    "reasoning": GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
}

# The draft conventions' finish reason for a response that ended before its final event.
FINISH_REASON_ERROR = "error"

# `gen_ai.operation.name` well-known values, chosen from the request path (the dialect alone
# cannot tell a chat from a completion: a JSON body is the `json` dialect whatever the API).
OPERATION_CHAT = "chat"
OPERATION_TEXT_COMPLETION = "text_completion"
OPERATION_GENERATE_CONTENT = "generate_content"
OPERATION_EMBEDDINGS = "embeddings"
OPERATION_BY_PATH_SUFFIX = (  # first match wins; Gemini's `:verb` suffixes come first
    (":streamGenerateContent", OPERATION_GENERATE_CONTENT),
    (":generateContent", OPERATION_GENERATE_CONTENT),
    ("/chat/completions", OPERATION_CHAT),
    ("/responses", OPERATION_CHAT),
    ("/messages", OPERATION_CHAT),
    ("/api/chat", OPERATION_CHAT),
    ("/api/generate", OPERATION_TEXT_COMPLETION),
    ("/completions", OPERATION_TEXT_COMPLETION),
    ("/embeddings", OPERATION_EMBEDDINGS),
    (":embedContent", OPERATION_EMBEDDINGS),
)
OPERATION_DEFAULT = OPERATION_CHAT

# `gen_ai.provider.name` well-known values for streamtap's default route names; any other route
# name is exported as it is (the conventions allow a custom value when none is listed).
PROVIDER_BY_ROUTE = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "deepseek": "deepseek",
    "groq": "groq",
    "mistral": "mistral_ai",
    "xai": "x_ai",
}

# -- general conventions (Stable) ----------------------------------------------------------------
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"
ERROR_TYPE = "error.type"
SESSION_ID = "session.id"
SERVICE_NAME = "service.name"
SERVICE_VERSION = "service.version"
SERVICE_NAME_VALUE = "streamtap"
# Phoenix files spans under the project this resource attribute names (OpenInference).
PROJECT_ATTRIBUTE_DEFAULT = "openinference.project.name"

# -- streamtap's own -----------------------------------------------------------------------------
ST = "streamtap."
ST_BOUNDARY = ST + "boundary"
ST_PHASE = ST + "phase"
ST_CONFIDENCE = ST + "confidence"
ST_EVIDENCE = ST + "evidence"
ST_RETRYABLE = ST + "retryable"
ST_SUMMARY = ST + "summary"
ST_SESSION_ID = ST + "session_id"
ST_MESSAGE_ID = ST + "message_id"
ST_TRACE_ID = ST + "trace_id"
ST_ROUTE = ST + "route"
ST_DIALECT = ST + "dialect"
ST_FAULT_NAME = ST + "fault.name"
ST_FAULT_ACTION = ST + "fault.action"
ST_FAULT_FIRED = ST + "fault.fired"
ST_MAX_GAP_MS = ST + "max_gap_ms"
ST_FRAME_COUNT = ST + "frame_count"
ST_FRAME_EVENTS_DROPPED = ST + "frame_events_dropped"
ST_STREAM_BYTES = ST + "stream.bytes"
ST_DOWNSTREAM_ENDED = ST + "downstream.ended"

# Span events: the phase points of the timeline, and one per frame (capped, head and tail).
PHASE_EVENTS = (  # (event name, timeline mark)
    (ST + "first_byte", "first_byte"),
    (ST + "first_event", "first_event"),
    (ST + "first_progress", "first_progress"),
    (ST + "last_progress", "last_progress"),
    (ST + "terminal", "terminal_event"),
)
EVENT_END = ST + "end"
EVENT_FRAME = ST + "frame"
FRAME_KIND = ST + "frame.kind"
FRAME_BYTES = ST + "frame.bytes"
FRAME_SHAPE = ST + "frame.shape"
FRAME_EVENTS_DEFAULT = 200  # per span, head and tail like the record's `frames`
