"""Content-free skeletons of a stream's frames: the evidence a sample keeps, and what replay rebuilds.

A shape is a frame's SSE event name plus its JSON's keys, nesting and value types, with every
string replaced by a marker. Kept as they are: numbers and booleans (token counts, indexes), empty
strings (whether a delta is empty decides whether it is progress), and the values of structural
keys that name kinds, not content, when they are short tokens. Ids become a marker keeping their
prefix and an ordinal (`chatcmpl-*#1`), so rebuilt ids agree across frames. Objects whose keys may
be the model's words (tool arguments, schemas, anything with a key that is not a plain identifier)
become one marker. A tool name stays only if the request defined it.

Cost: most frames of a stream share a shape, so a frame is first reduced to a cheap signature
(its event name, the kind its dialect gave it, and counts of keys, objects, arrays and empty
strings, all C-level byte counts) and only a signature not seen before is parsed. Frames that
differ only in their numbers (a rising token count) share the first such frame's shape; that is
the price of a signature that costs well under a microsecond.
"""

from __future__ import annotations

import json
import re

from streamtap.diagnostics.redaction.secrets import looks_like_key

STR = "$str"  # any non-empty string that is not a kind name
OBJ = "$obj"  # an object whose keys may be content (tool arguments, schemas)
TEXT = "$text"  # a non-JSON data payload that is not a short token
SEQ = "$seq"  # a counter that rises by one every frame (Responses `sequence_number`)
DEFAULT_MAX_SHAPES = 256

STRUCTURAL_KEYS = frozenset({"type", "object", "role", "event", "status", "finish_reason",
                             "native_finish_reason", "stop_reason", "finishReason",
                             "done_reason", "format", "reason"})
ERROR_KEYS = frozenset({"type", "code", "status"})  # also kept inside error objects
OPAQUE_KEYS = frozenset({"args", "arguments", "input", "partialArgs", "parameters", "schema"})
ID_KEYS = frozenset({"id", "responseId", "call_id", "item_id", "tool_call_id", "tool_use_id"})
COUNTER_KEYS = frozenset({"sequence_number"})
NAME_KEYS = frozenset({"name"})

# What a hostile upstream could put in a slot that is structure (a JSON key, an event name, an
# SSE comment, a kind value) is capped in length and character set, and must not look like a key.
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_TOKEN = re.compile(r"[A-Za-z0-9_.:/\-\[\]]{1,64}")
_EVENT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}")
_ID_PREFIX = re.compile(r"[A-Za-z]+[-_]")
# a keepalive marker: at most three short words (`OPENROUTER PROCESSING`, `ping`, `keep-alive`)
_COMMENT = re.compile(r"(?:[A-Za-z0-9_.:\-]{1,24}(?: [A-Za-z0-9_.:\-]{1,24}){0,2})?")
# Plain-text `data:` payloads that are protocol markers, not words of a reply.
DATA_MARKERS = frozenset({"[DONE]"})


def signature(event: str | None, kind: str, data: bytes) -> tuple:
    return (event, kind, data.count(b'":'), data.count(b"{"), data.count(b"["),
            data.count(b'""'), data[:1])


class ShapeTable:
    """The distinct shapes of one stream, capped; each frame is given the index of its shape."""

    def __init__(self, defined_tool_names: frozenset[str] = frozenset(),
                 max_shapes: int = DEFAULT_MAX_SHAPES):
        self.defined_tool_names = defined_tool_names
        self.max_shapes = max_shapes
        self.shapes: list[dict] = []
        self.dropped = 0
        self._by_signature: dict[bytes, int] = {}
        self._by_json: dict[str, int] = {}
        self._ids: dict[str, str] = {}

    def index_of(self, event: str | None, data: bytes, kind: str) -> int | None:
        """The shape index of a frame (None once the table is full and the shape is new)."""
        key = signature(event, kind, data)
        index = self._by_signature.get(key)
        if index is not None:
            return index
        if len(self.shapes) >= self.max_shapes:
            self.dropped += 1
            return None
        if kind == "keepalive" and event is None and data[:1] != b"{":
            shape: dict = {"comment": self._comment(data)}
        else:
            shape = self.shape(event, data)
        index = self._store(shape)
        if index is not None:
            self._by_signature[key] = index
        return index

    @staticmethod
    def _comment(data: bytes) -> str:
        """An SSE comment's text is a provider's keepalive marker (`OPENROUTER PROCESSING`)."""
        text = data.decode("utf-8", "replace").strip()
        return text if len(text) <= 40 and _COMMENT.fullmatch(text) and _clean(text) else STR

    def _store(self, shape: dict) -> int | None:
        text = json.dumps(shape, sort_keys=True, separators=(",", ":"))
        index = self._by_json.get(text)
        if index is None:
            if len(self.shapes) >= self.max_shapes:
                self.dropped += 1
                return None
            index = self._by_json[text] = len(self.shapes)
            self.shapes.append(shape)
        return index

    def shape(self, event: str | None, data: bytes) -> dict:
        shape: dict = {"event": _event_name(event)} if event else {}
        try:
            obj = json.loads(data)
        except ValueError:
            # a word of a plain-text stream is content: only a known marker is kept
            text = data.decode("utf-8", "replace")
            shape["data"] = text if text in DATA_MARKERS else TEXT
            return shape
        shape["json"] = self._skeleton(obj, None, False)
        return shape

    def _skeleton(self, value: object, key: str | None, in_error: bool) -> object:
        if isinstance(value, dict):
            if key in OPAQUE_KEYS or not all(_IDENT.fullmatch(k) and _clean(k) for k in value):
                return OBJ
            inside_error = key == "error"
            return {k: self._skeleton(v, k, inside_error) for k, v in value.items()}
        if isinstance(value, list):
            if key in OPAQUE_KEYS:
                return OBJ
            return [self._skeleton(item, key, in_error) for item in value[:16]]
        if isinstance(value, str):
            return self._string(value, key, in_error)
        if key in COUNTER_KEYS and isinstance(value, int):
            return SEQ
        return value  # numbers, booleans, null

    def _string(self, value: str, key: str | None, in_error: bool) -> str:
        if value == "":
            return ""
        if key in STRUCTURAL_KEYS or (in_error and key in ERROR_KEYS):
            return value if _TOKEN.fullmatch(value) and _clean(value) else STR
        if key in ID_KEYS:
            return self._id_marker(value)
        if key in NAME_KEYS and value in self.defined_tool_names:
            return value
        return STR

    def _id_marker(self, value: str) -> str:
        marker = self._ids.get(value)
        if marker is None:
            prefix = _ID_PREFIX.match(value)
            marker = f"{prefix.group(0) if prefix else ''}*#{len(self._ids) + 1}"
            self._ids[value] = marker
        return marker


def _event_name(value: str | None) -> str | None:
    if value is None:
        return None
    return value if _EVENT_NAME.fullmatch(value) and _clean(value) else STR


def _clean(text: str) -> bool:
    """Whether the secret scrubber leaves a structural string as it is."""
    return not looks_like_key(text)
