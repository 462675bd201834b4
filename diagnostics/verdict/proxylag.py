"""How far a record's own timing can be trusted: the worst event-loop lag streamtap measured in
itself while the exchange was open (`timeline.proxy_lag_max_ms`, ending at `proxy_lag_at_ms`),
the warning the views print about it, and how much of a silence it explains.

A frame's timestamp is taken when the proxy's event loop gets to it. While the loop is stopped
(a garbage collection, a slow callback, another thread holding the GIL) bytes wait in the socket,
so a gap that long may be streamtap's own, not the provider's.
"""

from __future__ import annotations

# Below this, timer jitter (uvloop's clock moves in whole milliseconds); above it, a gap of
# that length may be the proxy's own and the views say so.
PROXY_LAG_WARN_MS = 5.0
# A verdict resting on a silence is less sure when the proxy's own stall covered at least this
# share of it (and at least PROXY_LAG_WARN_MS): a 25 ms stall says nothing about a 60 s timeout.
SILENCE_SHARE = 0.1


def lag_warning(lag_ms: float | None, at_ms: float | None) -> str | None:
    """The sentence `show`, the live page and the report print, or None when the lag is noise."""
    if lag_ms is None or lag_ms < PROXY_LAG_WARN_MS:
        return None
    when = f" at {at_ms:.0f} ms" if at_ms is not None else ""
    return (f"streamtap itself was {lag_ms:.0f} ms late{when}: gaps shorter than that are not "
            "the provider's")


def lag_within(lag_ms: float | None, at_ms: float | None, start_ms: float,
               end_ms: float) -> float:
    """How many ms of the silence from `start_ms` to `end_ms` the proxy's own stall covered (the
    stall ended at `at_ms` and lasted `lag_ms`)."""
    if lag_ms is None or at_ms is None or end_ms <= start_ms:
        return 0.0
    return max(0.0, min(at_ms, end_ms) - max(at_ms - lag_ms, start_ms))


def lag_explains(lag_ms: float | None, at_ms: float | None, start_ms: float,
                 end_ms: float) -> bool:
    """True when the proxy's own stall explains a part of the silence worth a lower confidence."""
    covered = lag_within(lag_ms, at_ms, start_ms, end_ms)
    return covered >= PROXY_LAG_WARN_MS and covered >= SILENCE_SHARE * (end_ms - start_ms)
