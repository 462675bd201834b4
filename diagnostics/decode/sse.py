"""Incremental stream framing: Server-Sent Events to the WHATWG algorithm, and NDJSON lines.

Fed arbitrary byte chunks, a decoder returns the frames they complete. Whole, byte-by-byte and any
other chunking give identical frames (sizes included): that is what lets a record's frame table be
trusted whatever the network did to the chunk boundaries.
"""

from __future__ import annotations

import re

BOM = b"\xef\xbb\xbf"
DEFAULT_MAX_LINE = 8 * 1024 * 1024
# Stands in, in `LineSplitter.lines()`, for a line dropped for being longer than `max_line`; its
# raw size waits in `LineSplitter.dropped` (compared by identity, never by value).
OVERLONG = b"\x00<overlong line>\n"
# Unknown field names (`error:` from GPUStack) are counted by name when they read as one short
# identifier before a colon, at most MAX_FIELD_NAMES of them; any other name (a line of raw text
# has no colon and is all name) counts as OTHER_FIELD, so neither sentences nor memory grow with
# what upstream sends. The value after the colon is never counted or named.
KNOWN_FIELDS = frozenset({b"data", b"event", b"id", b"retry"})
FIELD_NAME = re.compile(rb"[A-Za-z][A-Za-z0-9_-]{0,31}")
OTHER_FIELD = "<other>"
MAX_FIELD_NAMES = 20
# Unknown field lines kept (name, value) for a reader to take between feeds, when asked for:
# at most this many, each at most MAX_FIELD_VALUE bytes (an error object is small).
MAX_FIELD_LINES = 16
MAX_FIELD_VALUE = 64 * 1024


class Frame:
    """One dispatched unit of a stream: an SSE event, an SSE comment (keepalive) or an NDJSON line.

    `data` is raw bytes (data lines joined with LF); `size` is the frame's bytes as on the wire,
    line ends included, so the sizes of a stream's frames add up to what carried them. An
    `oversized` event carried more data than the decoder keeps: its data is empty, its size true.
    """

    __slots__ = ("event", "data", "id", "retry", "size", "comment", "unterminated", "oversized")

    def __init__(self, data: bytes, size: int, event: str | None = None, id: str | None = None,
                 retry: int | None = None, comment: bool = False, unterminated: bool = False,
                 oversized: bool = False):
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry
        self.size = size
        self.comment = comment
        self.unterminated = unterminated
        self.oversized = oversized

    def __repr__(self) -> str:
        flags = " comment" if self.comment else " unterminated" if self.unterminated else ""
        flags += " oversized" if self.oversized else ""
        return f"Frame(event={self.event!r}, data={self.data[:60]!r}, size={self.size}{flags})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frame):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)


def _ending(line: bytes) -> int:
    """The length of a complete line's end: 2 for CRLF, 1 for LF or a lone CR."""
    # Content never holds a CR or LF, so a CR just before the last byte can only be CRLF's.
    return 2 if len(line) > 1 and line[-2] == 13 else 1


def _name_and_value(line: bytes) -> tuple[bytes, bytes, bool]:
    """A field line (without its line end) as WHATWG splits it: name, value, and whether it had
    a colon (without one, the whole line is the name and the value is empty)."""
    colon = line.find(b":")
    if colon < 0:
        return line, b"", False
    value = line[colon + 1:]
    return line[:colon], value[1:] if value[:1] == b" " else value, True


