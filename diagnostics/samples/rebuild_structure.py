"""The pass over a sample's frames that a rebuild needs before filling them: which markers are
tool-argument pieces (so that each call's pieces join into valid JSON, left open where the call
never completed), which are whole calls, and the renumbering of calls, blocks and items that share
one stored shape (frames that differ only in numbers share a shape, so their indexes and ids would
otherwise all be the first one's)."""

from __future__ import annotations

import re

from streamtap.diagnostics.record.shapes import OBJ, STR

ARGUMENT_KEY = "a"  # the one key of a rebuilt tool-arguments object
ID_MARKER = re.compile(r"([A-Za-z]+[-_])?\*#(\d+)")
# Anthropic block type -> its delta's type and field.
_EMPTY_DELTAS = {"text": ("text_delta", "text"), "thinking": ("thinking_delta", "thinking"),
                 "tool_use": ("input_json_delta", "partial_json")}


class Piece:
    """A non-empty argument piece of call `key` (a JSON string on the wire)."""

    __slots__ = ("key",)

    def __init__(self, key: object):
        self.key = key


class Whole:
    """A call's whole arguments, as a JSON string (Responses `.done`) or an object (`as_object`)."""

    __slots__ = ("key", "as_object")

    def __init__(self, key: object, as_object: bool):
        self.key = key
        self.as_object = as_object


class PartialArgs:
    """Vertex streamed arguments: a `partialArgs` list that appends to one string argument."""

    __slots__ = ()


def _entries(value: object) -> list:
    return value if isinstance(value, list) else []


def _dicts(value: object) -> list[dict]:
    return [item for item in _entries(value) if isinstance(item, dict)]


