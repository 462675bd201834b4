"""When each row of the verdict table holds: one yes/no question per row, asked of the Facts.

A condition reads the facts and nothing else (no clock, no I/O, no state of its own) and answers
True or False; the verdict it leads to is the table's (classify.py), its words the sentence's
(sentences.py). A row is asked only after every row above it said no, so a condition says what
sets its case apart from the rows below it, not from those above.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtap.diagnostics.dialects.base import UNKNOWN_SHAPE
from streamtap.diagnostics.trace_record import NO_ERROR

if TYPE_CHECKING:  # pragma: no cover
    from streamtap.diagnostics.verdict.classify import Facts

SLOWING_FAULTS = ("delay", "throttle")
# Faults that leave the answer whole: the stream's own verdict stands (`hold` keeps the
# connection open after the terminal event, and says so as a warning).
ANSWER_KEEPING_FAULTS = SLOWING_FAULTS + ("hold",)


def injected_fault(f: Facts) -> bool:
    fault = f.fault
    return bool(fault and fault.get("fired")) and fault.get("action") not in ANSWER_KEEPING_FAULTS


def forced_shutdown(f: Facts) -> bool:
    return bool(f.shutdown_forced)


def proxy_shutdown(f: Facts) -> bool:
    return bool(f.shutdown)


def proxy_answered(f: Facts) -> bool:
    return bool(f.proxy_reason)


def watchdog_fired(f: Facts) -> bool:
    return bool(f.watchdog_fired)


def client_went_away(f: Facts) -> bool:
    if f.downstream != "client_gone" or (f.status or 0) >= 400:
        return False  # an HTTP error came first: the client leaving is its consequence
    # It left after it had the terminal event: SDKs close at `[DONE]`.
    return not (f.terminal is not None and f.all_forwarded)


def could_not_connect(f: Facts) -> bool:
    where = (f.error or NO_ERROR).where
    return f.status is None and where in ("upstream_connect", "upstream_response")


def http_error_status(f: Facts) -> bool:
    return f.status is not None and f.status >= 400


def error_in_unknown_shape(f: Facts) -> bool:
    """An error-like object in a frame no dialect documents, or on an SSE field line clients
    ignore (GPUStack's `error: {...}`): the client saw at most an unknown event, maybe nothing."""
    return bool(f.stream_errors) and f.stream_errors[0].shape == UNKNOWN_SHAPE


def error_inside_stream(f: Facts) -> bool:
    return bool(f.stream_errors)


def upstream_broke(f: Facts) -> bool:
    return f.upstream in ("reset", "truncated", "malformed", "error")


def stream_answered_with_json(f: Facts) -> bool:
    """`stream: true` answered by one JSON body: an SDK iterating the stream yields no event and
    raises nothing, the "empty reply" this tool exists to explain."""
    if not f.stream_requested or f.status is None or f.status >= 400:
        return False
    return f.content_type == "application/json"


def completed_with_terminal(f: Facts) -> bool:
    return f.terminal is not None


def no_dialect_to_judge(f: Facts) -> bool:
    if f.dialect_has_terminal and f.dialect not in (None, "json", "unknown"):
        return False
    # Headers then silence: the closed_without_terminal row below says it better.
    return not (f.dialect == "sse" and f.frame_count == 0)


def closed_without_terminal(f: Facts) -> bool:
    """The last row: every row above said no, so the upstream ended cleanly (not reset, not cut,
    no error) and no terminal event came. It always holds, so every exchange gets a verdict."""
    return True
