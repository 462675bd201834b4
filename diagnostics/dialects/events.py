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
# A tool the provider runs itself inside the stream (web search, code execution, file search):
# started, still running (its input or a status update), ended (its result arrived).
SERVER_TOOL_START = "server_tool_start"
SERVER_TOOL_DELTA = "server_tool_delta"
SERVER_TOOL_END = "server_tool_end"
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
    SERVER_TOOL_START, SERVER_TOOL_DELTA, SERVER_TOOL_END,
    FINISH, USAGE, ERROR, KEEPALIVE, META, UNKNOWN,
)

# What resets a progress watchdog: the model produced something. Keepalives and meta do not.
PROGRESS_KINDS = frozenset({
    TEXT_START, TEXT_DELTA,
    REASONING_START, REASONING_DELTA,
    TOOL_INPUT_START, TOOL_INPUT_DELTA,
    TOOL_CALL,
    SERVER_TOOL_START, SERVER_TOOL_DELTA, SERVER_TOOL_END,
})

# Phases: what the model was doing last.
BEFORE_RESPONSE = "before_response"
BEFORE_PROGRESS = "before_progress"
REASONING = "reasoning"
TEXT = "text"
TOOL_INPUT = "tool_input"
AFTER_TOOL_CALL = "after_tool_call"
SERVER_TOOL = "server_tool"  # the provider was running a tool of its own
AFTER_SERVER_TOOL = "after_server_tool"  # its result had arrived; the model had not gone on
AFTER_FINISH = "after_finish"
COMPLETE = "complete"

PHASES = (BEFORE_RESPONSE, BEFORE_PROGRESS, REASONING, TEXT, TOOL_INPUT, AFTER_TOOL_CALL,
          SERVER_TOOL, AFTER_SERVER_TOOL, AFTER_FINISH, COMPLETE)

# The phase an event moves the stream into; kinds not listed leave the phase where it was
# (an error frame, in particular, does not move it).
PHASE_OF_KIND = {
    TEXT_START: TEXT, TEXT_DELTA: TEXT, TEXT_END: TEXT,
    REASONING_START: REASONING, REASONING_DELTA: REASONING, REASONING_END: REASONING,
    TOOL_INPUT_START: TOOL_INPUT, TOOL_INPUT_DELTA: TOOL_INPUT, TOOL_INPUT_END: TOOL_INPUT,
    TOOL_CALL: AFTER_TOOL_CALL,
    SERVER_TOOL_START: SERVER_TOOL, SERVER_TOOL_DELTA: SERVER_TOOL,
    SERVER_TOOL_END: AFTER_SERVER_TOOL,
    FINISH: AFTER_FINISH,
}

# Provider-run tools by the type streamtap records, as a sentence names them ("while the provider
# was running its web search"). Types not listed read as their words (`image_generation`).
SERVER_TOOL_LABELS = {
    "web_search": "web search", "web_fetch": "web fetch", "file_search": "file search",
    "tool_search": "tool search", "code_execution": "code execution",
    "bash_code_execution": "code execution", "text_editor_code_execution": "code execution",
    "code_interpreter": "code interpreter", "mcp": "MCP tool call",
}


def server_tool_label(kind: str | None) -> str:
    if not kind:
        return "tool"
    return SERVER_TOOL_LABELS.get(kind) or kind.replace("_", " ")


BOUNDARIES = (
    "none", "client_abort", "watchdog", "transport", "provider_close", "provider_error",
    "protocol", "injected", "proxy", "unknown",
)

# Shapes of an error seen inside a stream.
ERROR_SHAPES = ("wrapped_chunk", "error_event", "failed_terminal", "finish_reason_error",
                "ndjson_error")
