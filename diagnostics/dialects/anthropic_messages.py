"""Anthropic Messages streams (`POST /v1/messages`): SSE events named after their `type`, content
in indexed blocks (text, thinking, redacted_thinking, tool_use) that open and close explicitly.

Tools Anthropic runs itself (web search, web fetch, code execution, tool search, and MCP
connector calls) stream as a `server_tool_use` / `mcp_tool_use` block (the model writes its input)
followed, once the provider ran it, by a `*_tool_result` block. They are provider-run tools
(`server_tool_*` events), never client tool calls: no client has to run them.

The SDK dispatches on the SSE event name, and so do we: `ping` is answered without parsing JSON.
The data's `type` is the fallback for a gateway that drops `event:` lines.
"""

from __future__ import annotations

import re

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.decode.sse import Frame
from streamtap.diagnostics.dialects.base import (Dialect, compact_json, load_json,
                                                 unknown_shape_error, wrapped_error)
from streamtap.diagnostics.dialects.usage import normalize_usage

# What a content block is, once its content_block_start has been seen.
_TEXT = "text"
_REASONING = "reasoning"
_TOOL = "tool"
_OTHER = "other"
_SERVER = "server"  # a tool the provider runs itself

_BLOCK_KINDS = {
    "text": _TEXT,
    "thinking": _REASONING,
    "redacted_thinking": _REASONING,
    "tool_use": _TOOL,
    "server_tool_use": _SERVER,
    "mcp_tool_use": _SERVER,
}
# Block kind -> its (start, delta, end) events, for the blocks whose deltas carry words.
_STREAMED = {
    _TEXT: (ev.TEXT_START, ev.TEXT_DELTA, ev.TEXT_END),
    _REASONING: (ev.REASONING_START, ev.REASONING_DELTA, ev.REASONING_END),
}
# Delta types that carry words: delta type -> (block kind, the field that holds them).
_WORD_DELTAS = {"text_delta": (_TEXT, "text"), "thinking_delta": (_REASONING, "thinking")}
# Recognised deltas that are not the model's progress (a signature closes a thinking block).
_META_DELTAS = frozenset({"signature_delta", "citations_delta"})
# The bulk of a stream is text and thinking deltas, always written in this key order. Matching
# their head is ~5x cheaper than json.loads and tells all we keep: the block index, the kind, and
# whether the piece is empty (the byte after the opening quote is the closing one). The head is
# anchored at the frame's start, before any model text; a frame that does not match is parsed.
_WORD_DELTA_HEAD = re.compile(
    rb'\{\s*"type"\s*:\s*"content_block_delta"\s*,\s*"index"\s*:\s*(\d+)\s*,\s*"delta"\s*:'
    rb'\s*\{\s*"type"\s*:\s*"(text|thinking)_delta"\s*,\s*"\2"\s*:\s*"(.)', re.S)


