"""What a client makes of a stream's ending, judged from the wire alone: the outcome's
`client_sees`, and the sentence the summary gains when the client is told nothing.

The same wire ending reaches clients differently (issue 23, measured with fifteen client setups
against a fake upstream): after a clean close without the terminal event thirteen of them raise
nothing (Node's fetch, both npm SDKs' `create()` iteration, both Python SDKs, the Vercel AI SDK,
httpx, aiohttp), so the answer is silently cut short; an error event inside a 200 stream is
invisible to a client that does not parse frames; a reset reaches every client as an error.
The judgement is a table: evidence codes that decide it, then one default per boundary, so a new
evidence code only adds a row (tests/test_client_sees.py fails until it has one).
"""

from __future__ import annotations

from streamtap.diagnostics.dialects.base import UNKNOWN_SHAPE

ERROR = "error"  # the client's call raises (an HTTP error status, a reset, an abort)
IN_BAND_ERROR = "in_band_error"  # a 200 stream whose error is only in a frame
SILENT_TRUNCATION = "silent_truncation"  # the stream ends like a whole one: no error, short answer
HANG = "hang"  # the client waits on a silent connection until its own timer (if any) fires
SUCCESS = "success"  # a whole answer, and the client knows the stream ended
VALUES = (ERROR, IN_BAND_ERROR, SILENT_TRUNCATION, HANG, SUCCESS)

# What the client is not told, in a sentence for the summary. An error, or a success, it is told;
# a hang is said by the evidence that found the silence (a client's timeout, a connection open
# after the terminal event), whose sentence names how long the client waited.
SENTENCES = {
    SILENT_TRUNCATION: "Most clients end this stream without an error: the answer is cut short "
                       "silently.",
    IN_BAND_ERROR: "Only a client that reads the stream's events sees this error; one that does "
                   "not (a plain fetch, a gateway) sees a 200 stream that just ended.",
}
# `ls --failed` lists these although the HTTP status, and at times the verdict, says ok.
QUIET_FAILURES = (SILENT_TRUNCATION, IN_BAND_ERROR, HANG)

# Evidence codes that decide what the client sees, whatever the boundary: the first one found,
# in this order, wins (a reset after an error frame still reaches the client as a reset).
BY_EVIDENCE: tuple[tuple[str, str], ...] = (
    ("upstream_reset", ERROR),  # mirrored as a reset: every client raises
    ("upstream_truncated", ERROR),  # mirrored without the final chunk: an incomplete read
    ("upstream_malformed", ERROR),  # bad chunk framing passed on: the client's parser fails too
    ("injected_reset", ERROR),
    ("injected_truncate", ERROR),
    ("injected_bad_chunk_size", ERROR),  # the client's HTTP parser fails on the framing
    ("injected_http_error", ERROR),
    ("injected_close", SILENT_TRUNCATION),  # a clean close: nothing tells the client
    ("injected_drop_terminal", SILENT_TRUNCATION),
    ("injected_error_chunk", IN_BAND_ERROR),
    ("injected_stall", HANG),  # the fault holds the connection silent until someone gives up
    # Issue 23 item 1: a client that closed after a silence ended by its own timer hung first.
    ("client_timeout", HANG),
    # Issue 23 item 4: complete, but a client that reads to the close waits as long as it stays.
    ("open_after_terminal", HANG),
    ("sse_unknown_field", SILENT_TRUNCATION),  # an `error:` line no EventSource dispatches
    (UNKNOWN_SHAPE, IN_BAND_ERROR),  # a frame a frame-parsing client may read as unknown
    ("finish_reason_seen", SUCCESS),  # only the end marker is missing: the answer is whole
    ("stream_requested_json_answered", SILENT_TRUNCATION),  # an SDK yields no event, no error
)
# Families of evidence codes built with a variable part (`http_429`, `watchdog_idle`), matched
# on the verdict's first evidence code.
BY_PREFIX: tuple[tuple[str, str], ...] = (
    ("http_", ERROR),  # SDKs raise on an error status before reading a body
    ("watchdog_", ERROR),  # streamtap aborted both sides
    ("injected_", ERROR),  # an action added to rules.ACTIONS without a row above
)
# Evidence codes considered here that leave the decision to the boundary: they explain a verdict
# but do not change what reaches the client. Every code classify.py can emit is in one of the
# three tables (the unit test parses the rule table to check it).
NOT_DECIDING = frozenset({
    "client_disconnected", "client_cancel", "client_gave_up", "clean_close", "no_terminal_event",
    "no_terminal_known", "no_events", "terminal_event", "unterminated_frame", "upstream_retry",
    "upstream_error", "upstream_connect_error", "upstream_no_response", "proxy_shutdown",
    "fault_armed_not_fired", "path_repeats_route_prefix", "heartbeats_only",
    "headers_then_silence", "shutdown_forced", "client_connection_reset",
    "proxy_lag",  # streamtap's own timing, not the ending's
})
# The boundary decides what no evidence code decided.
BY_BOUNDARY = {
    "none": SUCCESS,
    "provider_error": IN_BAND_ERROR,  # an HTTP error status is decided by `http_` above
    "provider_close": SILENT_TRUNCATION,  # measured: 13 of 15 clients raise nothing
    "protocol": SILENT_TRUNCATION,
    "transport": ERROR,  # no connection, no headers, or a broken body: every client raises
    "watchdog": ERROR,
    "proxy": ERROR,  # streamtap answered an error status or aborted the stream
    # The client ended the exchange itself, so it holds its own reason (an abort, a timeout it
    # raised); nothing was hidden from it. A timeout after a silence is `client_timeout` above.
    "client_abort": ERROR,
    "injected": ERROR,
}
DEFAULT = ERROR  # a boundary this table does not know: say the client was told


def judge(boundary: str | None, evidence: list[str] | tuple[str, ...]) -> str:
    """One of VALUES, from the verdict's boundary and evidence codes."""
    present = set(evidence)
    for code, value in BY_EVIDENCE:
        if code in present:
            return value
    # Only the first code: classify puts the family code first, and a provider's own error type
    # later in the list (which could be anything, `http_error` too) must not match a family.
    first = evidence[0] if evidence else ""
    for prefix, value in BY_PREFIX:
        if first.startswith(prefix):
            return value
    return BY_BOUNDARY.get(boundary or "", DEFAULT)


def listed_as_failed(line: dict) -> bool:
    """Whether `ls --failed` (and `tail --failed`) lists an index line or outcome: a failed
    verdict, or a client that was not told (a silent truncation behind HTTP 200)."""
    return line.get("ok") is not True or line.get("client_sees") in QUIET_FAILURES
