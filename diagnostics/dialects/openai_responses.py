"""OpenAI Responses streams: typed events (the SSE `event:` name equals the JSON `type`), output
items by `output_index`, and one of three terminal events (`response.completed`,
`response.incomplete`, `response.failed`) instead of `[DONE]`.

`delta_keys` records event type names here, not JSON field names: every Responses delta carries
its content in a field called `delta`, whatever the content is, so the field name would not say
whether the model wrote text, reasoning or tool arguments; the event type does.

Most frames are text or reasoning deltas that are only counted, so those are dispatched on the
SSE event name and probed for an empty `delta` without decoding the JSON. Frames whose fields
matter (ids, tool calls, usage, errors), and frames without an event name, are decoded.

Tools OpenAI runs itself arrive as output items of their own type (`web_search_call`,
`file_search_call`, `code_interpreter_call`, `tool_search_call`, `image_generation_call`,
`mcp_call`) with status events (`response.web_search_call.searching`, ...) between the item's
`added` and `done`: they are provider-run tools (`server_tool_*` events), not function calls.
"""

from __future__ import annotations

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.decode.sse import Frame
from streamtap.diagnostics.dialects.stream import StreamState
from streamtap.diagnostics.dialects.base import (Dialect, load_json, unknown_shape_error,
                                                    wrapped_error)
from streamtap.diagnostics.dialects.usage import normalize_usage

TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
REASONING_DELTAS = frozenset({"response.reasoning_summary_text.delta",
                              "response.reasoning_text.delta"})
TEXT_DONE = frozenset({"response.output_text.done", "response.refusal.done"})
REASONING_DONE = frozenset({"response.reasoning_summary_text.done",
                            "response.reasoning_text.done"})
# Recognised, not progress. A call's arguments `.done` is not its end: `output_item.done` is.
META_TYPES = frozenset({
    "response.created", "response.in_progress", "response.queued",
    "response.content_part.added", "response.content_part.done",
    "response.output_text.annotation.added",
    "response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
    "response.function_call_arguments.done", "response.custom_tool_call_input.done",
})
# Frames that are only counted: safe to classify from the event name without decoding.
COUNTED = TEXT_DELTAS | REASONING_DELTAS | TEXT_DONE | REASONING_DONE | (
    META_TYPES - {"response.created"})
# Output items the provider runs itself, and the events that report their status (the model is
# not writing anything there). `local_shell_call` and `computer_call` are run by the client.
SERVER_TOOL_ITEMS = frozenset({"web_search_call", "file_search_call", "code_interpreter_call",
                               "tool_search_call", "image_generation_call", "mcp_call"})
SERVER_TOOL_PREFIXES = ("response.web_search_call.", "response.file_search_call.",
                        "response.code_interpreter_call", "response.tool_search_call.",
                        "response.image_generation_call.", "response.mcp_")
# Status events that say a provider-run tool has finished.
SERVER_TOOL_DONE_SUFFIXES = (".completed", ".failed")
TOOL_ITEMS = frozenset({"function_call", "custom_tool_call"})
CUSTOM_INPUT_DELTA = "response.custom_tool_call_input.delta"
ARGUMENT_DELTAS = frozenset({"response.function_call_arguments.delta", CUSTOM_INPUT_DELTA})
TERMINALS = ("response.completed", "response.incomplete", "response.failed")


def _index(obj: dict, fallback: int) -> int:
    index = obj.get("output_index")
    return index if isinstance(index, int) and not isinstance(index, bool) else fallback


