"""The attribute, span and metric names streamtap exports, pinned in one place.

Two vocabularies of the OpenTelemetry GenAI conventions (both at Development status, so they may
change again: when one renames a name, change it here and nowhere else):
- v1.41.0, the last one published in the core semantic conventions, is the default;
- "latest", the text of the `semantic-conventions-genai` repository the GenAI conventions moved to
  (core v1.42.0 deprecated `gen_ai.*` there), chosen with the conventions' own transition switch
  `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`.
`server.*`, `http.*`, `error.type`, `session.id` and `service.*` are the general OpenTelemetry
conventions. Everything streamtap adds lives under `streamtap.*`.
Sources: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/ (v1.41.0) and
https://github.com/open-telemetry/semantic-conventions-genai, docs/gen-ai/non-normative/migration.md
at commit 32c328e8 (read 2026-11-27: the metric renames of PR #521, the attribute rename of #440).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"  # v1.41.0
GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS = "gen_ai.usage.cache_write.input_tokens"  # latest (#440)
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"


@dataclass(frozen=True)
class Vocabulary:
    """The names that differ between the two versions of the GenAI conventions."""

    name: str
    # The record's usage names (diagnostics/dialects/usage.py) -> the convention's attributes.
    usage_attributes: dict[str, str]
    metric_duration: str  # histogram, seconds, one point per request
    metric_time_to_first_chunk: str  # histogram, seconds, streamed responses only
    metric_time_per_output_chunk: str  # histogram, seconds, one point per chunk after the first


_USAGE_COMMON = {
    "input": GEN_AI_USAGE_INPUT_TOKENS,
    "output": GEN_AI_USAGE_OUTPUT_TOKENS,
    "cache_read": GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    "reasoning": GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
}
V1_41 = Vocabulary(
    name="v1.41.0",
    usage_attributes={**_USAGE_COMMON, "cache_write": GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS},
    metric_duration="gen_ai.client.operation.duration",
    metric_time_to_first_chunk="gen_ai.client.operation.time_to_first_chunk",
    metric_time_per_output_chunk="gen_ai.client.operation.time_per_output_chunk",
)
LATEST = Vocabulary(
    name="gen_ai_latest_experimental",
    usage_attributes={**_USAGE_COMMON, "cache_write": GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS},
    metric_duration="gen_ai.client.inference.duration",
    metric_time_to_first_chunk="gen_ai.client.inference.time_to_first_chunk",
    metric_time_per_output_chunk="gen_ai.client.inference.time_per_output_chunk",
)
VOCABULARIES = {V1_41.name: V1_41, LATEST.name: LATEST}
USAGE_ATTRIBUTES = V1_41.usage_attributes  # the default's, for readers that need no switch

# The transition switch the conventions define: a comma-separated list of opt-in names.
SEMCONV_OPT_IN_VARIABLE = "OTEL_SEMCONV_STABILITY_OPT_IN"
GEN_AI_LATEST_OPT_IN = "gen_ai_latest_experimental"


def vocabulary(opt_in: str | None) -> Vocabulary:
    """The vocabulary the value of OTEL_SEMCONV_STABILITY_OPT_IN asks for (v1.41.0 unless it
    lists `gen_ai_latest_experimental`; other entries belong to other conventions)."""
    wanted = {item.strip().lower() for item in (opt_in or "").split(",")}
    return LATEST if GEN_AI_LATEST_OPT_IN in wanted else V1_41

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
# `error.type` of a failed stream: `<boundary>:<first evidence code>`, e.g. `transport:upstream_reset`
# or `provider_error:http_529`. Both come from closed lists (README, "Team scale"): the classifier's
# boundaries and the codes its rules put first, which name a mechanism, never a provider's words.
# A value off these lists (a record from a foreign or future file) is exported as the boundary
# alone, or as `_OTHER` (the conventions' fallback), so free text never becomes a dimension.
ERROR_TYPE_BOUNDARIES = ("client_abort", "watchdog", "transport", "provider_close",
                         "provider_error", "protocol", "injected", "proxy", "unknown")
ERROR_TYPE_CODE = re.compile(
    r"injected_(reset|truncate|close|drop_terminal|stall|error_chunk|http_error)"
    r"|watchdog_(connect|idle|progress)|http_[1-5][0-9][0-9]"
    r"|upstream_(connect_error|no_response|reset|truncated|error|closed_by_proxy)"
    r"|client_disconnected|proxy_shutdown|clean_close|stream_requested_json_answered"
    r"|wrapped_chunk|error_event|ndjson_error|finish_reason_error|failed_terminal"
    r"|unknown_route|header_too_long|malformed_request|request_too_large(_partly_sent)?"
    r"|internal_error|bad_fault_header|path_dot_segments_refused")
ERROR_TYPE_OTHER = "_OTHER"
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
