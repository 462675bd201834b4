"""The one family of streamtap's own errors, each saying whose fault it is.

Like h11's LocalProtocolError and RemoteProtocolError, the class says which side broke, so the
command line can turn any of them into one clear line and an exit status, and a caller can tell a
mistake the user can fix from a broken upstream or a bug of ours. Every error streamtap raises on
purpose derives from one of the three below *and* keeps the builtin base it always had
(ValueError, RuntimeError...), so no existing `except` changes meaning. The message says what to
do; the class says who has to do it.

This module sits below every other layer (diagnostics may not import proxy, and both use it).
"""

from __future__ import annotations

USER = "user"  # the user's input: a config, a flag, a trace dir, a sample, a rule
UPSTREAM = "upstream"  # the far side: a provider, a gateway, another streamtap
STREAMTAP = "streamtap"  # streamtap itself: a bug to report


class StreamtapError(Exception):
    """Any error streamtap raises on purpose; `fault` says whose it is (USER, UPSTREAM or
    STREAMTAP). Catch this to catch them all."""

    fault: str = STREAMTAP


class UserError(StreamtapError):
    """Something the user gave streamtap is wrong; the message says what to change."""

    fault = USER


class UpstreamError(StreamtapError):
    """The other end (a provider, a gateway, another streamtap process) failed or refused."""

    fault = UPSTREAM


class StreamtapBug(StreamtapError):
    """streamtap broke its own promise; the message says what to report."""

    fault = STREAMTAP
