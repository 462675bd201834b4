"""Whether a tool call's arguments, as far as they came, are one complete JSON value.

A client that holds parseable arguments when a stream breaks is in a different place from one
holding half an object, and the verdict says which. The arguments are the model's words, so they
are held only while the call is open, parsed once (when it completes or the stream ends) and then
let go; the record gets a boolean, never the text. A stream holds at most MAX_HELD_ARGUMENTS bytes
of them, all open calls together: a call that would pass that is no longer held, and its record
says it was not checked.
"""

from __future__ import annotations

import json

MAX_HELD_ARGUMENTS = 1024 * 1024
# Why a call's arguments were not checked: fixed codes, written to the record as they are.
TOO_LARGE = "too_large"  # holding them would have passed MAX_HELD_ARGUMENTS
NOT_JSON_TEXT = "not_json_text"  # pieces that do not concatenate to JSON (Gemini partialArgs,
#                                  a Responses custom tool's free-form input)


class ArgumentCheck:
    """One call's argument text while it is open, and the answer once settled: `parsed` is True
    (one complete JSON value), False (not one) or None (nothing arrived, or `unchecked` says
    why)."""

    __slots__ = ("pieces", "held_bytes", "parsed", "unchecked")

    def __init__(self) -> None:
        self.pieces: list[str] | None = []  # None once settled or given up
        self.held_bytes = 0
        self.parsed: bool | None = None
        self.unchecked: str | None = None

    def hold(self, piece: str, nbytes: int) -> None:
        if self.pieces is not None:
            self.pieces.append(piece)
            self.held_bytes += nbytes
        elif self.parsed and piece.strip():
            self.parsed = False  # more text after a whole value: the two do not parse as one

    def give_up(self, why: str) -> int:
        """Stop holding (and never check) these arguments; return the bytes let go."""
        freed = self.release()
        self.parsed, self.unchecked = None, why
        return freed

    def settle(self) -> int:
        """Parse what was held, once, and let it go; return the bytes let go."""
        if self.pieces is None:
            return 0
        text = "".join(self.pieces)
        freed = self.release()
        if text.strip():
            try:
                json.loads(text)
            except (ValueError, RecursionError):  # deep nesting raises the second
                self.parsed = False
            else:
                self.parsed = True
        return freed

    def release(self) -> int:
        freed, self.held_bytes, self.pieces = self.held_bytes, 0, None
        return freed
