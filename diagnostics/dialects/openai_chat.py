"""OpenAI Chat Completions streams and the many compatible servers: `data:` chunks whose
`choices[0].delta` carries text, reasoning or tool-call pieces, ended by `data: [DONE]`.

Compatible servers differ in where they put things, so each is accepted: reasoning under
`reasoning_content` (DeepSeek, Kimi), `reasoning` or `reasoning_details` (OpenRouter, Ollama);
usage on an extra `choices: []` chunk, on the finish chunk, or inside `choices[0]` (Moonshot);
tool-call arguments in pieces (OpenAI) or whole in one chunk (Ollama). Chat has no per-block end
events, so a text or reasoning block ends when the kind of content switches or the finish arrives.

Content may also be a list of typed parts instead of a string: Mistral's reasoning models send
`delta.content` as `[{"type": "thinking", "thinking": [{"type": "text", "text": ...}]}]` or
`[{"type": "text", "text": ...}]` (docs.mistral.ai, "Reasoning"). Each part counts by its type,
and `delta_keys` names the path it travelled (`content[].thinking`, `content[].text`).

A chunk can carry several facts at once (OpenRouter's error chunk also carries the final usage):
ids, content, usage, the finish reason and an error are all read from every chunk.
"""

from __future__ import annotations

import json

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.decode.sse import Frame
from streamtap.diagnostics.dialects.stream import StreamState
from streamtap.diagnostics.dialects.base import (Dialect, load_json, unknown_shape_error,
                                                    wrapped_error)
from streamtap.diagnostics.dialects.usage import normalize_usage

# Finish reasons that say the tool calls before them are whole; `length`, `content_filter` and
# `error` can cut a call mid-arguments, so they leave it incomplete.
COMPLETING_FINISH_REASONS = frozenset({"tool_calls", "function_call", "stop"})
# Where compatible servers put reasoning text; the field names are what `delta_keys` records.
REASONING_KEYS = ("reasoning_content", "reasoning", "reasoning_details")
# Model output that reads as the answer: `refusal` is the model's text too, in its own field.
TEXT_KEYS = ("content", "refusal")
# Typed content parts, by `type`: what the part is, and the field that holds its words. Part
# types read as reasoning wherever they travel; text parts inside a reasoning field are reasoning.
REASONING_PART_TYPES = {"thinking": "thinking", "reasoning": "text", "reasoning_text": "text"}
TEXT_PART_TYPES = {"text": "text", "output_text": "text", "refusal": "refusal"}
# Recognised parts that are not the model's words (Mistral's citations to tool results).
META_PART_TYPES = frozenset({"reference"})

# Most chunks are plain text, which OpenAI and most compatible servers write as compact JSON in
# this key order. While a text block is open, such a chunk is recognised from its bytes (~4x
# cheaper than json.loads). JSON escapes every quote inside a string, so `":` can only follow a
# key: none between head and tail means the delta is `{"content": <non-empty string>}` alone.
# Any other chunk (a role, reasoning, tools, a finish, usage, an error, spaced JSON) is parsed.
PLAIN_TEXT_HEAD = b'"choices":[{"index":0,"delta":{"content":"'
PLAIN_TEXT_TAIL = b'"},"logprobs":null,"finish_reason":null}]'

_TEXT = "text"
_REASONING = "reasoning"


def _has_reasoning_text(details: object) -> bool:
    """OpenRouter `reasoning_details`: text or summary items are reasoning; an item that only
    carries encrypted `data` is an opaque blob (like a signature), not progress."""
    if not isinstance(details, list):
        return bool(details)
    return any(isinstance(item, dict) and (item.get("text") or item.get("summary"))
               for item in details)


def _has_words(value: object) -> bool:
    """A part's words: a non-empty string, or a list of parts one of which has text (Mistral
    nests `thinking` as a list of text parts)."""
    if isinstance(value, str):
        return value != ""
    if isinstance(value, list):
        return any(isinstance(part, dict) and _has_words(part.get("text")) for part in value)
    return False


def _is_whole_object(arguments: str) -> bool:
    """True if a call's first arguments already form a JSON object: nothing valid can follow a
    complete object, so the call arrived whole (Ollama sends calls this way)."""
    if arguments[:1] != "{" or arguments.rstrip()[-1:] != "}":
        return False
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False


