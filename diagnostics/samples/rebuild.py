"""Frames rebuilt from a sample's shapes: valid bytes in the sample's dialect, each padded to the
size the original frame had, with filler where the content was. This is what `streamtap replay`
plays; it decodes, with our own dialects, to the same frame kinds as the original.

Markers are filled: `$str` with filler text, ids with fake ids that keep their prefix and ordinal
(so they agree across frames), `$seq` with a counter rising by one per frame, `$obj` with `{}`
(tool arguments with a small object, unless the call's arguments were empty). Tool argument
pieces (Chat `function.arguments`, Responses argument deltas, Anthropic `partial_json`) are filled
so that, per call, they concatenate to valid JSON, and are left open where the call never
completed. A frame grows to its original size by longer filler, else by JSON whitespace (SSE
comments by trailing spaces, `[DONE]` by blank lines before it, which SSE readers skip).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass

from streamtap.diagnostics.dialects import choose_dialect, dialect_for_path
from streamtap.diagnostics.dialects.base import FRAMING_BODY, FRAMING_JSON_ARRAY, FRAMING_NDJSON, FRAMING_NONE
from streamtap.diagnostics.dialects.errorframes import error_body
from streamtap.diagnostics.samples.rebuild_structure import (ARGUMENT_KEY, ID_MARKER, PartialArgs, Piece, Structure, Whole,
                                fake_id)
from streamtap.diagnostics.record.shapes import OBJ, SEQ, STR, TEXT

FILLER = "lorem ipsum dolor sit amet "
_SENTINEL = re.compile(r"@@(\d+)@@")
# How much a filler slot wants to absorb a frame's padding: content fields first (a rebuilt text
# delta is as long as the original), then other strings; argument pieces whose call is repeated
# whole later (Responses `.done`) grow last, so that the whole call still fits its frame.
_CONTENT_KEYS = frozenset({"text", "content", "thinking", "reasoning_content", "reasoning",
                           "refusal", "delta", "response", "summary", "partial_json"})
_CONTENT, _OTHER, _REPEATED_PIECE = 3, 2, 1


def filler(n: int) -> str:
    return (FILLER * (n // len(FILLER) + 1))[:max(n, 0)]


@dataclass(frozen=True)
class Rebuilt:
    """What replay sends: one byte string per sample frame (in order), the bytes after the last
    frame on a clean end (a JSON array's `]`), or, for a non-streamed reply, the whole body."""

    framing: str
    frames: tuple[bytes, ...]
    tail: bytes = b""
    body: bytes | None = None


# -- filling one frame ----------------------------------------------------------------------------
class _Filler:
    """Fills the markers of one frame with sentinels (`@@n@@`) standing for filler slots, so the
    frame's size can be computed and the padding given to the slot that should grow."""

    def __init__(self, rebuild: "_Rebuild", length: int = 1):
        self.rebuild = rebuild
        self.length = length  # a slot's starting length: the shortest filler, unless no size
        self.slots: list[list[int]] = []  # [priority, length]
        self.pieces: list[tuple[object, str, int, str]] = []  # call, head, slot, tail

    def slot(self, priority: int, length: int | None = None) -> str:
        self.slots.append([priority, self.length if length is None else length])
        return f"@@{len(self.slots) - 1}@@"

    def value(self, value: object, key: str | None) -> object:
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(item, key) for item in value]
        if isinstance(value, Piece):
            return self._piece(value.key)
        if isinstance(value, Whole):
            return self.rebuild.whole_arguments(value.key, value.as_object, self)
        if isinstance(value, PartialArgs):
            return [{"jsonPath": f"$.{ARGUMENT_KEY}", "stringValue": self.slot(_CONTENT)}]
        if isinstance(value, str):
            if value == STR and key == "reason" and self.rebuild.finish_reason:
                # Responses `incomplete_details.reason` is not a structural key in shapes.py,
                # but the sample keeps the finish reason it became.
                return self.rebuild.finish_reason
            if value == STR or value == TEXT:
                return self.slot(_CONTENT if key in _CONTENT_KEYS else _OTHER)
            if value == SEQ:
                return self.rebuild.next_seq()
            if value == OBJ:
                return {}
            if ID_MARKER.fullmatch(value):
                return fake_id(value)
        return value

    def _piece(self, call: object) -> str:
        rebuild = self.rebuild
        total = rebuild.pieces.get(call, 1)
        seen = rebuild.pieces_seen.get(call, 0)
        rebuild.pieces_seen[call] = seen + 1
        head = f'{{"{ARGUMENT_KEY}":"' if seen == 0 else ""
        tail = '"}' if seen == total - 1 and rebuild.call_completed(call) else ""
        priority = _REPEATED_PIECE if rebuild.dialect == "openai-responses" else _CONTENT
        sentinel = self.slot(priority, 0 if head or tail else 1)
        self.pieces.append((call, head, len(self.slots) - 1, tail))
        return head + sentinel + tail

    def finish(self, template: str, target: int | None, pad) -> str:
        """Fill the sentinels, growing one slot (or calling `pad`) to reach `target` bytes."""
        size = len(_SENTINEL.sub(lambda m: filler(self.slots[int(m.group(1))][1]),
                                 template).encode())
        deficit = (target - size) if target is not None else 0
        if deficit > 0 and self.slots:
            best = max(range(len(self.slots)), key=lambda i: (self.slots[i][0], -i))
            self.slots[best][1] += deficit
            deficit = 0
        text = _SENTINEL.sub(lambda m: filler(self.slots[int(m.group(1))][1]), template)
        for call, head, slot, tail in self.pieces:
            self.rebuild.arguments[call] = (self.rebuild.arguments.get(call, "") + head
                                            + filler(self.slots[slot][1]) + tail)
        return pad(text, deficit) if deficit > 0 else text