class LineSplitter:
    """Splits chunks into lines ending in CRLF, LF or a lone CR, whatever the chunk boundaries.

    A CR at the end of a chunk waits for the next one, so that a CRLF split across chunks is one
    line end, not two. A line whose content is longer than `max_line` is dropped (counted in
    `overlong_lines`, and never buffered whole) while the lines around it keep flowing.
    """

    __slots__ = ("_held", "_held_len", "_cr", "_skipping", "_skipped", "dropped", "max_line",
                 "overlong_lines")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE):
        self._held: list[bytes] = []  # the start of an unfinished line, in pieces
        self._held_len = 0
        self._cr = False  # the held line ended in a CR at a chunk's end: LF may follow
        self._skipping = False  # inside an overlong line: its bytes are counted, not kept
        self._skipped = 0
        self.dropped: list[int] = []  # raw sizes of the OVERLONG entries returned, in order
        self.max_line = max_line
        self.overlong_lines = 0

    def lines(self, chunk: bytes) -> list[bytes]:
        """The complete lines `chunk` finishes, each with its line end; a dropped overlong line
        appears as `OVERLONG`, its raw size appended to `dropped`."""
        if not chunk:
            return []
        head = None
        if self._cr:
            self._cr = False
            lf = chunk[0] == 10
            if lf:
                chunk = chunk[1:]
            head = self._release(lf)
            if not chunk:
                return [head]
        lines = chunk.splitlines(True)
        if self._held or self._skipping:
            first = lines[0]
            if len(lines) == 1 and first[-1] != 10:  # the held line is not done yet
                if first[-1] == 13:  # it ends in a CR at the chunk's end: an LF may follow
                    self._continue(first, len(first) - 1)
                    self._cr = True
                else:
                    self._continue(first, len(first))
                return [head] if head is not None else []
            lines[0] = self._complete(first)
        last = lines[-1]
        if last[-1] != 10:  # unfinished, or a lone CR that an LF in the next chunk may join
            lines.pop()
            if last[-1] == 13:
                self._continue(last, len(last) - 1)
                self._cr = True
            else:
                self._continue(last, len(last))
        if len(chunk) > self.max_line:
            self._drop_overlong(lines)
        if head is not None:
            lines.insert(0, head)
        return lines

    def _release(self, lf: bool) -> bytes:
        """The held line that ended in a CR, now complete (CRLF if `lf`)."""
        if self._skipping:
            self._skipped += lf
            return self._drop_skipped()
        line = b"".join(self._held)
        if lf:
            line += b"\n"
        self._held = []
        self._held_len = 0
        return line

    def _continue(self, piece: bytes, content_len: int) -> None:
        """Hold `piece` as more of the unfinished line (`content_len` of it is not a line end)."""
        if self._skipping:
            self._skipped += len(piece)
            return
        self._held.append(piece)
        self._held_len += len(piece)
        if self._held_len - len(piece) + content_len > self.max_line:
            self.overlong_lines += 1
            self._skipping = True
            self._skipped = self._held_len
            self._held = []
            self._held_len = 0

    def _complete(self, piece: bytes) -> bytes:
        """The held line finished by `piece` (which ends in a line end), or OVERLONG."""
        if self._skipping:
            self._skipped += len(piece)
            return self._drop_skipped()
        line = b"".join(self._held) + piece
        self._held = []
        self._held_len = 0
        if len(line) - _ending(line) > self.max_line:
            self.overlong_lines += 1
            self.dropped.append(len(line))
            return OVERLONG
        return line

    def _drop_skipped(self) -> bytes:
        self.dropped.append(self._skipped)
        self._skipping = False
        self._skipped = 0
        return OVERLONG

    def _drop_overlong(self, lines: list[bytes]) -> None:
        """Replace complete lines longer than max_line (only possible in a chunk that long)."""
        max_line = self.max_line
        for i, line in enumerate(lines):
            if line is not OVERLONG and len(line) - _ending(line) > max_line:
                self.overlong_lines += 1
                self.dropped.append(len(line))
                lines[i] = OVERLONG

    def split(self, chunk: bytes) -> list[tuple[bytes, int]]:
        """Return the (line, raw_size) pairs that `chunk` completes; raw_size counts the line end.

        Dropped overlong lines are left out (their bytes are not in any pair)."""
        pairs = []
        for line in self.lines(chunk):
            if line is OVERLONG:
                self.dropped.pop(0)
            else:
                pairs.append((line[:len(line) - _ending(line)], len(line)))
        return pairs

    def close(self) -> tuple[bytes, int, bool] | None:
        """At end of stream: (leftover, raw_size, complete). A trailing lone CR is a complete line;
        the end of an overlong line comes back as (OVERLONG, raw_size, complete)."""
        if self._skipping:
            complete, size = self._cr, self._skipped
            self._skipping = self._cr = False
            self._skipped = 0
            return OVERLONG, size, complete
        if not self._held:
            return None
        buf = b"".join(self._held)
        self._held = []
        self._held_len = 0
        if self._cr:
            self._cr = False
            return buf[:-1], len(buf), True
        return buf, len(buf), False