class OpenAIChat(Dialect):
    name = "openai-chat"
    terminal_names = ("[DONE]",)
    tool_call_end = "finish_reason"

    def __init__(self, state: StreamState):
        super().__init__(state)
        self._block: str | None = None  # the open content block: _TEXT, _REASONING or None

    def on_frame(self, frame: Frame, t_ms: float) -> str:
        data = frame.data
        state = self.state
        if data == b"[DONE]":
            state.emit(ev.META, t_ms)
            state.set_terminal("[DONE]", t_ms)
            return ev.META
        if self._block == _TEXT and self._plain_text(data):
            state.emit(ev.TEXT_DELTA, t_ms)
            return ev.TEXT_DELTA
        obj = load_json(data, state)
        if not isinstance(obj, dict):
            state.emit(ev.UNKNOWN, t_ms)  # not JSON (counted as invalid_json) or not an object
            return ev.UNKNOWN
        if state.response_id is None:
            state.set_response_id(obj.get("id"))
        choices = obj.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, dict):
            choice = None
        finish = choice.get("finish_reason") if choice is not None else None
        kind = ev.META
        if choice is not None:
            delta = choice.get("delta")
            if delta and isinstance(delta, dict):
                kind = self._delta(delta, t_ms)
        usage = obj.get("usage") or (choice.get("usage") if choice is not None else None)
        if usage:
            counts = normalize_usage(usage)
            if counts:
                state.set_usage(**counts)
                state.emit(ev.USAGE, t_ms)
                if kind == ev.META:
                    kind = ev.USAGE
        if obj.get("error") or finish == "error":
            return self._error(obj, finish, t_ms)
        if kind in (ev.META, ev.USAGE) and not finish and unknown_shape_error(obj, state, t_ms):
            return ev.ERROR  # no delta, no finish, but `code` and `message`: an error all the same
        if finish:
            self._finish(finish, t_ms)
            kind = ev.FINISH
        elif kind == ev.META:  # a role-only chunk, empty deltas, or an opaque reasoning blob
            state.emit(ev.META, t_ms)
        return kind

    # -- content ----------------------------------------------------------------------------
    @staticmethod
    def _plain_text(data: bytes) -> bool:
        start = data.find(PLAIN_TEXT_HEAD)
        if start < 0:
            return False
        start += len(PLAIN_TEXT_HEAD)
        end = data.find(PLAIN_TEXT_TAIL, start)
        return (end > start and data.find(b'":', start, end) < 0 and data[-1:] == b"}"
                and data.find(b'"usage":{', end) < 0 and data.find(b'"error":') < 0)

    def _delta(self, delta: dict, t_ms: float) -> str:
        state = self.state
        kind = ev.META
        reasoning: list[str] = []  # the delta_keys that carried reasoning in this chunk
        text: list[str] = []
        for key in REASONING_KEYS:
            value = delta.get(key)
            if isinstance(value, list) and key != "reasoning_details":
                self._typed_parts(key, value, reasoning, reasoning, t_ms)
            elif value and (key != "reasoning_details" or _has_reasoning_text(value)):
                reasoning.append(key)
        for key in TEXT_KEYS:
            value = delta.get(key)
            if isinstance(value, list):
                self._typed_parts(key, value, reasoning, text, t_ms)
            elif value:
                text.append(key)
        # One delta per chunk and kind, however many fields carried it; reasoning comes first.
        if reasoning:
            for key in reasoning:
                state.delta_key(key)
            self._open(_REASONING, t_ms)
            state.emit(ev.REASONING_DELTA, t_ms)
            kind = ev.REASONING_DELTA
        if text:
            for key in text:
                state.delta_key(key)
            self._open(_TEXT, t_ms)
            state.emit(ev.TEXT_DELTA, t_ms)
            kind = ev.TEXT_DELTA
        calls = delta.get("tool_calls")
        if not calls and delta.get("function_call"):  # the legacy single-function form
            calls = [{"index": 0, "function": delta["function_call"]}]
        if calls and isinstance(calls, list):
            self._close(t_ms)
            for position, call in enumerate(calls):
                if isinstance(call, dict):
                    found = self._tool(call, position, t_ms)
                    if kind != ev.TOOL_CALL and found != ev.META:
                        kind = found
        return kind

    def _typed_parts(self, field: str, parts: list, reasoning: list[str], text: list[str],
                     t_ms: float) -> None:
        """Sort a typed content list's parts with words into `reasoning` or `text` (as
        `field[].type` keys); `text` is where text parts go (`reasoning` in a reasoning field)."""
        for part in parts:
            if not isinstance(part, dict):
                continue
            part_type = part.get("type")
            if part_type in REASONING_PART_TYPES:
                found, words = reasoning, part.get(REASONING_PART_TYPES[part_type])
            elif part_type in TEXT_PART_TYPES:
                found, words = text, part.get(TEXT_PART_TYPES[part_type])
            elif part_type in META_PART_TYPES:
                continue
            else:
                self.state.unknown_type(f"{field}[].{part_type}", t_ms)
                continue
            key = f"{field}[].{part_type}"
            if _has_words(words) and key not in found:
                found.append(key)

    def _open(self, block: str, t_ms: float) -> None:
        """Start a text or reasoning block unless it is the one already open."""
        if self._block == block:
            return
        self._close(t_ms)
        self._block = block
        self.state.emit(ev.TEXT_START if block == _TEXT else ev.REASONING_START, t_ms)

    def _close(self, t_ms: float) -> None:
        if self._block is not None:
            self.state.emit(ev.TEXT_END if self._block == _TEXT else ev.REASONING_END, t_ms)
            self._block = None

    # -- tool calls -------------------------------------------------------------------------
    def _tool(self, call: dict, position: int, t_ms: float) -> str:
        state = self.state
        index = call.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = position  # some compatible servers leave `index` out
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        arguments = function.get("arguments")
        kind = ev.META
        whole = False
        if index not in state.tool_calls:
            # No per-call end event: a new index starting means the calls before it are whole.
            for earlier in state.open_tool_calls():
                self._complete(earlier.index, t_ms)
            state.tool_start(index, function.get("name"), t_ms)
            state.emit(ev.TOOL_INPUT_START, t_ms)
            kind = ev.TOOL_INPUT_START
            whole = isinstance(arguments, dict) or (isinstance(arguments, str)
                                                    and _is_whole_object(arguments))
        if arguments:
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            state.tool_arguments(index, text)
            state.delta_key("arguments")
            state.emit(ev.TOOL_INPUT_DELTA, t_ms)
            if kind == ev.META:
                kind = ev.TOOL_INPUT_DELTA
        if whole and self._complete(index, t_ms):
            kind = ev.TOOL_CALL
        return kind

    def _complete(self, index: int, t_ms: float) -> bool:
        if not self.state.tool_completed(index):
            return False
        self.state.emit(ev.TOOL_INPUT_END, t_ms)
        self.state.emit(ev.TOOL_CALL, t_ms)
        return True

    # -- the end of the answer ----------------------------------------------------------------
    def _finish(self, reason: object, t_ms: float) -> None:
        state = self.state
        self._close(t_ms)
        if isinstance(reason, str) and reason in COMPLETING_FINISH_REASONS:
            for call in state.open_tool_calls():
                self._complete(call.index, t_ms)
        state.set_finish_reason(reason)
        state.emit(ev.FINISH, t_ms)

    def _error(self, obj: dict, finish: object, t_ms: float) -> str:
        """An error inside the stream (read after the chunk's content and usage). OpenRouter's
        error chunk also says `finish_reason: "error"`: that is recorded as the finish reason but
        is no FINISH event, because an error does not move the phase (the model was still doing
        what it did before)."""
        if finish != "error":
            wrapped_error(obj, self.state, t_ms)  # OpenAI's bare `{"error": {...}}` chunk
            return ev.ERROR
        error = obj.get("error")
        fields = error if isinstance(error, dict) else {}
        message = fields.get("message") if fields else error if isinstance(error, str) else None
        self.state.stream_error("finish_reason_error", t_ms, fields.get("type"),
                                fields.get("code"), message)
        self.state.set_finish_reason("error")
        return ev.ERROR