class Structure:
    """A pass over the frames in order, per dialect. Frames that differ only in their numbers
    share one shape, so a shape holds the first such frame's indexes and ids: this pass numbers
    calls, blocks and output items again the way the dialect's stream does (one after the other,
    from 0), gives each its own id, and replaces tool arguments with markers, counting the
    pieces of each call so they can be filled to concatenate to valid JSON."""

    def __init__(self, dialect: str | None):
        self.dialect = dialect
        self.pieces: dict[object, int] = {}
        self.started = 0  # calls (Chat, Gemini, Ollama), blocks (Anthropic) or items (Responses)
        self.block_type: str | None = None  # the open Anthropic content block's type
        self._id_owner: dict[str, object] = {}

    def visit(self, skeleton: object, kind: str, event: str | None) -> object:
        if not isinstance(skeleton, dict):
            return skeleton
        visit = {"openai-chat": self._chat, "openai-responses": self._responses,
                 "anthropic-messages": self._anthropic, "gemini": self._gemini,
                 "ollama-ndjson": self._ollama}.get(self.dialect or "")
        if visit is not None:
            visit(skeleton, kind, event)
        return skeleton

    def _piece(self, holder: dict, key: str, call: object) -> None:
        value = holder.get(key)
        if value == STR:
            holder[key] = Piece(call)
            self.pieces[call] = self.pieces.get(call, 0) + 1
        elif value == OBJ:
            holder[key] = Whole(call, as_object=True)

    def _own_id(self, holder: dict, key: str, owner: object) -> None:
        """The id of call/block/item `owner`: a marker first seen with another owner is that
        owner's id (the frames shared a shape), so this one gets its own."""
        marker = holder.get(key)
        if not isinstance(marker, str) or not ID_MARKER.fullmatch(marker):
            return
        first = self._id_owner.setdefault(marker, owner)
        if first != owner:
            holder[key] = f"{fake_id(marker)}x{owner}"

    def _current(self) -> int:
        return max(self.started - 1, 0)

    def _chat(self, obj: dict, kind: str, event: str | None) -> None:
        starts = kind in ("tool_input_start", "tool_call")
        for choice in _dicts(obj.get("choices")):
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            for position, call in enumerate(_dicts(delta.get("tool_calls"))):
                function = call.get("function")
                function = function if isinstance(function, dict) else {}
                if starts and ("id" in call or "name" in function):
                    self.started += 1
                key: object = position
                if isinstance(call.get("index"), int):
                    key = call["index"] = self._current()
                self._own_id(call, "id", key)
                self._piece(function, "arguments", key)
            legacy = delta.get("function_call")
            if isinstance(legacy, dict):
                self._piece(legacy, "arguments", 0)

    def _responses(self, obj: dict, kind: str, event: str | None) -> None:
        kind_name = obj.get("type")
        if kind_name == "response.output_item.added":
            self.started += 1
        index = obj.get("output_index")
        if isinstance(index, int):
            index = obj["output_index"] = self._current()
        self._own_id(obj, "item_id", index)
        if kind_name in ("response.function_call_arguments.delta",
                         "response.custom_tool_call_input.delta"):
            self._piece(obj, "delta", index)
        elif kind_name == "response.function_call_arguments.done" and obj.get("arguments") == STR:
            obj["arguments"] = Whole(index, as_object=False)
        item = obj.get("item")
        if isinstance(item, dict):
            self._own_id(item, "id", index)
            if item.get("arguments") == STR:
                item["arguments"] = Whole(index, as_object=False)
        response = obj.get("response")
        if isinstance(response, dict):
            for position, item in enumerate(_dicts(response.get("output"))):
                self._own_id(item, "id", position)
                if item.get("arguments") == STR:
                    item["arguments"] = Whole(position, as_object=False)

    def _anthropic(self, obj: dict, kind: str, event: str | None) -> None:
        kind_name = event or obj.get("type")
        if kind_name == "content_block_start":
            self.started += 1
        if kind_name in ("content_block_start", "content_block_delta", "content_block_stop") \
                and isinstance(obj.get("index"), int):
            obj["index"] = self._current()
        block = obj.get("content_block")
        if isinstance(block, dict):
            self._own_id(block, "id", self._current())
            self.block_type = block.get("type")
            # A tool_use block's `input` is `{}` on the wire (the arguments follow in pieces),
            # so its `$obj` stays `{}` (see _Filler.value).
        delta = obj.get("delta")
        if kind_name == "content_block_delta" and isinstance(delta, dict):
            self._match_block(delta)
            self._piece(delta, "partial_json", obj.get("index"))

    def _match_block(self, delta: dict) -> None:
        """An empty delta can share the shape of an empty delta of another block type (both are
        `meta` with the same key counts): give it the type of the block it is in."""
        wanted = _EMPTY_DELTAS.get(self.block_type or "")
        if wanted is None or delta.get("type") == wanted[0]:
            return
        for _, field in _EMPTY_DELTAS.values():
            if delta.get(field) == "" and len(delta) == 2:
                delta.clear()
                delta.update({"type": wanted[0], wanted[1]: ""})
                return

    def _gemini(self, obj: dict, kind: str, event: str | None) -> None:
        for candidate in _dicts(obj.get("candidates")):
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in _dicts(parts):
                call = part.get("functionCall")
                if not isinstance(call, dict):
                    continue
                if "name" in call:
                    self.started += 1
                self._own_id(call, "id", self._current())
                if call.get("args") == OBJ:
                    call["args"] = Whole(self._current(), as_object=True)
                if call.get("partialArgs") == OBJ:
                    call["partialArgs"] = PartialArgs()

    def _ollama(self, obj: dict, kind: str, event: str | None) -> None:
        message = obj.get("message")
        if not isinstance(message, dict):
            return
        for call in _dicts(message.get("tool_calls")):
            self.started += 1
            self._own_id(call, "id", self._current())
            function = call.get("function")
            if isinstance(function, dict) and function.get("arguments") in (OBJ, STR):
                function["arguments"] = Whole(self._current(),
                                               as_object=function["arguments"] == OBJ)


def fake_id(marker: str) -> str:
    """`chatcmpl-*#1` -> `chatcmpl-1`: the prefix and the ordinal, short so the frame still fits
    its original size (the filler takes up the rest)."""
    found = ID_MARKER.fullmatch(marker)
    if found is None:
        return marker
    return f"{found.group(1) or 'id'}{found.group(2)}"


