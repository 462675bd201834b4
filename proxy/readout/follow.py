"""`streamtap tail`: follow a running proxy's event stream and print one row per finished
request (standard library HTTP, the project's own SSE decoder)."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from typing import TextIO

from streamtap.diagnostics.decode.sse import SseDecoder
from streamtap.diagnostics.verdict.client_sees import listed_as_failed
from streamtap.diagnostics.views.text import tail_row
from streamtap.proxy.readout.console import emit
from streamtap.diagnostics.errors import UpstreamError


class FollowError(UpstreamError, RuntimeError):
    """The proxy to follow cannot be reached, refuses, or went silent; says what to check."""


def summaries(proxy: str):
    """Yield each finished request's summary as the proxy publishes it."""
    url = proxy.rstrip("/") + "/_streamtap/events"
    try:
        response = urllib.request.urlopen(urllib.request.Request(
            url, headers={"accept": "text/event-stream"}), timeout=60)
    except urllib.error.HTTPError as exc:
        raise FollowError(f"{url} answered HTTP {exc.code}; the event stream answers loopback "
                          "clients of streamtap serve only") from None
    except (urllib.error.URLError, OSError) as exc:
        raise FollowError(f"cannot reach streamtap at {proxy}: {getattr(exc, 'reason', exc)}; "
                          "is `streamtap serve` running there? (--proxy URL)") from None
    decoder = SseDecoder()
    with response:
        while True:
            try:
                chunk = response.read1(65536)
            except TimeoutError:
                raise FollowError(f"{url} went silent (no keepalive for 60 s)") from None
            if not chunk:
                return
            for frame in decoder.feed(chunk):
                if frame.comment or frame.event != "request":
                    continue
                try:
                    summary = json.loads(frame.data)
                except ValueError:
                    continue
                if isinstance(summary, dict):
                    yield summary


def tail(proxy: str, *, failed: bool = False, out: TextIO | None = None) -> int:
    """Print a row per finished request until the proxy stops; FollowError (the command line
    says it and exits 1) when it cannot be reached or goes silent."""
    out = out or sys.stdout
    for summary in summaries(proxy):
        if failed and not listed_as_failed(summary):
            continue
        emit([tail_row(summary)], out)
    print(f"streamtap: {proxy} closed the event stream (it stopped)", file=sys.stderr)
    return 0
