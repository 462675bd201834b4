"""What a dialect learns from a stream, folded as frames arrive: counts, phase, tools, usage, errors.

Dialects write here through a few small methods and never keep content: a string reaches this
state only as a provider token (finish reason, error type, event name), checked by `token()`, or
as an error message cut to a short sentence without quoted spans or keys (redaction/messages.py).
The one exception is a tool call's argument text, held while the call is open only to tell whether
it parses (arguments.py); it never reaches the record.
"""

from __future__ import annotations

import re

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.dialects.arguments import (MAX_HELD_ARGUMENTS, NOT_JSON_TEXT,
                                                     TOO_LARGE, ArgumentCheck)
from streamtap.diagnostics.redaction.messages import MAX_MESSAGE_INPUT, provider_message
from streamtap.diagnostics.redaction.redact import scrub

# `[]` is allowed for the field paths `delta_keys` names inside typed lists (`content[].thinking`).
_TOKEN = re.compile(r"[A-Za-z0-9_.:/\[\]-]{1,64}")
# Provider-generated response ids: long enough that the scrubber's token rule would eat them.
_RESPONSE_ID = re.compile(r"(?:chatcmpl-|chatcmpl_|resp_|msg_|gen-)[A-Za-z0-9_-]{1,120}")
MAX_ERRORS = 20
MAX_UNKNOWN_TYPES = 20
MAX_TOOL_CALLS = 256
MAX_DELTA_KEYS = 16
MAX_SERVER_TOOLS = 64


def token(value: object) -> str | None:
    """A provider's kind name (finish reason, error type, event name) if it is a short token.

    Anything else is replaced by a marker: a free-form string in such a slot could be content.
    """
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and _TOKEN.fullmatch(value) and scrub(value) == value:
        return value
    return "<non-token>"


class ToolCall:
    __slots__ = ("index", "name", "started_ms", "arg_chunks", "arg_bytes", "completed",
                 "arguments")

    def __init__(self, index: int, name: str | None, started_ms: float):
        self.index = index
        self.name = name
        self.started_ms = started_ms
        self.arg_chunks = 0
        self.arg_bytes = 0
        self.completed = False
        self.arguments = ArgumentCheck()

    def as_dict(self) -> dict:
        self.arguments.settle()  # the stream is over: parse what is held, and let it go
        return {"index": self.index, "name": self.name, "started_ms": round(self.started_ms, 1),
                "arg_chunks": self.arg_chunks, "arg_bytes": self.arg_bytes,
                # A boolean and a fixed code (arguments.py): never the arguments themselves.
                "arg_parsed": self.arguments.parsed, "arg_unchecked": self.arguments.unchecked,
                "completed": self.completed}


class ServerTool:
    """A tool the provider ran itself (web search, code execution): its type and whether its
    result arrived. Nothing else is kept: its input and output are the user's content."""

    __slots__ = ("index", "type", "started_ms", "completed")

    def __init__(self, index: int, type: str | None, started_ms: float):
        self.index = index
        self.type = type
        self.started_ms = started_ms
        self.completed = False

    def as_dict(self) -> dict:
        return {"index": self.index, "type": self.type, "started_ms": round(self.started_ms, 1),
                "completed": self.completed}


