"""Reading chosen fields of index lines, fast: `stats` reads a hundred thousand of them in a second.

A line as index_line() writes it (compact JSON, keys in INDEX_KEYS order, no escaped character) is
matched by one regular expression and its fields are handed back as their raw JSON text (bytes);
any other line (written by an older streamtap, holding an escape, edited by hand) goes through
json.loads. A consumer decodes a raw value with `decode`, once per distinct value, not per line.
"""

from __future__ import annotations

import json
import re

from streamtap.diagnostics.errors import UserError
from streamtap.diagnostics.record.schema import INDEX_KEYS


class _Absent:
    """A field the line does not have (written before the field existed): unknown, not null."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()

# Each key's value as json.dumps writes it, or null: a string without escapes (json.dumps escapes
# every quote, backslash, control and non-ASCII character, so such a string is its text), a number
# or a boolean. One pattern per key (rather than "any scalar"), possessive (nothing to backtrack
# into), keeps the match of a line to a few microseconds.
_STRING = rb'"[^"\\\x00-\x1f]*+"|null'
_NUMBER = rb"-?+(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][-+]?+[0-9]++)?+|null"
_BOOLEAN = rb"true|false|null"
_PATTERNS = {**dict.fromkeys(("schema_version", "status", "downstream_status", "headers_ms",
                              "ttfb_ms", "first_event_ms", "duration_ms", "silence_ms",
                              "frames"), _NUMBER),
             **dict.fromkeys(("ok", "terminal", "terminal_after_error"), _BOOLEAN)}


class NotAnIndexLine(UserError, ValueError):
    """A line of index.jsonl that no streamtap wrote, or only half of one; says which."""


def parse_index_line(raw: bytes) -> dict:
    """One index line as a dict; NotAnIndexLine (with why) for anything else."""
    try:
        line = json.loads(raw)
    except ValueError:
        raise NotAnIndexLine("not JSON (half written, or edited by hand)") from None
    if not isinstance(line, dict) or "trace_id" not in line:
        raise NotAnIndexLine("JSON, but not a streamtap index line (no trace_id)")
    return line


def decode(value: object) -> object:
    """A field's value: raw JSON text (bytes) from the fast path decoded, anything else as is."""
    return json.loads(value) if isinstance(value, bytes) else value


class FieldReader:
    """Reads `fields` (in INDEX_KEYS order) of index lines, as a tuple."""

    def __init__(self, fields: tuple[str, ...]):
        order = [key for key in INDEX_KEYS if key in fields]
        if list(fields) != order:
            raise ValueError(f"fields must be index keys in INDEX_KEYS order: {order}")
        self.fields = fields
        wanted = set(fields)
        self._match = re.compile(b"{" + b",".join(
            b'"%s":(%s%s)' % (key.encode(), b"" if key in wanted else b"?:",
                              _PATTERNS.get(key, _STRING)) for key in INDEX_KEYS)
            + b"}").fullmatch

    def read(self, raw: bytes) -> tuple:
        """The fields' values: raw JSON text for a line in today's form, else decoded values
        (ABSENT for a field the line lacks). Raises NotAnIndexLine."""
        match = self._match(raw)
        if match is not None:
            return match.groups()
        line = parse_index_line(raw)
        return tuple(line.get(key, ABSENT) for key in self.fields)

    def of(self, line: dict) -> tuple:
        """The same tuple from an index line already parsed."""
        return tuple(line.get(key, ABSENT) for key in self.fields)
