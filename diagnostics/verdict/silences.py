"""The silences around an ending, named: a client that gave up after a silence (its timeout) or
closed while bytes flowed (a cancel), a stall behind keep-alives, headers and then nothing, and a
complete stream whose connection stayed open.

classify.py asks these functions for an evidence code and a sentence; they read only the facts
(the record's `timeline` and `close`), so they are as pure as the rule table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtap.diagnostics.verdict import client_defaults

if TYPE_CHECKING:  # pragma: no cover
    from streamtap.diagnostics.verdict.classify import Facts

# Client closes: from the wire alone, a client that closed after a silence that ended only with
# its close looks like an idle timeout, and one that closed while bytes were flowing looks like a
# cancel. A silence counts as a timeout from one second on and when it is longer than every gap
# before it (a stream that paused 3 s between frames and was closed 1.5 s after its last one was
# closed by someone, not by a timer that the 3 s pause would have fired).
CLIENT_TIMEOUT_MIN_SILENCE_MS = 1000.0
# A stretch of keep-alives, or of nothing after the headers, or of an open connection after the
# terminal event, is worth a sentence from one second on: shorter ones are ordinary jitter.
LONG_STRETCH_MS = 1000.0
MIN_HEARTBEATS = 2


def seconds(ms: float) -> str:
    return f"{ms / 1000:.1f} s"


def client_close(f: "Facts") -> tuple[str, str] | None:
    """(`client_timeout` | `client_cancel`, the clause that says why), or None when the record
    has no close timing (records written before it was kept)."""
    silence = f.close.silence_ms
    if silence is None:
        return None
    if silence >= CLIENT_TIMEOUT_MIN_SILENCE_MS and silence > f.max_gap_ms:
        waiting_for = client_defaults.HEADERS if f.status is None else client_defaults.BODY
        matched = client_defaults.matching_defaults(silence, waiting_for)
        which = f" ({client_defaults.describe(matched)})" if matched else ""
        return ("client_timeout", f"after {seconds(silence)} without a byte: its read "
                                  f"timeout, not a cancel{which}")
    return ("client_cancel", f"with bytes still flowing (the last one {silence:.0f} ms before): "
                             "a cancel, not a timeout")


def heartbeats_only(f: "Facts") -> tuple[str, str] | None:
    """Only keep-alives since the last real event (or the headers), for a long stretch, and the
    stream never completed: a client whose idle timer resets on any byte never fires."""
    beats = f.close.heartbeats_since_event or 0
    since = f.last_event_ms if f.last_event_ms is not None else f.headers_ms
    end = f.close.at_ms
    if f.terminal is not None or beats < MIN_HEARTBEATS or since is None or end is None:
        return None
    stretch = end - since
    if stretch < LONG_STRETCH_MS:
        return None
    interval = f.close.heartbeat_interval_ms or 0.0
    after = "the last event" if f.last_event_ms is not None else "the headers"
    return ("heartbeats_only", f"For {seconds(stretch)} after {after} only keep-alives arrived "
                               f"({beats}, every {seconds(interval)}) and no event: a client "
                               "whose timer resets on any byte never fires.")


def headers_then_silence(f: "Facts") -> tuple[str, str] | None:
    """A 2xx/3xx answer whose body never sent a byte for a long stretch: the gap that matters is
    the one after the headers, not the time to first byte."""
    end = f.close.at_ms
    if f.headers_ms is None or f.first_byte_ms is not None or end is None:
        return None
    if f.status is None or f.status >= 400 or end - f.headers_ms < LONG_STRETCH_MS:
        return None
    injected = bool(f.fault and f.fault.get("fired"))
    who = "The client got" if injected else f"{f.provider} answered"  # a route name keeps its case
    return ("headers_then_silence", f"{who} {f.status} at "
                                    f"{seconds(f.headers_ms)} and then nothing came for "
                                    f"{seconds(end - f.headers_ms)}.")


CLOSERS = {"client": "the client", "streamtap": "streamtap"}


def open_after_terminal(f: "Facts") -> tuple[str, str] | None:
    """The answer was complete but the connection was not: a client that waits for the close
    (rather than the terminal event) waited as long."""
    parked = f.close.open_after_terminal_ms
    if f.terminal is None or f.terminal_ms is None or parked is None:
        return None
    if parked < LONG_STRETCH_MS:
        return None
    beats = f.close.heartbeats_since_event or 0
    with_beats = ""
    if beats:
        interval = f.close.heartbeat_interval_ms
        every = f" every {seconds(interval)}" if interval else ""
        with_beats = f", with {beats} keep-alive{'s' if beats > 1 else ''}{every},"
    closer = CLOSERS.get(f.close.by or "", f.provider)
    fault = f.fault or {}
    if fault.get("fired") and fault.get("action") == "hold":
        closer = f"streamtap (fault rule `{fault.get('name')}`)"
    return ("open_after_terminal", f"Complete at {seconds(f.terminal_ms)}; the connection "
                                   f"stayed open {seconds(parked)} more{with_beats} until "
                                   f"{closer} closed it; a client that waits for the close "
                                   "waited too.")


# The remarks classify() adds to any verdict, in this order.
REMARKS = (headers_then_silence, heartbeats_only, open_after_terminal)


def remarks(f: "Facts") -> list[tuple[str, str]]:
    return [said for remark in REMARKS if (said := remark(f)) is not None]
