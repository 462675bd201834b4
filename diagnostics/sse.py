"""Incremental stream framing: Server-Sent Events to the WHATWG algorithm, and NDJSON lines.

Fed arbitrary byte chunks, a decoder returns the frames they complete. Whole, byte-by-byte and any
other chunking give identical frames (sizes included): that is what lets a record's frame table be
trusted whatever the network did to the chunk boundaries.
"""

from __future__ import annotations

BOM = b"\xef\xbb\xbf"
DEFAULT_MAX_LINE = 8 * 1024 * 1024


class Frame:
    """One dispatched unit of a stream: an SSE event, an SSE comment (keepalive) or an NDJSON line.

    `data` is raw bytes (data lines joined with LF); `size` is the frame's bytes as on the wire,
    line ends included, so the sizes of a stream's frames add up to what carried them.
    """

    __slots__ = ("event", "data", "id", "retry", "size", "comment", "unterminated")

    def __init__(self, data: bytes, size: int, event: str | None = None, id: str | None = None,
                 retry: int | None = None, comment: bool = False, unterminated: bool = False):
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry
        self.size = size
        self.comment = comment
        self.unterminated = unterminated

    def __repr__(self) -> str:
        flags = " comment" if self.comment else " unterminated" if self.unterminated else ""
        return f"Frame(event={self.event!r}, data={self.data[:60]!r}, size={self.size}{flags})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frame):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)


class LineSplitter:
    """Splits chunks into lines ending in CRLF, LF or a lone CR, whatever the chunk boundaries.

    A CR at the end of the buffer waits for the next chunk, so that a CRLF split across chunks is
    one line end, not two. A line longer than `max_line` is dropped (counted in `overlong_lines`)
    while the bytes around it keep flowing.
    """

    __slots__ = ("_buf", "_skipping", "max_line", "overlong_lines")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE):
        self._buf = b""
        self._skipping = False
        self.max_line = max_line
        self.overlong_lines = 0

    def split(self, chunk: bytes) -> list[tuple[bytes, int]]:
        """Return the (line, raw_size) pairs that `chunk` completes; raw_size counts the line end."""
        buf = self._buf + chunk if self._buf else chunk
        lines: list[tuple[bytes, int]] = []
        pos = 0
        end_of_buf = len(buf)
        has_cr = b"\r" in buf
        if self._skipping:
            pos = self._skip_overlong(buf, has_cr)
            if pos < 0:
                self._buf = b""
                return lines
        find = buf.find
        while pos < end_of_buf:
            newline = find(b"\n", pos)
            if has_cr:
                cr = find(b"\r", pos, newline if newline >= 0 else end_of_buf)
                if cr >= 0:
                    if cr + 1 == end_of_buf:
                        break  # a CR at the end may be half of a CRLF: wait for the next chunk
                    after = cr + 2 if buf[cr + 1] == 10 else cr + 1
                    lines.append((buf[pos:cr], after - pos))
                    pos = after
                    continue
            if newline < 0:
                break
            lines.append((buf[pos:newline], newline + 1 - pos))
            pos = newline + 1
        rest = buf[pos:] if pos else buf
        if len(rest) > self.max_line:
            self.overlong_lines += 1
            self._skipping = True
            rest = b""
        self._buf = rest
        return lines

    def _skip_overlong(self, buf: bytes, has_cr: bool) -> int:
        """Drop the rest of an overlong line; return where the next line starts, or -1."""
        ends = [i for i in (buf.find(b"\n"), buf.find(b"\r") if has_cr else -1) if i >= 0]
        if not ends:
            return -1
        end = min(ends)
        if buf[end] == 13 and end + 1 < len(buf) and buf[end + 1] == 10:
            end += 1
        self._skipping = False
        return end + 1

    def close(self) -> tuple[bytes, int, bool] | None:
        """At end of stream: (leftover, raw_size, complete). A trailing lone CR is a complete line."""
        buf, self._buf = self._buf, b""
        if not buf:
            return None
        if buf.endswith(b"\r"):
            return buf[:-1], len(buf), True
        return buf, len(buf), False