class SseDecoder:
    """WHATWG EventSource parsing, incremental. Comments become keepalive frames; an event still
    open at end of stream becomes an `unterminated` frame, because it is evidence.

    Bytes no frame can carry (blank lines, an event with no data) are added to the next frame's
    size; those after the last frame are counted in `trailing_bytes` by `close()`.

    Memory is bounded per line (`max_line`) and per event (`max_event`, data bytes): an event
    whose data grows past `max_event` stops being kept (a hostile upstream can send `data:` lines
    forever with no blank line) and is dispatched `oversized`, counted in `oversized_events`.

    Field lines of unknown names are ignored for dispatch, as WHATWG says, but are evidence: they
    are counted in `unknown_fields`, and with `keep_fields` each one is also held as (name,
    value) until `take_fields()` (a server may put its error on an `error:` line).
    """

    __slots__ = ("_lines", "_bom_pending", "_data", "_data_len", "_oversized", "_event",
                 "_last_id", "_retry", "_size", "_fields_seen", "trailing_bytes", "max_event",
                 "oversized_events", "unknown_fields", "_kept_fields")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE, max_event: int | None = None,
                 keep_fields: bool = False):
        self._lines = LineSplitter(max_line)
        self.max_event = max_line if max_event is None else max_event
        self.oversized_events = 0
        self.unknown_fields: dict[str, int] = {}
        self._kept_fields: list[tuple[str, bytes]] | None = [] if keep_fields else None
        self._bom_pending: bytes | None = b""  # None once the stream's start is past
        self._data: list[bytes] = []
        self._data_len = 0  # data bytes kept for the open event (LFs to join them not counted)
        self._oversized = False  # the open event outgrew max_event: its data is no longer kept
        self._event: str | None = None
        self._last_id: str | None = None  # the last event ID buffer: it outlives events
        self._retry: int | None = None
        self._size = 0
        self._fields_seen = False  # a non-data field since the last blank line (data: _data)
        self.trailing_bytes = 0

    @property
    def overlong_lines(self) -> int:
        return self._lines.overlong_lines

    def feed(self, chunk: bytes) -> list[Frame]:
        if self._bom_pending is not None:
            chunk = self._strip_bom(chunk)
            if not chunk:
                return []
        return self._consume(self._lines.lines(chunk))

    def _consume(self, lines: list[bytes]) -> list[Frame]:
        frames: list[Frame] = []
        data = self._data
        size = self._size
        for line in lines:
            first = line[0]
            if first == 100 and line[:5] == b"data:":  # the hot path: one data line
                size += len(line)
                if not self._oversized:
                    end = len(line) - 2 if line[-2] == 13 else len(line) - 1
                    value = line[6:end] if line[5] == 32 else line[5:end]
                    data.append(value)
                    self._data_len += len(value)
                    if self._data_len > self.max_event:
                        self._overflow()
            elif first == 10 or first == 13:  # a blank line dispatches
                size += len(line)
                if data:
                    frames.append(Frame(data[0] if len(data) == 1 else b"\n".join(data), size,
                                        self._event, self._last_id, self._retry,
                                        oversized=self._oversized))
                    data.clear()
                    self._data_len = 0
                    self._oversized = False
                    self._retry = None
                    size = 0
                # An event with an empty data buffer is not dispatched; its bytes are carried
                # into the next frame so that frame sizes still add up to the bytes fed.
                self._event = None
                self._fields_seen = False
            elif first == 58:  # ":" starts a comment, which providers use as a keepalive
                frames.append(Frame(line[1:len(line) - _ending(line)], len(line), comment=True))
            else:
                size += self._field(line)
        self._size = size
        return frames

    def _field(self, line: bytes) -> int:
        """Fold one field line into the open event; return its raw size."""
        self._fields_seen = True
        if line is OVERLONG:  # dropped for its length: its bytes still belong to the event
            return self._lines.dropped.pop(0)
        raw_size = len(line)
        name, value, colon = _name_and_value(line[:raw_size - _ending(line)])
        if name == b"event":
            self._event = value.decode("utf-8", "replace") or None
        elif name == b"data" and not self._oversized:
            self._data.append(value)
            self._data_len += len(value)
            if self._data_len > self.max_event:
                self._overflow()
        elif name == b"id":
            if b"\x00" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():  # bytes.isdigit is ASCII digits only, and False when empty
                self._retry = int(value)
        else:
            self._unknown_field(name if colon else None, value)
        return raw_size

    def _unknown_field(self, name: bytes | None, value: bytes) -> None:
        """Count a field line WHATWG ignores (`name` None: a line with no colon), and hold it for
        `take_fields()` if asked to."""
        counts = self.unknown_fields
        label = OTHER_FIELD
        if name is not None and FIELD_NAME.fullmatch(name):
            label = name.decode("ascii")
            if label not in counts and len(counts) >= MAX_FIELD_NAMES:
                label = OTHER_FIELD
        counts[label] = counts.get(label, 0) + 1
        kept = self._kept_fields
        if (kept is not None and label != OTHER_FIELD and len(kept) < MAX_FIELD_LINES
                and len(value) <= MAX_FIELD_VALUE):
            kept.append((label, value))

    def take_fields(self) -> list[tuple[str, bytes]]:
        """The unknown field lines held since the last call (needs `keep_fields`), in order."""
        kept = self._kept_fields
        if not kept:
            return []
        self._kept_fields = []
        return kept

    def _overflow(self) -> None:
        """The open event outgrew max_event: drop what it kept and keep nothing more of it. One
        empty piece stays so that a blank line still dispatches it (as an oversized frame)."""
        if not self._oversized:
            self._oversized = True
            self.oversized_events += 1
        self._data[:] = [b""]
        self._data_len = 0

    def close(self) -> list[Frame]:
        """End of stream: return what is left, an unterminated frame if an event was still open."""
        frames: list[Frame] = []
        if self._bom_pending:  # the stream ended inside what might have been a BOM
            self._size += len(self._bom_pending)
            self._fields_seen = True
        self._bom_pending = None
        leftover = self._lines.close()
        if leftover is not None:
            text, raw_size, complete = leftover
            if text is OVERLONG or not complete:
                self._size += raw_size
                self._fields_seen = True
                if text is not OVERLONG and text[:1] != b":":
                    # WHATWG drops a line the stream ended inside; an unknown field's (a last
                    # `error: {...}` with no line end) is still evidence, so it is counted.
                    name, value, colon = _name_and_value(text)
                    if name not in KNOWN_FIELDS:
                        self._unknown_field(name if colon else None, value)
            else:
                frames = self._consume([text + b"\r"])
        if self._fields_seen or self._data:
            frames.append(Frame(b"\n".join(self._data), self._size, self._event,
                                self._last_id, self._retry, unterminated=True,
                                oversized=self._oversized))
            self._data.clear()
            self._data_len = 0
            self._oversized = False
            self._size = 0
            self._event = None
            self._fields_seen = False
        self.trailing_bytes += self._size
        self._size = 0
        return frames

    def _strip_bom(self, chunk: bytes) -> bytes:
        head = self._bom_pending + chunk
        if len(head) < len(BOM) and BOM.startswith(head):
            self._bom_pending = head
            return b""
        self._bom_pending = None
        if head.startswith(BOM):
            self._size += len(BOM)
            return head[len(BOM):]
        return head


