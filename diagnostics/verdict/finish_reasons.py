"""The provider's finish reason in one vocabulary for every dialect (issue 23 item 7): `stop`,
`length`, `tool_calls`, `content_filter`, `error`, and `interrupted` for a stream cut short
without an error, as the Vercel AI SDK reports an interrupted stream.

One table maps each dialect's own reasons; the verdict decides for a stream that never finished.
"""

from __future__ import annotations

from streamtap.diagnostics.verdict import client_sees as cs

STOP = "stop"
LENGTH = "length"
TOOL_CALLS = "tool_calls"
CONTENT_FILTER = "content_filter"
ERROR = "error"
INTERRUPTED = "interrupted"
VALUES = (STOP, LENGTH, TOOL_CALLS, CONTENT_FILTER, ERROR, INTERRUPTED)

_OPENAI_CHAT = {"stop": STOP, "length": LENGTH, "tool_calls": TOOL_CALLS,
                "function_call": TOOL_CALLS, "content_filter": CONTENT_FILTER, "error": ERROR}
# Anthropic's `stop_reason` (docs.anthropic.com, "Handling stop reasons"); `pause_turn` (a long
# server-tool turn paused, the client continues it) has no counterpart and stays unmapped.
_ANTHROPIC = {"end_turn": STOP, "stop_sequence": STOP, "max_tokens": LENGTH,
              "model_context_window_exceeded": LENGTH, "tool_use": TOOL_CALLS,
              "refusal": CONTENT_FILTER}
# Gemini's `finishReason`, and a blocked prompt's `blockReason` (ai.google.dev, FinishReason).
_GEMINI = {"STOP": STOP, "MAX_TOKENS": LENGTH, "SAFETY": CONTENT_FILTER,
           "RECITATION": CONTENT_FILTER, "BLOCKLIST": CONTENT_FILTER,
           "PROHIBITED_CONTENT": CONTENT_FILTER, "SPII": CONTENT_FILTER,
           "IMAGE_SAFETY": CONTENT_FILTER, "MALFORMED_FUNCTION_CALL": ERROR,
           "UNEXPECTED_TOOL_CALL": ERROR}
# The Responses API records the terminal's status, or `incomplete_details.reason`.
_OPENAI_RESPONSES = {"completed": STOP, "max_output_tokens": LENGTH,
                     "content_filter": CONTENT_FILTER, "failed": ERROR}
_OLLAMA = {"stop": STOP, "length": LENGTH}

# dialect -> {the provider's own reason: the normalized one}.
BY_DIALECT: dict[str, dict[str, str]] = {
    "openai-chat": _OPENAI_CHAT,
    "anthropic-messages": _ANTHROPIC,
    "gemini": _GEMINI,
    "openai-responses": _OPENAI_RESPONSES,
    "ollama-ndjson": _OLLAMA,
    "json": {**_OPENAI_CHAT, **_ANTHROPIC, **_GEMINI},  # a whole body of any of them
}
# Dialects whose plain stop is also how a turn that called tools ends (Gemini `STOP`, Responses
# `completed`, Ollama `stop`): a completed tool call makes it `tool_calls`, as the other
# dialects' own reasons say.
STOP_ALSO_ENDS_TOOL_TURNS = frozenset({"gemini", "openai-responses", "ollama-ndjson", "json"})


def mapped(dialect: str | None, reason: str | None, called_tools: bool = False) -> str | None:
    """The provider's own finish reason, normalized; None when there is none or no row has it."""
    if reason is None:
        return None
    table = BY_DIALECT.get(dialect or "", {})
    value = table.get(reason) or (reason if reason in VALUES else None)
    if value == STOP and called_tools and dialect in STOP_ALSO_ENDS_TOOL_TURNS:
        return TOOL_CALLS
    return value


def normalized(outcome: dict, sees: str, dialect: str | None, finish_reason: str | None,
               tool_called: bool) -> str | None:
    """The record's `normalized_finish_reason`: the provider's, when the stream completed or the
    client got a whole answer (a stream that lost only its end marker); `error` when the client
    was told of an error; `interrupted` when the stream was cut short without one. `tool_called`:
    a tool call of the stream completed."""
    if outcome.get("ok") or sees == cs.SUCCESS:
        return mapped(dialect, finish_reason, tool_called)
    if sees in (cs.ERROR, cs.IN_BAND_ERROR) and outcome.get("boundary") != "client_abort":
        return ERROR
    return INTERRUPTED
