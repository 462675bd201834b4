"""The vocabularies a trace record speaks: normalized event kinds, phases and boundaries.

These names are a contract (they mirror the AI SDK stream parts that clients such as PawWork count);
readers of old records depend on them, so add to them but never rename.
"""

TEXT_START = "text_start"
TEXT_DELTA = "text_delta"
TEXT_END = "text_end"
REASONING_START = "reasoning_start"
REASONING_DELTA = "reasoning_delta"
REASONING_END = "reasoning_end"
TOOL_INPUT_START = "tool_input_start"
TOOL_INPUT_DELTA = "tool_input_delta"
TOOL_INPUT_END = "tool_input_end"
TOOL_CALL = "tool_call"
FINISH = "finish"
USAGE = "usage"
ERROR = "error"
KEEPALIVE = "keepalive"
META = "meta"
UNKNOWN = "unknown"
# Not an event a dialect emits: the kind of a frame still open when the stream ended.
UNTERMINATED = "unterminated"

EVENT_KINDS = (
    TEXT_START, TEXT_DELTA, TEXT_END,
    REASONING_START, REASONING_DELTA, REASONING_END,
    TOOL_INPUT_START, TOOL_INPUT_DELTA, TOOL_INPUT_END, TOOL_CALL,
    FINISH, USAGE, ERROR, KEEPALIVE, META, UNKNOWN,
)

# What resets a progress watchdog: the model produced something. Keepalives and meta do not.
PROGRESS_KINDS = frozenset({
    TEXT_START, TEXT_DELTA,
    REASONING_START, REASONING_DELTA,
    TOOL_INPUT_START, TOOL_INPUT_DELTA,
    TOOL_CALL,
})

# Phases: what the model was doing last.
BEFORE_RESPONSE = "before_response"
BEFORE_PROGRESS = "before_progress"
REASONING = "reasoning"
TEXT = "text"
TOOL_INPUT = "tool_input"
AFTER_TOOL_CALL = "after_tool_call"
AFTER_FINISH = "after_finish"
COMPLETE = "complete"

PHASES = (BEFORE_RESPONSE, BEFORE_PROGRESS, REASONING, TEXT, TOOL_INPUT, AFTER_TOOL_CALL,
          AFTER_FINISH, COMPLETE)

# The phase an event moves the stream into; kinds not listed leave the phase where it was
# (an error frame, in particular, does not move it).
PHASE_OF_KIND = {
    TEXT_START: TEXT, TEXT_DELTA: TEXT, TEXT_END: TEXT,
    REASONING_START: REASONING, REASONING_DELTA: REASONING, REASONING_END: REASONING,
    TOOL_INPUT_START: TOOL_INPUT, TOOL_INPUT_DELTA: TOOL_INPUT, TOOL_INPUT_END: TOOL_INPUT,
    TOOL_CALL: AFTER_TOOL_CALL,
    FINISH: AFTER_FINISH,
}

BOUNDARIES = (
    "none", "client_abort", "watchdog", "transport", "provider_close", "provider_error",
    "protocol", "injected", "proxy", "unknown",
)

# Shapes of an error seen inside a stream.
ERROR_SHAPES = ("wrapped_chunk", "error_event", "failed_terminal", "finish_reason_error",
                "ndjson_error")
