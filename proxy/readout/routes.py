"""The read-out endpoints a running proxy serves under `/_streamtap/`: the event stream of
finished requests, the live page, and one trace's view for the page to fetch.

The proxy registers them with add_readout_routes(app, guard, trace_dir=...): `guard(handler)` is
the control API's wrapper (proxy/serve/guard.py), so the read-out answers exactly whom the
control API answers; it is handed in, so that reading traces back sits below serving.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler

from streamtap.diagnostics.verdict.client_sees import listed_as_failed
from streamtap.diagnostics.views.text import ls_cells
from streamtap.proxy.readout.feed import Feed

PREFIX = "/_streamtap/"
KEEPALIVE_S = 15.0  # an SSE comment this often, so idle connections are not reaped
FEED_KEY: web.AppKey[Feed] = web.AppKey("readout_feed")
Guard = Callable[[Handler], Handler]  # wraps a handler: refused requests never reach it


def event_bytes(summary: dict) -> bytes:
    """One `request` event: the index line, plus the table cells the page shows and whether
    `ls --failed` lists it (`failed`, which "failures only" keeps), both worked out here so the
    page's rows and `ls` cannot disagree."""
    data = json.dumps({**summary, "cells": ls_cells(summary), "failed": listed_as_failed(summary)},
                      separators=(",", ":"))  # one line: no LF can split the event
    return f"event: request\nid: {summary.get('trace_id')}\ndata: {data}\n\n".encode()


def add_readout_routes(app: web.Application, guard: Guard, *, trace_dir: str | Path) -> Feed:
    """Register the routes; return the feed the proxy publishes finished requests to."""
    feed = Feed()
    app[FEED_KEY] = feed
    trace_dir = Path(trace_dir)

    async def bind(app: web.Application) -> None:
        feed.bind(asyncio.get_running_loop())

    async def close(app: web.Application) -> None:
        feed.close()

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream",
                                               "cache-control": "no-cache"})
        await response.prepare(request)
        subscription = feed.subscribe()
        try:
            await response.write(b": streamtap events: one `request` event per finished "
                                 b"request\n\n")
            told = 0
            while True:
                try:
                    summary = await subscription.next(KEEPALIVE_S)
                except EOFError:
                    break
                if subscription.dropped > told:  # say so rather than skip rows silently
                    await response.write(f": {subscription.dropped - told} request(s) not sent: "
                                         "this follower fell behind\n\n".encode())
                    told = subscription.dropped
                await response.write(event_bytes(summary) if summary is not None
                                     else b": keepalive\n\n")
        except ConnectionError:
            pass  # the follower left
        finally:
            feed.unsubscribe(subscription)
        return response

    async def page(request: web.Request) -> web.Response:
        from streamtap.proxy.readout.pages import live_page

        nonce = secrets.token_urlsafe(16)
        html = await asyncio.to_thread(live_page, trace_dir, nonce)
        return web.Response(text=html, content_type="text/html", headers={
            "cache-control": "no-store",
            # Inline CSS and our one script (by nonce), nothing else: even a string that escaped
            # escaping could not run.
            "content-security-policy": f"default-src 'none'; style-src 'unsafe-inline'; "
                                       f"script-src 'nonce-{nonce}'; connect-src 'self'; "
                                       "img-src data:"})

    async def trace(request: web.Request) -> web.Response:
        from streamtap.proxy.readout.pages import trace_fragment

        html = await asyncio.to_thread(trace_fragment, trace_dir, request.match_info["trace_id"])
        if html is None:
            return web.Response(status=404, text="no such trace")
        return web.Response(text=html, content_type="text/html",
                            headers={"cache-control": "no-store"})

    app.on_startup.append(bind)
    app.on_shutdown.append(close)
    app.router.add_get(PREFIX, guard(page))
    app.router.add_get(PREFIX + "events", guard(events))
    app.router.add_get(PREFIX + "traces/{trace_id}", guard(trace))
    return feed
