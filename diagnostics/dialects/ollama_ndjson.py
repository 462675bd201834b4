"""Ollama's native streaming API (`/api/chat`, `/api/generate`): one JSON object per line.

A line carries `message.content` (text), `message.thinking` (reasoning) or `message.tool_calls`
(whole calls, never in pieces); `/api/generate` puts `response` and `thinking` at the top level.
The last line has `"done": true` with `done_reason` and token counts; an `{"error": "..."}` line
is the provider's error inside a 200 stream.
"""

from __future__ import annotations

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.decode.sse import Frame
from streamtap.diagnostics.dialects.stream import StreamState
from streamtap.diagnostics.dialects.base import (FRAMING_NDJSON, Dialect, compact_json, load_json,
                                                 unknown_shape_error, wrapped_error)
from streamtap.diagnostics.dialects.usage import normalize_usage

# The ordinary line, as Ollama's Go encoder writes it, ends like this; such a line without tool
# calls or an error is classified from its bytes alone (about a third of the cost of json.loads,
# at the price of not validating it). Every probe below holds unescaped quotes, so it can only
# match JSON structure, never text inside a string (where every quote is escaped).
_NOT_DONE = b',"done":false}'
_THINKING = b'"thinking":"'
_CONTENT = b'"content":"'
_RESPONSE = b'"response":"'
_KNOWN_KEYS = ("message", "response", "thinking", "done", "error")


def _has_text(value: object) -> bool:
    return isinstance(value, str) and value != ""


class OllamaNdjson(Dialect):
    name = "ollama-ndjson"
    framing = FRAMING_NDJSON
    terminal_names = ("done",)

    def __init__(self, state: StreamState):
        super().__init__(state)
        self._block: str | None = None  # the open block: ev.TEXT, ev.REASONING or None
        self._tool_count = 0  # calls arrive whole, unnumbered: the index is a running count

    def on_frame(self, frame: Frame, t_ms: float) -> str:
        data = frame.data
        if (data.endswith(_NOT_DONE) and data.startswith(b'{"model":')
                and b'"tool_calls":' not in data and b'"error":' not in data):
            return self._quick(data, t_ms)
        state = self.state
        obj = load_json(data, state)
        if not isinstance(obj, dict):
            if obj is None:  # unparseable (already counted as a protocol error)
                state.emit(ev.UNKNOWN, t_ms)
            else:
                state.unknown_type("non_object", t_ms)
            return ev.UNKNOWN
        if obj.get("error"):
            wrapped_error(obj, state, t_ms, shape="ndjson_error")
            usage = normalize_usage(obj)
            if usage:  # a line can carry the counts so far along with the error
                state.set_usage(**usage)
                state.emit(ev.USAGE, t_ms)
            return ev.ERROR
        if unknown_shape_error(obj, state, t_ms):  # `{"code":..,"message":".."}`: no Ollama line
            return ev.ERROR
        if not any(key in obj for key in _KNOWN_KEYS):
            state.unknown_type(next(iter(obj), None), t_ms)
            return ev.UNKNOWN
        message = obj.get("message")
        if not isinstance(message, dict):
            message = {}
        thinking = message.get("thinking", obj.get("thinking"))
        if "content" in message:
            text_key, text = "content", message.get("content")
        else:
            text_key, text = "response", obj.get("response")
        kind = self._deltas(_has_text(thinking), text_key if _has_text(text) else None, t_ms)
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            kind = self._tool_calls(calls, t_ms)
        if obj.get("done") is True:
            kind = self._done(obj, t_ms)
        if kind == ev.META:
            self.state.emit(ev.META, t_ms)
        return kind

    def _quick(self, data: bytes, t_ms: float) -> str:
        """An ordinary not-done line, read from its bytes: which fields carry non-empty text."""
        at = data.find(_THINKING)
        thinking = at >= 0 and data[at + len(_THINKING)] != 34  # 34: '"', an empty string
        at = data.find(_CONTENT)
        if at >= 0:
            text_key = "content" if data[at + len(_CONTENT)] != 34 else None
        else:
            at = data.find(_RESPONSE)
            text_key = "response" if at >= 0 and data[at + len(_RESPONSE)] != 34 else None
        kind = self._deltas(thinking, text_key, t_ms)
        if kind == ev.META:
            self.state.emit(ev.META, t_ms)
        return kind

    def _deltas(self, thinking: bool, text_key: str | None, t_ms: float) -> str:
        """Reasoning, then text (a line rarely has both); `meta` (not emitted) if neither."""
        state = self.state
        kind = ev.META
        if thinking:
            if self._block != ev.REASONING:
                self._close_block(t_ms)
                state.emit(ev.REASONING_START, t_ms)
                self._block = ev.REASONING
            state.delta_key("thinking")
            state.emit(ev.REASONING_DELTA, t_ms)
            kind = ev.REASONING_DELTA
        if text_key is not None:
            if self._block != ev.TEXT:
                self._close_block(t_ms)
                state.emit(ev.TEXT_START, t_ms)
                self._block = ev.TEXT
            state.delta_key(text_key)
            state.emit(ev.TEXT_DELTA, t_ms)
            kind = ev.TEXT_DELTA
        return kind

    def _close_block(self, t_ms: float) -> None:
        if self._block == ev.TEXT:
            self.state.emit(ev.TEXT_END, t_ms)
        elif self._block == ev.REASONING:
            self.state.emit(ev.REASONING_END, t_ms)
        self._block = None

    def _tool_calls(self, calls: list, t_ms: float) -> str:
        """Each entry is one whole call: start, its arguments at once, complete."""
        state = self.state
        self._close_block(t_ms)
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                function = {}
            index = self._tool_count
            self._tool_count += 1
            state.tool_start(index, function.get("name"), t_ms)
            state.emit(ev.TOOL_INPUT_START, t_ms)
            arguments = function.get("arguments")
            if arguments:
                # a whole call's arguments, as compact JSON (the wire form is not at hand)
                text = arguments if isinstance(arguments, str) else compact_json(arguments)
                state.tool_arguments(index, text)
                state.emit(ev.TOOL_INPUT_DELTA, t_ms)
            if state.tool_completed(index):
                state.emit(ev.TOOL_INPUT_END, t_ms)
                state.emit(ev.TOOL_CALL, t_ms)
        return ev.TOOL_CALL

    def _done(self, obj: dict, t_ms: float) -> str:
        state = self.state
        self._close_block(t_ms)
        state.set_finish_reason(obj.get("done_reason"))
        state.emit(ev.FINISH, t_ms)
        usage = normalize_usage(obj)
        if usage:
            state.set_usage(**usage)
            state.emit(ev.USAGE, t_ms)
        state.set_terminal("done", t_ms)
        return ev.FINISH