class NdjsonDecoder:
    """Newline-delimited JSON (Ollama): one frame per non-blank line; a last line with no line
    end is reported as unterminated, like an SSE event left open.

    Blank lines (and dropped overlong lines) are added to the next frame's size; those after the
    last frame are counted in `trailing_bytes` by `close()`.
    """

    __slots__ = ("_lines", "_blank_bytes", "trailing_bytes")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE):
        self._lines = LineSplitter(max_line)
        self._blank_bytes = 0
        self.trailing_bytes = 0

    @property
    def overlong_lines(self) -> int:
        return self._lines.overlong_lines

    def feed(self, chunk: bytes) -> list[Frame]:
        frames = []
        for line in self._lines.lines(chunk):
            if line is OVERLONG:  # dropped for its length: the next frame carries its bytes
                self._blank_bytes += self._lines.dropped.pop(0)
                continue
            n = len(line)
            text = line[:n - 2] if n > 1 and line[-2] == 13 else line[:n - 1]
            if text[:1] == b"{" or (text and not text.isspace()):
                frames.append(Frame(text, n + self._blank_bytes))
                self._blank_bytes = 0
            else:
                self._blank_bytes += n
        return frames

    def close(self) -> list[Frame]:
        leftover = self._lines.close()
        frames = []
        if leftover is not None:
            text, raw_size, complete = leftover
            if text is OVERLONG:
                if complete:
                    self._blank_bytes += raw_size
                else:  # the stream ended inside an overlong line: that is evidence too
                    frames.append(Frame(b"", raw_size + self._blank_bytes, unterminated=True))
                    self._blank_bytes = 0
            elif text.strip():
                frames.append(Frame(text, raw_size + self._blank_bytes,
                                    unterminated=not complete))
                self._blank_bytes = 0
            else:
                self._blank_bytes += raw_size
        self.trailing_bytes += self._blank_bytes
        self._blank_bytes = 0
        return frames