class SseDecoder:
    """WHATWG EventSource parsing, incremental. Comments become keepalive frames; an event still
    open at end of stream becomes an `unterminated` frame, because it is evidence."""

    __slots__ = ("_lines", "_bom_pending", "_data", "_event", "_last_id", "_retry", "_size",
                 "_fields_seen")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE):
        self._lines = LineSplitter(max_line)
        self._bom_pending = b""
        self._data: list[bytes] = []
        self._event: str | None = None
        self._last_id: str | None = None
        self._retry: int | None = None
        self._size = 0
        self._fields_seen = False

    @property
    def overlong_lines(self) -> int:
        return self._lines.overlong_lines

    def feed(self, chunk: bytes) -> list[Frame]:
        if self._bom_pending is not None:
            chunk = self._strip_bom(chunk)
            if not chunk:
                return []
        frames: list[Frame] = []
        line = self._line
        for text, raw_size in self._lines.split(chunk):
            line(text, raw_size, frames)
        return frames

    def close(self) -> list[Frame]:
        """End of stream: return what is left, an unterminated frame if an event was still open."""
        frames: list[Frame] = []
        if self._bom_pending:
            self._size += len(self._bom_pending)
            self._fields_seen = True
            self._bom_pending = b""
        leftover = self._lines.close()
        if leftover is not None:
            text, raw_size, complete = leftover
            if complete:
                self._line(text, raw_size, frames)
            else:
                self._size += raw_size
                self._fields_seen = True
        if self._fields_seen or self._data:
            frames.append(Frame(b"\n".join(self._data), self._size, self._event,
                                self._last_id, self._retry, unterminated=True))
            self._reset_event()
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

    def _line(self, line: bytes, raw_size: int, frames: list[Frame]) -> None:
        if line[:5] == b"data:":
            value = line[5:]
            self._data.append(value[1:] if value[:1] == b" " else value)
            self._size += raw_size
            self._fields_seen = True
            return
        if not line:
            self._size += raw_size
            if self._data:
                data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
                frames.append(Frame(data, self._size, self._event, self._last_id, self._retry))
                self._retry = None
            else:
                # An event with an empty data buffer is not dispatched; its bytes are carried
                # into the next frame so that frame sizes still add up to the bytes fed.
                self._reset_event(carried=self._size)
                return
            self._reset_event()
            return
        if line[0] == 58:  # ":" starts a comment, which providers use as a keepalive
            frames.append(Frame(line[1:], raw_size, comment=True))
            return
        self._size += raw_size
        self._fields_seen = True
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name, value = line[:colon], line[colon + 1:]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"event":
            self._event = value.decode("utf-8", "replace") or None
        elif name == b"data":
            self._data.append(value)
        elif name == b"id":
            if b"\x00" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value and value.isdigit():  # bytes.isdigit is ASCII digits only
                self._retry = int(value)

    def _reset_event(self, carried: int = 0) -> None:
        self._data = []
        self._event = None
        self._size = carried
        self._fields_seen = False


class NdjsonDecoder:
    """Newline-delimited JSON (Ollama): one frame per non-blank line; a last line with no line
    end is reported as unterminated, like an SSE event left open."""

    __slots__ = ("_lines", "_blank_bytes")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE):
        self._lines = LineSplitter(max_line)
        self._blank_bytes = 0

    @property
    def overlong_lines(self) -> int:
        return self._lines.overlong_lines

    def feed(self, chunk: bytes) -> list[Frame]:
        frames = []
        for text, raw_size in self._lines.split(chunk):
            if text.strip():
                frames.append(Frame(text, raw_size + self._blank_bytes))
                self._blank_bytes = 0
            else:
                self._blank_bytes += raw_size
        return frames

    def close(self) -> list[Frame]:
        leftover = self._lines.close()
        if leftover is None:
            return []
        text, raw_size, complete = leftover
        if not text.strip():
            return []
        return [Frame(text, raw_size + self._blank_bytes, unterminated=not complete)]