class StreamState:
    """The accumulator a dialect feeds. Times are milliseconds since the request arrived."""

    def __init__(self, defined_tool_names: frozenset[str] = frozenset()):
        self.defined_tool_names = defined_tool_names
        self.event_counts: dict[str, int] = {}
        self.delta_keys: list[str] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.terminal: str | None = None
        self.terminal_ms: float | None = None
        self.unknown_types: list[str] = []
        self.tool_calls: dict[int, ToolCall] = {}
        # Provider-run tools, by the dialect's own key for them (a block index, an output index).
        self.server_tools: dict[object, ServerTool] = {}
        self.errors: list[dict] = []
        # Each error's message as the provider sent it (capped), never recorded: the record's
        # message is settled from it at the end, once it can be checked against the request
        # (redaction/messages.py `settle_messages`). Until then `errors` holds the pattern layer's.
        self.error_texts: list[str | None] = []
        self.response_id: str | None = None
        self.first_event_ms: float | None = None
        self.first_progress_ms: float | None = None
        self.last_progress_ms: float | None = None
        # The last event that was not a keep-alive, and the keep-alives since it (how many, the
        # first and the last): a stall behind heartbeats is a long run of these.
        self.last_event_ms: float | None = None
        self.beats_since_event = 0
        self.first_beat_ms: float | None = None
        self.last_beat_ms: float | None = None
        self.phase = ev.BEFORE_PROGRESS
        self.protocol_errors: dict[str, int] = {}
        self.held_argument_bytes = 0  # argument text held by open calls (arguments.py)

    # -- events ---------------------------------------------------------------------------
    def emit(self, kind: str, t_ms: float) -> None:
        """Count one normalized event and move the phase and progress clocks."""
        counts = self.event_counts
        counts[kind] = counts.get(kind, 0) + 1
        if kind == ev.KEEPALIVE:
            self.beats_since_event += 1
            if self.beats_since_event == 1:
                self.first_beat_ms = t_ms
            self.last_beat_ms = t_ms
            return
        self.last_event_ms = t_ms
        self.beats_since_event = 0
        if self.first_event_ms is None:
            self.first_event_ms = t_ms
        if kind in ev.PROGRESS_KINDS:
            if self.first_progress_ms is None:
                self.first_progress_ms = t_ms
            self.last_progress_ms = t_ms
        phase = ev.PHASE_OF_KIND.get(kind)
        if phase is not None:
            self.phase = phase

    def delta_key(self, key: str) -> None:
        """Name a JSON field that carried content (the name only, never its value)."""
        if key not in self.delta_keys and len(self.delta_keys) < MAX_DELTA_KEYS:
            self.delta_keys.append(token(key) or "<empty>")

    def unknown_type(self, name: object, t_ms: float) -> None:
        self.emit(ev.UNKNOWN, t_ms)
        name = token(name) or "<none>"
        if name not in self.unknown_types and len(self.unknown_types) < MAX_UNKNOWN_TYPES:
            self.unknown_types.append(name)

    def set_terminal(self, name: str, t_ms: float) -> None:
        if self.terminal is None:
            self.terminal = name
            self.terminal_ms = t_ms

    def set_finish_reason(self, reason: object) -> None:
        self.finish_reason = token(reason)

    def set_response_id(self, value: object) -> None:
        # Response ids are provider-generated identifiers (chatcmpl-, resp_, msg_): one of those
        # shapes is kept as is; anything else still passes the scrubber.
        if self.response_id is None and isinstance(value, str) and value:
            value = value[:128]
            self.response_id = value if _RESPONSE_ID.fullmatch(value) else scrub(value)

    def set_usage(self, **counts: object) -> None:
        """Record token counts as the provider reported them (cumulative ones overwrite)."""
        for name, value in counts.items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[name] = value

    def protocol_error(self, code: str) -> None:
        self.protocol_errors[code] = self.protocol_errors.get(code, 0) + 1

    def stream_error(self, shape: str, t_ms: float, type: object = None, code: object = None,
                     message: object = None, field: str | None = None) -> None:
        """An error the provider put inside the stream; counts as an `error` event too. `field`
        names the unknown SSE field line that carried it, when not a `data:` line."""
        self.emit(ev.ERROR, t_ms)
        if len(self.errors) >= MAX_ERRORS:
            return
        error = {
            "shape": shape,
            "t_ms": round(t_ms, 1),
            "type": token(type),
            "code": token(code),
            "message": provider_message(message),
        }
        if field is not None:
            # A field name, passed through `token()` like an event name: a short identifier
            # the scrubber leaves alone, never the line's value (that is where content goes).
            error["field"] = token(field)
        self.errors.append(error)
        self.error_texts.append(message[:MAX_MESSAGE_INPUT] if isinstance(message, str) else None)

    # -- tool calls -------------------------------------------------------------------------
    def tool_start(self, index: int, name: object, t_ms: float) -> ToolCall:
        call = self.tool_calls.get(index)
        if call is None and len(self.tool_calls) < MAX_TOOL_CALLS:
            # A name the request did not define could be the model's words: keep only known ones.
            kept = name if isinstance(name, str) and name in self.defined_tool_names else None
            call = self.tool_calls[index] = ToolCall(index, kept, t_ms)
        return call

    def tool_arguments(self, index: int, piece: str, json_text: bool = True) -> None:
        """A piece of a call's arguments: JSON text (a whole value given at once is its compact
        JSON), held within MAX_HELD_ARGUMENTS per stream until the call settles; or, with
        `json_text` False, pieces that do not add up to JSON text, counted and not checked."""
        call = self.tool_calls.get(index)
        if call is None:
            return
        nbytes = len(piece.encode("utf-8", "surrogatepass"))
        call.arg_chunks += 1
        call.arg_bytes += nbytes
        check = call.arguments
        if not json_text:
            self.held_argument_bytes -= check.give_up(NOT_JSON_TEXT)
        elif check.pieces is not None:
            if self.held_argument_bytes + nbytes > MAX_HELD_ARGUMENTS:
                self.held_argument_bytes -= check.give_up(TOO_LARGE)
                return
            self.held_argument_bytes += nbytes
        check.hold(piece, nbytes)

    def tool_completed(self, index: int) -> bool:
        """Mark a call complete; return False if it was unknown or already complete."""
        call = self.tool_calls.get(index)
        if call is None or call.completed:
            return False
        call.completed = True
        self.held_argument_bytes -= call.arguments.settle()
        return True

    def open_tool_calls(self) -> list[ToolCall]:
        return [call for call in self.tool_calls.values() if not call.completed]

    # -- provider-run tools -----------------------------------------------------------------
    def server_tool_start(self, key: object, type: object, t_ms: float) -> None:
        """The provider started a tool of its own; `type` is its provider token (web_search)."""
        if key not in self.server_tools and len(self.server_tools) < MAX_SERVER_TOOLS:
            self.server_tools[key] = ServerTool(len(self.server_tools), token(type), t_ms)
        self.emit(ev.SERVER_TOOL_START, t_ms)

    def server_tool_step(self, t_ms: float) -> None:
        """A piece of a provider-run tool's input, or a status update while it runs."""
        self.emit(ev.SERVER_TOOL_DELTA, t_ms)

    def server_tool_end(self, key: object, t_ms: float) -> bool:
        """Its result arrived (or it reported completion); False if it had already ended."""
        tool = self.server_tools.get(key)
        if tool is not None and tool.completed:
            return False
        if tool is not None:
            tool.completed = True
        self.emit(ev.SERVER_TOOL_END, t_ms)
        return True

    def open_server_tool(self) -> object:
        """The key of the last provider-run tool still running, or None."""
        for key, tool in reversed(self.server_tools.items()):
            if not tool.completed:
                return key
        return None