def _pad_json(text: str, deficit: int) -> str:
    """JSON whitespace before the last closing bracket (Anthropic pads its JSON this way)."""
    at = max(text.rfind("}"), text.rfind("]"))
    if at < 0:
        return text + " " * deficit
    return text[:at] + " " * deficit + text[at:]


def _fit(frame: bytes, size: int | None) -> bytes:
    """One byte too long (the original wrote `data:` with no space, which is valid SSE)."""
    if size and len(frame) > size:
        return frame.replace(b"data: ", b"data:", 1)
    return frame


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


# -- the whole stream -----------------------------------------------------------------------------
class _Rebuild:
    def __init__(self, sample: dict):
        self.sample = sample
        request = sample.get("request") or {}
        path = request.get("path") or ""
        dialect_class = choose_dialect(sample.get("dialect"), path, sample.get("content_type"))
        self.framing = dialect_class.framing
        if (sample.get("status") or 0) >= 400 or sample.get("dialect") == "json":
            self.framing = FRAMING_BODY  # an error reply is one JSON body, as the recorder read it
        self.dialect = sample.get("dialect")
        self.crlf = self.dialect == "gemini"
        self.shapes = sample.get("shapes") or []
        self.finish_reason = (sample.get("stream") or {}).get("finish_reason")
        calls = (sample.get("stream") or {}).get("tool_calls") or []
        self.calls = {call.get("index"): call for call in calls if isinstance(call, dict)}
        self.pieces: dict[object, int] = {}
        self.pieces_seen: dict[object, int] = {}
        self.arguments: dict[object, str] = {}  # what each call's pieces added up to so far
        self.seq = 0
        self.elements = 0  # JSON array elements written (the first one opens the array)

    # state the fillers share
    def next_seq(self) -> int:
        self.seq += 1
        return self.seq - 1

    def call_completed(self, call: object) -> bool:
        known = self.calls.get(call)
        if known is not None:
            return bool(known.get("completed"))
        return self.sample.get("ending") == "terminal"

    def whole_arguments(self, call: object, as_object: bool, fill: _Filler) -> object:
        """A call's whole arguments: what its pieces added up to, else a small object (or `{}`
        when the original call had no arguments)."""
        known = self.calls.get(call)
        empty = known is not None and not known.get("arg_bytes")
        if as_object:
            return {} if empty else {ARGUMENT_KEY: fill.slot(_CONTENT)}
        if call in self.arguments:
            text = self.arguments[call]
            return text if text.endswith('"}') else text + '"}'
        return "{}" if empty else _dumps({ARGUMENT_KEY: filler(3)})

    # frames
    def shape_for(self, index: int) -> dict | None:
        """The frame's shape; a frame without one (the table was full) borrows the shape of the
        first frame of the same kind that has one."""
        frames = self.sample["frames"]
        shape_index = frames[index][3] if len(frames[index]) > 3 else None
        if shape_index is None:
            kind = frames[index][2]
            shape_index = next((entry[3] for entry in frames if len(entry) > 3
                                and entry[2] == kind and entry[3] is not None), None)
        if isinstance(shape_index, int) and 0 <= shape_index < len(self.shapes):
            return self.shapes[shape_index]
        return None

    def run(self) -> Rebuilt:
        if self.framing == FRAMING_BODY:
            return Rebuilt(self.framing, (), body=self.body())
        if self.framing == FRAMING_NONE:
            return Rebuilt(self.framing, (), body=b"")
        frames = self.sample["frames"]
        structure = Structure(self.dialect)
        marked: list[dict | None] = []
        for index, entry in enumerate(frames):
            shape = None if entry[2] == "unterminated" else self.shape_for(index)
            if shape is not None and "json" in shape:
                skeleton = structure.visit(copy.deepcopy(shape["json"]), entry[2],
                                           shape.get("event"))
                shape = {**shape, "json": skeleton}
            marked.append(shape)
        self.pieces = structure.pieces
        out = []
        for index, entry in enumerate(frames):
            size = entry[1]
            if entry[2] == "unterminated":
                out.append(self.unterminated(index, size))
            else:
                out.append(self.frame(marked[index], size))
        tail = b""
        if (self.framing == FRAMING_JSON_ARRAY and self.elements
                and self.sample.get("ending") in ("terminal", "clean_close")
                and not (frames and frames[-1][2] == "unterminated")):
            tail = b"]"
        return Rebuilt(self.framing, tuple(out), tail=tail)

    def _end(self) -> str:
        return "\r\n" if self.crlf else "\n"

    def _event_line(self, shape: dict) -> str:
        event = shape.get("event")
        if not event:
            return ""
        return f"event: {'message' if event == STR else event}{self._end()}"

    def _separator(self) -> str:
        self.elements += 1
        return "[" if self.elements == 1 else ",\n"

    def frame(self, shape: dict | None, size: int | None) -> bytes:
        fill = _Filler(self)
        if shape is None:
            return self._padding_frame(size)
        if "comment" in shape:
            text = shape["comment"]
            template = ": " + (fill.value(text, "comment") if text else "")
            line = fill.finish(template, size - 1 if size else None,
                               lambda text, n: text + " " * n)
            return (line + "\n").encode()
        end = self._end()
        head = self._event_line(shape)
        if "json" in shape:
            body = _dumps(fill.value(shape["json"], None))
            if self.framing == FRAMING_NDJSON:
                return fill.finish(body, size - 1 if size else None, _pad_json).encode() + b"\n"
            if self.framing == FRAMING_JSON_ARRAY:
                sep = self._separator()
                return (sep + fill.finish(body, size - len(sep) if size else None,
                                          _pad_json)).encode()
            fixed = len(head) + len("data: ") + 2 * len(end)
            text = fill.finish(body, size - fixed if size else None, _pad_json)
            return _fit(f"{head}data: {text}{end}{end}".encode(), size)
        data = shape.get("data", "")
        data = fill.value(data, "data")
        template = f"{head}data: {data}{end}{end}"
        # Non-JSON data (`[DONE]`) cannot grow: blank lines before it, which SSE readers skip.
        return _fit(fill.finish(template, size, lambda text, n: "\n" * n + text).encode(), size)

    def _padding_frame(self, size: int | None) -> bytes:
        """A frame the sample has no shape for: an SSE comment of its size (NDJSON and JSON
        arrays have no comments: an object holding only filler)."""
        size = size or 0
        if self.framing in (FRAMING_NDJSON, FRAMING_JSON_ARRAY):
            sep = self._separator() if self.framing == FRAMING_JSON_ARRAY else ""
            end = "\n" if self.framing == FRAMING_NDJSON else ""
            room = size - len(sep) - len(end) - len(_dumps({"streamtap_padding": ""}))
            return (sep + _dumps({"streamtap_padding": filler(room)}) + end).encode()
        return (":" + filler(max(size - 2, 0)) + "\n").encode()

    def unterminated(self, index: int, size: int) -> bytes:
        """An unfinished frame of `size` bytes: the start of the frame before it (rebuilt from its
        shape without arguments markers), cut before it ends; no blank line."""
        frames = self.sample["frames"]
        shape = None
        for other in list(range(index - 1, -1, -1)) + list(range(index + 1, len(frames))):
            candidate = self.shape_for(other) if frames[other][2] != "unterminated" else None
            if candidate is not None and ("json" in candidate or "data" in candidate):
                shape = candidate
                break
        sep = self._separator() if self.framing == FRAMING_JSON_ARRAY else ""
        if shape is None or "json" not in shape:
            start = {FRAMING_NDJSON: '{"', FRAMING_JSON_ARRAY: sep + '{"'}.get(self.framing,
                                                                              "data: ")
            return (start + filler(max(size - len(start), 0))).encode()[:max(size, len(start))]
        fill = _Filler(self)
        body = _dumps(fill.value(shape["json"], None))
        prefix = {FRAMING_NDJSON: "", FRAMING_JSON_ARRAY: sep}.get(
            self.framing, f"{self._event_line(shape)}data: ")
        seq = self.seq
        text = prefix + fill.finish(body, size + 2 - len(prefix), _pad_json)
        self.seq = seq  # a frame that never finished does not take a sequence number
        return text.encode()[:size]

    def body(self) -> bytes:
        """A non-streamed reply: the body from its shape, else the dialect's error body."""
        shape_index = self.sample.get("body_shape")
        fill = _Filler(self, length=len("lorem ipsum"))  # a sample keeps no body size
        if isinstance(shape_index, int) and 0 <= shape_index < len(self.shapes):
            shape = self.shapes[shape_index]
            if "json" in shape:
                return fill.finish(_dumps(fill.value(shape["json"], None)), None,
                                   _pad_json).encode()
        status = self.sample.get("status") or 0
        if status >= 400:
            error = self.sample.get("error") or {}
            path = (self.sample.get("request") or {}).get("path") or ""
            return _dumps(error_body(dialect_for_path(path), status, error.get("error_type"),
                                     error.get("error_code"))).encode()
        return b""


def rebuild(sample: dict) -> Rebuilt:
    """The bytes a replay of `sample` sends (pure: no clock, no socket)."""
    return _Rebuild(sample).run()


def writes(sample: dict, rebuilt: Rebuilt) -> list[tuple[float, bytes]]:
    """(ms after the response headers, bytes) to write: frames that arrived together in the
    original (the same timestamp) go out in one write; a body goes out at the first byte."""
    if rebuilt.body is not None:
        timing = sample.get("timing") or {}
        first = timing.get("first_byte_ms")
        start = timing.get("response_headers_ms") or 0.0
        at = max((first or start) - start, 0.0)
        return [(at, rebuilt.body)] if rebuilt.body else []
    out: list[tuple[float, bytes]] = []
    for entry, data in zip(sample["frames"], rebuilt.frames):
        t = max(float(entry[0]), 0.0)
        if out and out[-1][0] == t:
            out[-1] = (t, out[-1][1] + data)
        else:
            out.append((t, data))
    if rebuilt.tail and out:
        out[-1] = (out[-1][0], out[-1][1] + rebuilt.tail)
    return out