class AnthropicMessages(Dialect):
    name = "anthropic-messages"
    terminal_names = ("message_stop",)
    tool_call_end = "`content_block_stop`"

    def __init__(self, state):
        super().__init__(state)
        self._blocks: dict[int, str] = {}  # open block index -> _TEXT | _REASONING | _TOOL | _OTHER
        self._started: set[int] = set()  # blocks whose *_start has been emitted

    def on_frame(self, frame: Frame, t_ms: float) -> str:
        state = self.state
        name = frame.event
        if name == "ping":
            state.emit(ev.KEEPALIVE, t_ms)
            return ev.KEEPALIVE
        data = frame.data
        if name == "content_block_delta":
            head = _WORD_DELTA_HEAD.match(data)
            if head is not None and data.rstrip().endswith(b"}"):
                text = head.group(2) == b"text"
                kind, key = (_TEXT, "text") if text else (_REASONING, "thinking")
                if head.group(3) == b'"':  # an empty piece (thinking ends with one): not progress
                    state.emit(ev.META, t_ms)
                    return ev.META
                return self._words(int(head.group(1)), kind, key, t_ms)
        obj = load_json(data, state)
        if not isinstance(obj, dict):
            if name == "error":  # an error event whose body did not parse is still an error
                state.stream_error("error_event", t_ms)
                return ev.ERROR
            state.emit(ev.UNKNOWN, t_ms)
            return ev.UNKNOWN
        if name is None:
            name = obj.get("type")
            if name is None and obj.get("error"):  # a gateway's bare `{"error": {...}}` chunk
                wrapped_error(obj, state, t_ms)
                return ev.ERROR
        if name == "content_block_delta":
            return self._delta(obj, t_ms)
        if name == "content_block_start":
            return self._block_start(obj, t_ms)
        if name == "content_block_stop":
            return self._block_stop(obj, t_ms)
        if name == "message_delta":
            return self._message_delta(obj, t_ms)
        if name == "message_start":
            message = obj.get("message")
            if isinstance(message, dict):
                state.set_response_id(message.get("id"))
                self._usage(message.get("usage"), t_ms)
            state.emit(ev.META, t_ms)
            return ev.META
        if name == "message_stop":
            state.emit(ev.META, t_ms)
            state.set_terminal("message_stop", t_ms)
            return ev.META
        if name == "ping":
            state.emit(ev.KEEPALIVE, t_ms)
            return ev.KEEPALIVE
        if name == "error":
            if not wrapped_error(obj, state, t_ms, shape="error_event"):
                state.stream_error("error_event", t_ms)
            return ev.ERROR
        if unknown_shape_error(obj, state, t_ms):  # an event no one documents, carrying an error
            return ev.ERROR
        state.unknown_type(name, t_ms)
        return ev.UNKNOWN

    # -- content blocks -------------------------------------------------------------------------
    def _block_start(self, obj: dict, t_ms: float) -> str:
        state = self.state
        index = obj.get("index")
        block = obj.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            state.protocol_error("malformed_block_start")
            state.emit(ev.META, t_ms)
            return ev.META
        block_type = block.get("type")
        kind = _BLOCK_KINDS.get(block_type)
        if kind is None:
            self._blocks[index] = _OTHER
            if isinstance(block_type, str) and block_type.endswith("_tool_result"):
                # The provider ran the tool: its result (the provider's output, not the model's).
                key = block.get("tool_use_id")
                if key not in state.server_tools:
                    key = state.open_server_tool()
                state.server_tool_end(key, t_ms)
                return ev.SERVER_TOOL_END
            state.unknown_type(block_type, t_ms)
            return ev.UNKNOWN
        self._blocks[index] = kind
        if kind == _SERVER:
            # MCP tool names are the user's servers': the type says only that it was MCP.
            tool_type = "mcp" if block_type == "mcp_tool_use" else block.get("name")
            key = block.get("id") if isinstance(block.get("id"), str) else ("block", index)
            state.server_tool_start(key, tool_type, t_ms)
            return ev.SERVER_TOOL_START
        if kind == _TOOL:
            state.tool_start(index, block.get("name"), t_ms)
            state.emit(ev.TOOL_INPUT_START, t_ms)
            tool_input = block.get("input")
            if tool_input:  # input given whole at the start (not what the API does today)
                state.tool_arguments(index, compact_json(tool_input))
                state.emit(ev.TOOL_INPUT_DELTA, t_ms)
            return ev.TOOL_INPUT_START
        if block_type == "redacted_thinking":
            # Encrypted reasoning arrives whole in the start event: reasoning began, no deltas.
            self._started.add(index)
            state.emit(ev.REASONING_START, t_ms)
            return ev.REASONING_START
        # A text or thinking block normally opens empty; words in the start event still count.
        key = "text" if kind == _TEXT else "thinking"
        if block.get(key):
            return self._words(index, kind, key, t_ms)
        state.emit(ev.META, t_ms)
        return ev.META

    def _delta(self, obj: dict, t_ms: float) -> str:
        state = self.state
        index = obj.get("index")
        delta = obj.get("delta")
        if not isinstance(delta, dict):
            state.protocol_error("malformed_block_delta")
            state.emit(ev.META, t_ms)
            return ev.META
        delta_type = delta.get("type")
        words = _WORD_DELTAS.get(delta_type)
        if words is not None:
            kind, key = words
            if not delta.get(key):  # thinking ends with an empty delta: not progress
                state.emit(ev.META, t_ms)
                return ev.META
            return self._words(index, kind, key, t_ms)
        if delta_type == "input_json_delta":
            # Only non-empty pieces count as argument chunks: the first one is often "" and
            # carries nothing, so "5 chunks" means five pieces of the arguments.
            partial = delta.get("partial_json")
            if not partial or not isinstance(partial, str):
                state.emit(ev.META, t_ms)
                return ev.META
            if self._blocks.get(index) == _SERVER:  # the model writing a provider tool's input
                state.delta_key("partial_json")
                state.server_tool_step(t_ms)
                return ev.SERVER_TOOL_DELTA
            if index not in state.tool_calls:  # its block start was lost: the call still began
                self._blocks[index] = _TOOL
                state.tool_start(index, None, t_ms)
                state.emit(ev.TOOL_INPUT_START, t_ms)
            state.delta_key("partial_json")
            state.tool_arguments(index, partial)
            state.emit(ev.TOOL_INPUT_DELTA, t_ms)
            return ev.TOOL_INPUT_DELTA
        if delta_type in _META_DELTAS:
            state.emit(ev.META, t_ms)
            return ev.META
        state.unknown_type(delta_type, t_ms)
        return ev.UNKNOWN

    def _words(self, index: object, kind: str, key: str, t_ms: float) -> str:
        """A non-empty piece of text or thinking: the block's *_start first, once."""
        state = self.state
        start, delta, _ = _STREAMED[kind]
        if index not in self._started:
            self._started.add(index)
            self._blocks.setdefault(index, kind)
            state.emit(start, t_ms)
        state.delta_key(key)
        state.emit(delta, t_ms)
        return delta

    def _block_stop(self, obj: dict, t_ms: float) -> str:
        state = self.state
        index = obj.get("index")
        kind = self._blocks.pop(index, None)
        started = index in self._started
        self._started.discard(index)
        if kind == _TOOL and state.tool_completed(index):
            state.emit(ev.TOOL_INPUT_END, t_ms)
            state.emit(ev.TOOL_CALL, t_ms)
            return ev.TOOL_CALL
        if kind in _STREAMED and started:
            end = _STREAMED[kind][2]
            state.emit(end, t_ms)
            return end
        state.emit(ev.META, t_ms)  # an empty block, or one we never saw open
        return ev.META

    # -- the message ----------------------------------------------------------------------------
    def _message_delta(self, obj: dict, t_ms: float) -> str:
        state = self.state
        delta = obj.get("delta")
        reason = delta.get("stop_reason") if isinstance(delta, dict) else None
        kind = ev.META
        if reason is not None:
            state.set_finish_reason(reason)
            state.emit(ev.FINISH, t_ms)
            kind = ev.FINISH
        if self._usage(obj.get("usage"), t_ms) and kind == ev.META:
            kind = ev.USAGE
        if kind == ev.META:
            state.emit(ev.META, t_ms)
        return kind

    def _usage(self, usage: object, t_ms: float) -> bool:
        """Anthropic usage is cumulative: a later report overwrites the counts it carries."""
        counts = normalize_usage(usage)
        if not counts:
            return False
        self.state.set_usage(**counts)
        self.state.emit(ev.USAGE, t_ms)
        return True
