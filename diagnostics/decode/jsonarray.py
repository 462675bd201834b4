"""Incremental framing of a streamed top-level JSON array (Gemini without `alt=sse`): one frame per
element, whatever the chunk boundaries.

`[{...},\\r\\n{...}]` arrives a piece at a time; an element is complete when its outermost brace
closes. Brackets inside strings (and escaped quotes inside those) do not count, so the scan keeps
its string/escape state across chunks. A frame's size counts the separators before the element
(`[`, `,`, whitespace) and any element dropped for its length, so sizes add up to the body; the
closing `]` and whatever follows the last element are counted in `trailing_bytes` by `close()`.
"""

from __future__ import annotations

import re

from streamtap.diagnostics.decode.sse import DEFAULT_MAX_LINE, Frame

# A JSON string, as the unrolled `"(\\.|[^"\\])*"` loop (no backtracking per character).
_STR = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_OPEN_STR = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+'  # a string the buffer ends inside
_PLAIN = rb'[^"{}\[\]]*+'
_OUTSIDE = _PLAIN + rb'(?:' + _STR + _PLAIN + rb')*+'  # text and whole strings, no bracket
# One piece of the stream outside any string: everything up to and including the next bracket,
# whole strings skipped inside the regex engine. It cannot fail from an outside-string position
# (the last piece ends in a string left open, or at the end of the buffer), so `findall` returns
# contiguous pieces and the Python loop runs once per bracket, not once per byte or string.
_PIECE = re.compile(_OUTSIDE + rb'(?:[{}\[\]]|' + _OPEN_STR + rb'\\?\Z|\Z)', re.S)
# The last piece, when it ends inside a string (group 1: on the backslash of an escape).
_OPEN_STRING_TAIL = re.compile(_OUTSIDE + _OPEN_STR + rb'(\\?)', re.S)
# Inside a string that began in an earlier chunk: the rest of it (group 1: its closing quote).
_STRING_REST = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+(")?', re.S)


def _balanced(levels: int) -> bytes:
    """Text with brackets balanced up to `levels` deep (Python's re has no recursion)."""
    inner = _OUTSIDE
    for _ in range(levels):
        inner = (_PLAIN + rb'(?:(?:' + _STR + rb'|\{' + inner + rb'\}|\[' + inner + rb'\])'
                 + _PLAIN + rb')*+')
    return inner


# The fast path: an element that is already whole in the buffer, matched in one call (about 2x
# cheaper than the bracket loop). Six levels inside the element cover a Gemini text chunk
# (candidates[{content{parts[{...}]}}]); deeper or unfinished elements fall back to the loop,
# which gives the same frames. Possessive quantifiers keep a failed match linear. The pattern
# doubles with each level: six compile in ~20 ms, once, when the module is first imported.
_WHOLE_ELEMENT = re.compile(rb'\{' + _balanced(6) + rb'\}', re.S)


class JsonArrayDecoder:
    """Same interface as `NdjsonDecoder`: `feed(chunk) -> frames`, `close() -> frames`,
    `overlong_lines` (elements larger than `max_line`, dropped while the bytes flow on) and
    `trailing_bytes` (after the last frame, set by `close()`)."""

    __slots__ = ("_buf", "_pos", "_mark", "_carried", "_start", "_depth", "_in_string",
                 "_escape", "_array_open", "_skipping", "max_line", "overlong_lines",
                 "trailing_bytes")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE):
        self._buf = bytearray()
        self._pos = 0  # where scanning resumes in _buf
        self._mark = 0  # bytes of _buf before this are already in a frame (or dropped)
        self._carried = 0  # bytes for the next frame's size that _buf no longer holds
        self._start = -1  # where the open element starts in _buf; -1 between elements
        self._depth = 0
        self._in_string = False
        self._escape = False  # the buffer ended on the backslash of an escape inside a string
        self._array_open = False
        self._skipping = False  # inside an overlong element: scan it, keep none of its bytes
        self.max_line = max_line
        self.overlong_lines = 0
        self.trailing_bytes = 0

    def feed(self, chunk: bytes) -> list[Frame]:
        frames: list[Frame] = []
        if not chunk:
            return frames
        buf = self._buf
        buf += chunk
        end = len(buf)
        pos = self._pos
        if self._in_string:
            pos = self._finish_string(buf, pos, end)
        while pos < end and not self._in_string:
            if self._depth:
                pos = self._scan(buf, pos, end, frames)
                continue
            # Between elements: separators up to the next bracket, then an element if one opens.
            piece = _PIECE.match(buf, pos)
            if self._open_string_at_end(piece.group(), piece.end(), end):
                pos = end
                break
            pos = piece.end()
            byte = buf[pos - 1] if pos > piece.start() else 0
            if byte == 123 or (byte == 91 and self._array_open):
                self._start = pos - 1
                whole = _WHOLE_ELEMENT.match(buf, self._start)
                if whole is not None:
                    pos = whole.end()
                    self._element_done(buf, pos, frames)
                else:
                    self._depth = 1  # unfinished (or very deep): the bracket loop takes over
            elif byte == 91:  # the top-level `[`: a separator
                self._array_open = True
            elif byte == 93:  # the top-level `]`
                self._array_open = False
        self._pos = end
        self._trim(buf)
        return frames

    def _scan(self, buf: bytearray, pos: int, end: int, frames: list[Frame]) -> int:
        """The bracket loop, inside an element, until it closes or the buffer ends."""
        depth = self._depth
        for piece in _PIECE.findall(buf, pos):
            if not piece:
                continue
            pos += len(piece)
            if self._open_string_at_end(piece, pos, end):
                break
            byte = piece[-1]
            if byte == 123 or byte == 91:  # { [
                depth += 1
            elif byte == 125 or byte == 93:  # } ]
                depth -= 1
                if not depth:
                    self._depth = 0
                    self._element_done(buf, pos, frames)
                    return pos
        self._depth = depth
        return end

    def _open_string_at_end(self, piece: bytes, piece_end: int, end: int) -> bool:
        """Whether the buffer ends inside a string (only the last piece can); remember it."""
        if piece_end != end or b'"' not in piece:
            return False
        open_string = _OPEN_STRING_TAIL.fullmatch(piece)
        if open_string is None:
            return False
        self._in_string = True
        self._escape = bool(open_string.group(1))
        return True

    def _finish_string(self, buf: bytearray, pos: int, end: int) -> int:
        """Continue a string that began in an earlier chunk; return where scanning resumes."""
        if self._escape:
            pos += 1  # the escaped byte, whatever it is
            self._escape = False
            if pos >= end:
                return end
        match = _STRING_REST.match(buf, pos)
        if match.group(1) is None:
            self._escape = match.end() < end  # stopped short of a lone trailing backslash
            return end
        self._in_string = False
        return match.end()

    def _element_done(self, buf: bytearray, end: int, frames: list[Frame]) -> None:
        if self._skipping or end - self._start > self.max_line:
            if not self._skipping:
                self.overlong_lines += 1
            self._skipping = False
            self._carried += end - self._mark  # dropped: the next frame's size carries its bytes
        else:
            frames.append(Frame(bytes(buf[self._start:end]), self._carried + end - self._mark))
            self._carried = 0
        self._mark = end
        self._start = -1

    def _trim(self, buf: bytearray) -> None:
        """Drop what no later frame needs, so a long stream keeps only its open element."""
        if self._start >= 0 and not self._skipping and len(buf) - self._start > self.max_line:
            self.overlong_lines += 1  # too big to keep: scan the rest of it, keep none of it
            self._skipping = True
        if self._skipping:
            self._carried += len(buf) - self._mark
            buf.clear()
            self._pos = self._mark = self._start = 0
            return
        cut = len(buf) if self._start < 0 else self._start
        if cut:
            self._carried += cut - self._mark
            del buf[:cut]
            self._pos -= cut
            self._mark = 0
            if self._start >= 0:
                self._start = 0

    def close(self) -> list[Frame]:
        """End of stream: an element still open is reported as unterminated (it is evidence)."""
        frames: list[Frame] = []
        buf = self._buf
        size = self._carried + len(buf) - self._mark
        if self._depth:  # an overlong element left open is evidence too, without its bytes
            data = b"" if self._skipping else bytes(buf[self._start:])
            frames.append(Frame(data, size, unterminated=True))
            size = 0
        overlong = self.overlong_lines
        self.__init__(self.max_line)
        self.overlong_lines = overlong  # the recorder reads it after close()
        self.trailing_bytes = size
        return frames
