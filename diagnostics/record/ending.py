"""How an exchange ended, as the proxy saw it (`Ending`, filled by proxy/serve/), and the record's
`close` and proxy-lag facts derived from it."""

from __future__ import annotations

from dataclasses import dataclass, field

from streamtap.diagnostics.dialects.stream import StreamState
from streamtap.diagnostics.verdict.conditions import SLOWING_FAULTS

# How an upstream can end by itself (Ending.upstream): anything else is streamtap closing it
# (`closed_by_proxy`) or it never started. `malformed` is broken chunked framing.
UPSTREAM_ENDED = ("complete", "reset", "truncated", "malformed", "error")


@dataclass
class Ending:
    """How the exchange ended, as the proxy saw it. Every field is a fact, not a guess."""

    # one of UPSTREAM_ENDED, closed_by_proxy or not_started
    upstream: str = "not_started"
    downstream: str = "complete"  # complete | aborted | client_gone
    downstream_status: int | None = None
    downstream_bytes: int = 0
    error: dict | None = None  # fingerprint from diagnostics.verdict.fingerprints
    watchdog_fired: str | None = None  # connect | idle | progress
    shutdown: bool = False
    # A second stop signal ended it at once, without waiting for it (proxy/serve/forced.py)
    shutdown_forced: bool = False
    proxy_reason: str | None = None  # the proxy answered or ended it itself: request_too_large ...
    fault: dict | None = None
    upstream_end_ms: float | None = None
    downstream_end_ms: float | None = None
    watchdog: dict = field(default_factory=dict)
    # A stale pooled connection retried (proxy/serve/upstream.py): a fixed reason and an error
    # fingerprint, whose message passes the secret scrubber like every `error` here.
    upstream_retry: dict | None = None
    # Evidence codes the proxy saw that decide no verdict but explain one, e.g.
    # `path_repeats_route_prefix`; fixed codes, never text from the request.
    notes: list[str] = field(default_factory=list)
    # The proxy's own worst event-loop lag while the exchange was open, in ms, and when (ms
    # since the request arrived) the stall ended; None when no lag check fell due before the
    # exchange ended (proxy/serve/looplag.py).
    proxy_lag_max_ms: float | None = None
    proxy_lag_at_ms: float | None = None


def proxy_lag(ending: Ending) -> dict:
    """The timeline's account of streamtap's own lag (diagnostics/verdict/proxylag.py)."""
    lag, at = ending.proxy_lag_max_ms, ending.proxy_lag_at_ms
    return {"proxy_lag_max_ms": round(lag, 1) if lag is not None else None,
            "proxy_lag_at_ms": round(at, 1) if at is not None else None}


def closed_by(ending: Ending) -> str | None:
    """Who ended the connection: `client`, `streamtap` (a fault, a watchdog, shutdown, its own
    answer) or `upstream`; None when nothing was connected."""
    fault = ending.fault or {}
    if ending.downstream == "client_gone":
        return "client"
    if (ending.shutdown or ending.watchdog_fired or ending.proxy_reason
            or (fault.get("fired") and fault.get("action") not in SLOWING_FAULTS)):
        return "streamtap"
    if ending.upstream in UPSTREAM_ENDED:
        return "upstream"
    return None


def close_facts(ending: Ending, marks: dict, state: StreamState, duration_ms: float) -> dict:
    """The record's `close`: when the connection ended as the client saw it, who ended it, how
    long nothing had come before, the keep-alives since the last real event, and how long it
    stayed open after the terminal event. Numbers and one fixed word: no content, no secret."""
    close_ms = next(value for value in (ending.downstream_end_ms, ending.upstream_end_ms,
                                        duration_ms) if value is not None)
    # The last sign of life: a body byte, else the headers, else the request going out.
    alive = next((value for value in (marks["last_byte"], marks["response_headers"],
                                      marks["request_sent"]) if value is not None), 0.0)
    beats = state.beats_since_event
    interval = None
    if beats >= 2:
        interval = round((state.last_beat_ms - state.first_beat_ms) / (beats - 1), 1)
    after_terminal = None
    if state.terminal_ms is not None:
        after_terminal = round(max(close_ms - state.terminal_ms, 0.0), 1)
    return {"by": closed_by(ending), "at_ms": round(close_ms, 1),
            "silence_ms": round(max(close_ms - alive, 0.0), 1),
            "heartbeats_since_event": beats, "heartbeat_interval_ms": interval,
            "open_after_terminal_ms": after_terminal}
