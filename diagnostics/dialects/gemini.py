"""Google Gemini streams (`:streamGenerateContent`): each chunk is a whole response object, as SSE
`data:` frames (`alt=sse`) or as the elements of one streamed JSON array (without it).

Gemini has no end marker and no block events: the chunk carrying `finishReason` is the terminal,
and a text or thought block ends when the kind of part changes or the finish arrives.

With the code execution tool, the model writes an `executableCode` part, Google runs it, and a
`codeExecutionResult` part follows: a provider-run tool (`server_tool_*` events), not a call the
client must answer. An error chunk is read whole too: its `responseId` and usage still count.
"""

from __future__ import annotations

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.decode.sse import Frame
from streamtap.diagnostics.dialects.base import (FRAMING_JSON_ARRAY, Dialect, compact_json,
                                                 load_json, unknown_shape_error, wrapped_error)
from streamtap.diagnostics.dialects.usage import normalize_usage

_TEXT = "text"
_REASONING = "reasoning"
_BLOCK_EVENTS = {
    _TEXT: (ev.TEXT_START, ev.TEXT_DELTA, ev.TEXT_END),
    _REASONING: (ev.REASONING_START, ev.REASONING_DELTA, ev.REASONING_END),
}
# A frame carries several events; its kind in the frame table is the most telling of them.
_RANK = {kind: rank for rank, kind in enumerate((
    ev.META, ev.USAGE, ev.TEXT_END, ev.REASONING_END, ev.UNKNOWN, ev.REASONING_START,
    ev.TEXT_START, ev.REASONING_DELTA, ev.TEXT_DELTA, ev.TOOL_INPUT_START, ev.TOOL_INPUT_END,
    ev.TOOL_INPUT_DELTA, ev.TOOL_CALL, ev.SERVER_TOOL_END, ev.SERVER_TOOL_START, ev.FINISH,
    ev.ERROR))}
# Part fields that are neither the model's words nor a call (a signature is opaque metadata).
_META_PART_KEYS = frozenset({"thoughtSignature", "thought", "videoMetadata", "partMetadata"})


