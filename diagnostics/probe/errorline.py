"""The client's last error line, as it printed it: one line out of whatever the client wrote to
stderr (a Python traceback, a Node crash with its `[cause]` block and version footer, a line of
its own), scrubbed of keys like every string streamtap keeps."""

from __future__ import annotations

import re

from streamtap.diagnostics.redaction.secrets import scrub

MAX_LINE = 200  # one line, short: the error's name and message, never a dump
# `TypeError: terminated`, `openai.APIConnectionError: Connection error.`, `Error: HTTP 500`
_ERROR_LINE = re.compile(r"^[A-Za-z_$][\w.$]*(Error|Exception|Exit|Interrupt|Timeout)\w*(:|$)")
# Lines that are never the error: Node's version footer, a lone brace closing an error's fields.
_NOT_ERROR = re.compile(r"^(Node\.js v\d|[{}\[\]]+$)")


def last_error_line(stderr: str) -> str:
    """The last line that names an error (`Name: message` at the start of a line, not indented:
    indented lines are stack frames and causes), else the last unindented line; scrubbed and
    cut to MAX_LINE characters. Empty when the client printed nothing."""
    lines = [line.rstrip() for line in stderr.splitlines()]
    top = [line for line in lines if line.strip() and not line[:1].isspace()
           and not _NOT_ERROR.match(line)]
    named = [line for line in top if _ERROR_LINE.match(line)]
    chosen = named[-1] if named else (top[-1] if top else "")
    line = scrub(chosen)
    return line if len(line) <= MAX_LINE else line[:MAX_LINE - 1] + "…"
