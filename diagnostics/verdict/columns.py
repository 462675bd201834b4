"""The columns of the verdict table that a row reads from the facts rather than states: the
phase, the evidence codes, the retry advice, and where a silence the verdict rests on began.

Each is a function of the Facts alone, named in a row of classify.RULES. A row calls only its own
column functions and only once its condition holds, so they may assume what the condition
checked (that a stream error exists, that a fault fired).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.dialects.base import UNKNOWN_SHAPE
from streamtap.diagnostics.trace_record import NO_ERROR, stated
from streamtap.diagnostics.verdict import silences

if TYPE_CHECKING:  # pragma: no cover
    from streamtap.diagnostics.verdict.classify import Facts

RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
NOT_RETRYABLE_STATUSES = frozenset({400, 401, 402, 403, 404, 405, 413, 422})
RETRYABLE_ERROR_WORDS = ("overloaded", "server_error", "api_error", "rate_limit", "unavailable",
                         "internal", "timeout", "503", "529", "500", "502")
FINAL_ERROR_WORDS = ("context_length", "context_window", "insufficient_quota", "quota",
                     "invalid_request", "authentication", "permission", "not_found",
                     "invalid_api_key", "billing", "content_filter")


# -- phase ------------------------------------------------------------------------------------
def stream_phase(f: Facts) -> str:
    return ev.BEFORE_RESPONSE if f.status is None else f.phase


def fault_phase(f: Facts) -> str:
    """An injected HTTP error is an answer before any stream."""
    return ev.BEFORE_RESPONSE if (f.status or 0) >= 400 else stream_phase(f)


def watchdog_phase(f: Facts) -> str:
    return ev.BEFORE_RESPONSE if f.watchdog_fired == "connect" else stream_phase(f)


# -- evidence ---------------------------------------------------------------------------------
def fault_codes(f: Facts) -> list[str]:
    evidence = [f"injected_{f.fault.get('action')}"]
    if f.downstream == "client_gone":
        evidence.append("client_gave_up")
    return evidence


def proxy_reason_code(f: Facts) -> list[str]:
    return [f.proxy_reason]


def watchdog_code(f: Facts) -> list[str]:
    return [f"watchdog_{f.watchdog_fired}"]


def client_codes(f: Facts) -> list[str]:
    # One boundary, two evidence codes: whether the client gave up (a timeout) or cancelled is
    # read from the silence before its close, which is a guess from the wire, not a fact.
    how = silences.client_close(f)
    return ["client_disconnected"] + ([how[0]] if how else [])


def connect_codes(f: Facts) -> list[str]:
    error = f.error or NO_ERROR
    code = error.code or error.type
    connect = error.where == "upstream_connect"
    evidence = ["upstream_connect_error" if connect else "upstream_no_response"]
    if code:
        evidence.append(str(code).lower())
    if f.downstream == "aborted":  # no status line: the client's connection was reset instead
        evidence.append("client_connection_reset")
    return evidence


def http_codes(f: Facts) -> list[str]:
    kind = http_error_kind(f)
    evidence = [f"http_{f.status}"] + ([str(kind)] if kind else [])
    if f.downstream == "client_gone":
        evidence.append("client_gave_up")
    return evidence


def unknown_shape_codes(f: Facts) -> list[str]:
    first = f.stream_errors[0]
    kind = first.type or first.code
    evidence = [UNKNOWN_SHAPE] + ([str(kind)] if kind else []) + (
        ["sse_unknown_field"] if stated(first.field) else [])
    return evidence + upstream_cut(f)


def stream_error_codes(f: Facts) -> list[str]:
    first = f.stream_errors[0]
    kind = first.type or first.code
    evidence = [first.shape] + ([str(kind)] if kind else [])
    return evidence + upstream_cut(f)


def upstream_cut(f: Facts) -> list[str]:
    """How the upstream ended after an error in the stream, when it did not end cleanly."""
    if f.upstream in ("reset", "truncated"):
        return [f"upstream_{f.upstream}"]
    return []


def upstream_codes(f: Facts) -> list[str]:
    code = (f.error or NO_ERROR).code
    evidence = [f"upstream_{f.upstream}"]
    if code:
        evidence.append(str(code).lower())
    return evidence


def closed_codes(f: Facts) -> list[str]:
    evidence = ["clean_close", "no_terminal_event"]
    if closed_after_finish(f):
        evidence.append("finish_reason_seen")
    if f.frame_count == 0:
        evidence.append("no_events")
    return evidence


# -- retry advice -----------------------------------------------------------------------------
def error_retryable(status: int | None, *words: object) -> bool | None:
    text = " ".join(str(word).lower() for word in words if word)
    if any(word in text for word in FINAL_ERROR_WORDS):
        return False
    if status in NOT_RETRYABLE_STATUSES:
        return False
    if status in RETRYABLE_STATUSES or (status is not None and status >= 500):
        return True
    if any(word in text for word in RETRYABLE_ERROR_WORDS):
        return True
    return None


def proxy_retryable(f: Facts) -> bool | None:
    return None if f.proxy_reason == "internal_error" else False


def http_retryable(f: Facts) -> bool | None:
    return error_retryable(f.status, http_error_kind(f), stated((f.error or NO_ERROR).error_code))


def stream_retryable(f: Facts) -> bool | None:
    first = f.stream_errors[0]
    return error_retryable(None, first.type, first.code, first.message)


def closed_retryable(f: Facts) -> bool:
    return not closed_after_finish(f)


def http_error_kind(f: Facts) -> str | None:
    error = f.error or NO_ERROR
    return stated(error.error_type) or stated(error.error_code)


def closed_after_finish(f: Facts) -> bool:
    """A clean close after the finish reason: the answer is whole, only the end is missing."""
    return f.finish_reason is not None and stream_phase(f) == ev.AFTER_FINISH


# -- where the silence a verdict rests on began -----------------------------------------------
def watchdog_silence(f: Facts) -> float:
    """The watchdog's limit, counted back from the end."""
    return f.end_ms - (f.watchdog.get(f"{f.watchdog_fired}_timeout_ms") or 0)


def since_last_frame(f: Facts) -> float:
    """A client's timeout runs from the last byte it had."""
    return f.last_frame_ms