class OpenAIResponses(Dialect):
    name = "openai-responses"
    terminal_names = TERMINALS
    tool_call_end = "`response.output_item.done`"

    def __init__(self, state: StreamState):
        super().__init__(state)
        self._text_open = False
        self._reasoning_open = False

    def on_frame(self, frame: Frame, t_ms: float) -> str:
        name = frame.event
        data = frame.data
        state = self.state
        if name in COUNTED and data[:1] == b"{" and data[-1:] == b"}":
            # Compact JSON escapes quotes inside strings, so `"delta":""` can only be the field.
            empty = b'"delta":""' in data or b'"delta": ""' in data
            return self._counted(name, empty, t_ms)
        if name in ("response.output_item.added", "response.output_item.done") \
                and b'_call"' not in data and data[:1] == b"{" and data[-1:] == b"}":
            state.emit(ev.META, t_ms)  # not a call item (a message or reasoning item)
            return ev.META
        obj = load_json(data, state)
        if not isinstance(obj, dict):
            state.emit(ev.UNKNOWN, t_ms)  # not JSON (counted as invalid_json) or not an object
            return ev.UNKNOWN
        kind = obj.get("type")
        if not kind or not isinstance(kind, str):
            # A gateway's wrapped `{"error": {...}}` chunk has no type (opencode issue 21979).
            if wrapped_error(obj, state, t_ms) or unknown_shape_error(obj, state, t_ms):
                return ev.ERROR
            state.unknown_type(name, t_ms)
            return ev.UNKNOWN
        if kind in COUNTED:
            return self._counted(kind, not obj.get("delta"), t_ms)
        if kind == "response.created":
            response = obj.get("response")
            if isinstance(response, dict):
                state.set_response_id(response.get("id"))
            state.emit(ev.META, t_ms)
            return ev.META
        if kind in ARGUMENT_DELTAS:
            return self._arguments(kind, obj, t_ms)
        if kind == "response.output_item.added":
            return self._item_added(obj, t_ms)
        if kind == "response.output_item.done":
            return self._item_done(obj, t_ms)
        if kind in TERMINALS:
            return self._terminal(kind, obj, t_ms)
        if kind == "error":
            return self._error_event(obj, t_ms)
        if kind.startswith(SERVER_TOOL_PREFIXES):
            return self._server_tool_status(kind, obj, t_ms)
        if unknown_shape_error(obj, state, t_ms):  # an event no one documents, carrying an error
            return ev.ERROR
        state.unknown_type(kind, t_ms)
        return ev.UNKNOWN

    # -- text and reasoning -------------------------------------------------------------------
    def _counted(self, kind: str, empty: bool, t_ms: float) -> str:
        state = self.state
        if kind in TEXT_DELTAS or kind in REASONING_DELTAS:
            if empty:  # an empty delta is not progress
                state.emit(ev.META, t_ms)
                return ev.META
            state.delta_key(kind)
            if kind in TEXT_DELTAS:
                if not self._text_open:
                    self._text_open = True
                    state.emit(ev.TEXT_START, t_ms)
                state.emit(ev.TEXT_DELTA, t_ms)
                return ev.TEXT_DELTA
            if not self._reasoning_open:
                self._reasoning_open = True
                state.emit(ev.REASONING_START, t_ms)
            state.emit(ev.REASONING_DELTA, t_ms)
            return ev.REASONING_DELTA
        if kind in TEXT_DONE and self._text_open:
            self._text_open = False
            state.emit(ev.TEXT_END, t_ms)
            return ev.TEXT_END
        if kind in REASONING_DONE and self._reasoning_open:
            self._reasoning_open = False
            state.emit(ev.REASONING_END, t_ms)
            return ev.REASONING_END
        state.emit(ev.META, t_ms)
        return ev.META

    # -- tool calls ---------------------------------------------------------------------------
    def _item_added(self, obj: dict, t_ms: float) -> str:
        item = obj.get("item")
        if isinstance(item, dict) and item.get("type") in SERVER_TOOL_ITEMS:
            tool_type = item["type"].removesuffix("_call")
            self.state.server_tool_start(_index(obj, -1), tool_type, t_ms)
            return ev.SERVER_TOOL_START
        if not isinstance(item, dict) or item.get("type") not in TOOL_ITEMS:
            self.state.emit(ev.META, t_ms)
            return ev.META
        self._start(_index(obj, len(self.state.tool_calls)), item, t_ms)
        return ev.TOOL_INPUT_START

    def _start(self, index: int, item: dict, t_ms: float) -> None:
        self.state.tool_start(index, item.get("name"), t_ms)
        self.state.emit(ev.TOOL_INPUT_START, t_ms)

    def _arguments(self, kind: str, obj: dict, t_ms: float) -> str:
        delta = obj.get("delta")
        if not delta or not isinstance(delta, str):
            self.state.emit(ev.META, t_ms)
            return ev.META
        # A custom tool's input is free-form text, not JSON.
        self.state.tool_arguments(_index(obj, 0), delta, json_text=kind != CUSTOM_INPUT_DELTA)
        self.state.delta_key(kind)
        self.state.emit(ev.TOOL_INPUT_DELTA, t_ms)
        return ev.TOOL_INPUT_DELTA

    def _item_done(self, obj: dict, t_ms: float) -> str:
        state = self.state
        item = obj.get("item")
        if isinstance(item, dict) and item.get("type") in SERVER_TOOL_ITEMS:
            index = _index(obj, -1)
            if index not in state.server_tools:  # an item we never saw start arrives whole
                state.server_tool_start(index, item["type"].removesuffix("_call"), t_ms)
            if state.server_tool_end(index, t_ms):
                return ev.SERVER_TOOL_END
            state.emit(ev.META, t_ms)  # its `.completed` status event already ended it
            return ev.META
        if not isinstance(item, dict) or item.get("type") not in TOOL_ITEMS:
            state.emit(ev.META, t_ms)
            return ev.META
        index = _index(obj, len(state.tool_calls))
        if index not in state.tool_calls:  # a call we never saw start arrives whole
            self._start(index, item, t_ms)
            arguments = item.get("arguments") or item.get("input")
            if arguments and isinstance(arguments, str):
                state.tool_arguments(index, arguments,
                                     json_text=item["type"] != "custom_tool_call")
                state.emit(ev.TOOL_INPUT_DELTA, t_ms)
        if not state.tool_completed(index):
            state.emit(ev.META, t_ms)
            return ev.META
        state.emit(ev.TOOL_INPUT_END, t_ms)
        state.emit(ev.TOOL_CALL, t_ms)
        return ev.TOOL_CALL

    def _server_tool_status(self, kind: str, obj: dict, t_ms: float) -> str:
        """`response.web_search_call.searching` and the like: still running, or (`.completed`,
        `.failed`) done. An MCP tool listing is the provider's bookkeeping, not a tool run."""
        state = self.state
        index = _index(obj, -1)
        if index not in state.server_tools or kind.startswith("response.mcp_list_tools"):
            state.emit(ev.META, t_ms)
            return ev.META
        if kind.endswith(SERVER_TOOL_DONE_SUFFIXES):
            if state.server_tool_end(index, t_ms):
                return ev.SERVER_TOOL_END
            state.emit(ev.META, t_ms)
            return ev.META
        state.server_tool_step(t_ms)
        return ev.SERVER_TOOL_DELTA

    # -- terminals and errors -------------------------------------------------------------------
    def _terminal(self, kind: str, obj: dict, t_ms: float) -> str:
        """`response.incomplete` is a normal end whose reason becomes the finish reason;
        `response.failed` ends the stream too, but as an error, which does not move the phase."""
        state = self.state
        response = obj.get("response")
        if not isinstance(response, dict):
            response = {}
        state.set_response_id(response.get("id"))
        counts = normalize_usage(response.get("usage"))
        if counts:
            state.set_usage(**counts)
            state.emit(ev.USAGE, t_ms)
        state.set_terminal(kind, t_ms)
        if kind == "response.failed":
            error = response.get("error")
            error = error if isinstance(error, dict) else {}
            state.set_finish_reason(response.get("status") or "failed")
            state.stream_error("failed_terminal", t_ms, error.get("type"), error.get("code"),
                               error.get("message"))
            return ev.ERROR
        reason = None
        if kind == "response.incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
        state.set_finish_reason(reason or response.get("status") or kind.rpartition(".")[2])
        state.emit(ev.FINISH, t_ms)
        return ev.FINISH

    def _error_event(self, obj: dict, t_ms: float) -> str:
        """`type: "error"` in both shapes seen: documented flat `{code, message}`, and nested
        `{"error": {type, code, message}}` (real traffic). The flat `type` is the event's own."""
        inner = obj.get("error")
        if isinstance(inner, dict):
            self.state.stream_error("error_event", t_ms, inner.get("type"), inner.get("code"),
                                    inner.get("message"))
        else:
            message = obj.get("message") or (inner if isinstance(inner, str) else None)
            self.state.stream_error("error_event", t_ms, None, obj.get("code"), message)
        return ev.ERROR