class Gemini(Dialect):
    name = "gemini"
    terminal_names = ("finishReason",)
    tool_call_end = "closing `functionCall` part"

    def __init__(self, state):
        super().__init__(state)
        self._block: str | None = None  # _TEXT or _REASONING while one is streaming
        self._calls = 0  # function calls seen: the next call's index
        self._open_call: int | None = None  # a Vertex streamed-arguments call still open
        self._code = 0  # executableCode parts seen: the key of the provider's latest code run
        self._finished = False
        self._usage: object = None  # the last usageMetadata seen, to skip repeats cheaply
        self._kind = ev.META  # the current frame's most telling kind

    def on_frame(self, frame: Frame, t_ms: float) -> str:
        state = self.state
        obj = load_json(frame.data, state)
        if not isinstance(obj, dict):
            state.emit(ev.UNKNOWN, t_ms)
            return ev.UNKNOWN
        state.set_response_id(obj.get("responseId"))
        if obj.get("error"):  # `{"error":{"code":503,"status":"UNAVAILABLE",...}}` inside a 200
            wrapped_error(obj, state, t_ms)
            counts = normalize_usage(obj.get("usageMetadata"))
            if counts:  # what the stream had used when it failed
                state.set_usage(**counts)
                state.emit(ev.USAGE, t_ms)
            return ev.ERROR
        if ("candidates" not in obj and "promptFeedback" not in obj
                and unknown_shape_error(obj, state, t_ms)):  # `{"code":..,"message":..}`
            return ev.ERROR
        self._kind = ev.META
        candidates = obj.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        finish = None
        if isinstance(candidate, dict):
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            if isinstance(parts, list):
                for part in parts:
                    if isinstance(part, dict):
                        self._part(part, t_ms)
            finish = candidate.get("finishReason")
        if finish is None:  # a prompt blocked before any candidate: that verdict ends the stream
            feedback = obj.get("promptFeedback")
            finish = feedback.get("blockReason") if isinstance(feedback, dict) else None
        if finish is not None:
            self._end_block(t_ms)
            state.set_finish_reason(finish)
            self._emit(ev.FINISH, t_ms)
            state.set_terminal("finishReason", t_ms)
            self._finished = True
        usage = obj.get("usageMetadata")
        if usage:
            # usageMetadata is cumulative and rides on every chunk: the counts are kept from each
            # (a cut stream still shows how far it got), but the `usage` event is counted only
            # for the final report, on or after the finish chunk.
            if usage != self._usage:
                self._usage = usage
                state.set_usage(**normalize_usage(usage))
            if self._finished:
                self._emit(ev.USAGE, t_ms)
        if self._kind == ev.META:
            state.emit(ev.META, t_ms)
        return self._kind

    # -- parts ----------------------------------------------------------------------------------
    def _part(self, part: dict, t_ms: float) -> None:
        call = part.get("functionCall")
        if isinstance(call, dict):
            self._end_block(t_ms)
            self._function_call(call, t_ms)
            return
        if isinstance(part.get("executableCode"), dict):
            self._end_block(t_ms)
            self._code += 1
            self.state.server_tool_start(("code", self._code), "code_execution", t_ms)
            self._bump(ev.SERVER_TOOL_START)
            return
        if isinstance(part.get("codeExecutionResult"), dict):
            self._end_block(t_ms)
            key = ("code", self._code)
            if key not in self.state.server_tools:  # a result whose code part we never saw
                self.state.server_tool_start(key, "code_execution", t_ms)
                self._bump(ev.SERVER_TOOL_START)
            if self.state.server_tool_end(key, t_ms):
                self._bump(ev.SERVER_TOOL_END)
            return
        text = part.get("text")
        if text is not None:
            if not text:  # an empty part (often just carrying a thoughtSignature)
                return
            if part.get("thought") is True:
                self._words(_REASONING, "thought", t_ms)
            else:
                self._words(_TEXT, "text", t_ms)
            return
        for key in part:
            if key not in _META_PART_KEYS:  # inlineData, executableCode, ...: not modelled yet
                self.state.unknown_type(key, t_ms)
                self._bump(ev.UNKNOWN)
                return

    def _words(self, block: str, key: str, t_ms: float) -> None:
        start, delta, _ = _BLOCK_EVENTS[block]
        if self._block != block:
            self._end_block(t_ms)
            self._block = block
            self._emit(start, t_ms)
        self.state.delta_key(key)
        self._emit(delta, t_ms)

    def _end_block(self, t_ms: float) -> None:
        if self._block is not None:
            self._emit(_BLOCK_EVENTS[self._block][2], t_ms)
            self._block = None

    def _function_call(self, call: dict, t_ms: float) -> None:
        """A whole call in one part, or (Vertex streamed arguments) a call that opens with
        `name` + `willContinue: true`, grows by `partialArgs` and closes on a part whose
        `willContinue` is false or absent (often an empty `functionCall: {}`)."""
        state = self.state
        index = self._open_call
        if index is not None and call.get("name") and not call.get("partialArgs"):
            index = None  # a new call named while one was open: the open one never completed
        if index is None:
            index = self._calls
            self._calls += 1
            state.tool_start(index, call.get("name"), t_ms)
            self._emit(ev.TOOL_INPUT_START, t_ms)
        for key in ("args", "partialArgs"):
            value = call.get(key)
            if not value:
                continue
            state.delta_key(key)
            # `args` is whole; `partialArgs` a list of path/value updates, not text that adds up
            # to the arguments
            state.tool_arguments(index, compact_json(value), json_text=key == "args")
            self._emit(ev.TOOL_INPUT_DELTA, t_ms)
        if call.get("willContinue") is True:
            self._open_call = index
            return
        self._open_call = None
        if state.tool_completed(index):
            self._emit(ev.TOOL_INPUT_END, t_ms)
            self._emit(ev.TOOL_CALL, t_ms)

    # -- helpers --------------------------------------------------------------------------------
    def _emit(self, kind: str, t_ms: float) -> None:
        self.state.emit(kind, t_ms)
        self._bump(kind)

    def _bump(self, kind: str) -> None:
        if _RANK[kind] > _RANK[self._kind]:
            self._kind = kind


class GeminiArray(Gemini):
    """The same chunks as the elements of a streamed JSON array (no `alt=sse`)."""

    framing = FRAMING_JSON_ARRAY
