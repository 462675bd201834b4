"""The upstream connection pool, and the one retry streamtap allows itself.

Providers and their CDNs close idle keep-alive connections (often after 60 s). If that close
crosses streamtap taking the connection from its pool, aiohttp finds the transport closing or gone
when it goes to write the request: not one byte of the request left streamtap, so the provider
never saw it. That failure is streamtap's, not the provider's, and it is retried once on a fresh
(never pooled) connection, as browsers do and as RFC 9112 section 9.3.1 allows when the request
was never applied. Once any byte of the request may have been written, nothing is retried: an LLM
request is not idempotent (it costs tokens). aiohttp's `UploadTracker` says how many bytes of the
body reached the kernel; the headers travel in the same write as the body, never before it.

The close can also land in the kernel a moment before the write, while the event loop has not yet
read it: so right before the first write on a reused connection, the socket is polled, and an idle
keep-alive connection with something to read (the far side's FIN, a reset, a stray response) is
given up unwritten, like the closing transport above.
"""

from __future__ import annotations

import select
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

import aiohttp

from streamtap.diagnostics.verdict.fingerprints import fingerprint
from streamtap.proxy.serve.body import tap as bodytap

# Below the 60 s idle timeout common at provider front ends, so the pool usually drops an idle
# connection before the far side does (the race above then needs a close within these 15 s).
KEEPALIVE_TIMEOUT_S = 15.0
STALE_REASON = "stale_pooled_connection"
# aiohttp writes a bytes body (headers included) in one write and, up to this size, reaches the
# tracker's "finished" without awaiting: a body this small that was cut short (cancelled) with
# zero bytes counted was never written. A larger one could have been cut while draining.
MAX_ABORTED_BODY = 64 * 1024


def _nothing() -> None:
    pass


@dataclass
class Attempt:
    """One request on its way upstream: what the pool learned while sending it, read back by the
    exchange, and what the exchange wants told (`connected`, `sent`: its timeline's marks).

    It is the trace context (`trace_request_ctx`) of the request, which aiohttp hands to every
    TraceConfig callback.
    """

    reused: bool = False  # the current try went out on a connection taken from the pool
    transport: object = None  # the current try's connection (for the poll before writing)
    polled: bool = False  # the poll before the first write was done
    # The retry, if one happened: why, and the failure of the first try (an error fingerprint:
    # exception types and aiohttp's own messages about the socket, never request content).
    retry: dict | None = None
    tries: int = 0
    connected: Callable[[], None] = field(default=_nothing, repr=False)  # a connection is had
    sent: Callable[[], None] = field(default=_nothing, repr=False)  # a piece of it went out

    def begin(self) -> None:
        self.tries += 1
        self.reused = False
        self.transport = None
        self.polled = False


# The attempt the current task is sending, for the connector: aiohttp hands a connector no trace
# context, and its connection (whose socket is polled before the first write) to no trace callback.
_SENDING: ContextVar[Attempt | None] = ContextVar("streamtap_upstream_attempt", default=None)


class StaleConnectionError(aiohttp.ClientConnectionResetError):
    """The pooled connection was already closed by the upstream: nothing was written to it."""


class PoolConnector(aiohttp.TCPConnector):
    """A TCPConnector that tells the request's Attempt which connection it got."""

    async def connect(self, req, traces, timeout):  # BaseConnector.connect, documented API
        connection = await super().connect(req, traces, timeout)
        attempt = _SENDING.get()
        if attempt is not None:
            attempt.transport = connection.transport
        return connection


def peer_has_closed(transport) -> bool:
    """An idle keep-alive connection has nothing to read until it is sent a request: readable
    means the far side closed it (FIN or reset) or wrote something unasked. Polls, never reads."""
    if transport is None or transport.is_closing():
        return True
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        fd = sock.fileno()
        if fd < 0:
            return True
        if hasattr(select, "poll"):  # no FD_SETSIZE limit, unlike select()
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True


@dataclass
class UpstreamPool:
    """The pooled session every exchange shares, and a no-pool session for the one retry."""

    session: aiohttp.ClientSession
    fresh: aiohttp.ClientSession
    retries: int = 0  # stale connections retried since start

    async def send(self, attempt: Attempt, method: str, url, *, data: bytes | None = None,
                   raw_body: bool = False, **kwargs) -> aiohttp.ClientResponse:
        """`session.request(...)`, retried once on a fresh connection if a reused one turned
        out stale before a single byte of the request was written. With `raw_body` the
        response's body is held for the relay (body/tap.py: `attach` or `release` it); without,
        aiohttp reads it."""
        response = await self._send(attempt, method, url, data=data, **kwargs)
        if not raw_body:
            bodytap.release(response)
        return response

    async def _send(self, attempt: Attempt, method: str, url, *, data: bytes | None = None,
                    **kwargs) -> aiohttp.ClientResponse:
        attempt.begin()
        tracker = aiohttp.UploadTracker()
        sending = _SENDING.set(attempt)
        try:
            return await self.session.request(method, url, data=data, trace_request_ctx=attempt,
                                              upload_tracker=tracker, **kwargs)
        except (aiohttp.ClientError, OSError) as exc:
            if not (attempt.reused and nothing_was_written(tracker, data)):
                raise
            attempt.retry = {"reason": STALE_REASON,
                             "first_error": fingerprint("upstream_response", exc)}
            self.retries += 1
        finally:
            _SENDING.reset(sending)
        attempt.begin()
        return await self.fresh.request(method, url, data=data, trace_request_ctx=attempt,
                                        **kwargs)

    async def close(self) -> None:
        await self.session.close()
        await self.fresh.close()


def nothing_was_written(tracker: aiohttp.UploadTracker, body: bytes | None) -> bool:
    """True only when it is certain that no byte of the request reached the socket: the body's
    one write was refused because the transport was already closing, or (small bodies) the
    upload was cut short before any byte was counted. An empty body is never judged: its
    headers go out alone, which the tracker does not count."""
    if not isinstance(body, (bytes, bytearray)):
        return False  # a streamed body cannot be sent twice: its first pieces may be gone
    if not body or not tracker.upload_complete.done() or tracker.bytes_written:
        return False
    failure = tracker.upload_complete.exception()
    if isinstance(failure, aiohttp.UploadAbortedError):
        return len(body) <= MAX_ABORTED_BODY
    seen = 0
    while failure is not None and seen < 4:
        if isinstance(failure, aiohttp.ClientConnectionResetError):
            return True  # "Cannot write to closing transport": raised instead of writing
        failure = failure.__cause__ or failure.__context__
        seen += 1
    return False


def attempt_trace_config() -> aiohttp.TraceConfig:
    """Tells each request's `Attempt` whether its connection came from the pool, and polls a
    reused connection right before its first write (aiohttp awaits `on_request_chunk_sent`
    before writing the chunk, and the headers go out with the first chunk)."""
    config = aiohttp.TraceConfig()

    async def reused(session, ctx, params) -> None:
        attempt = ctx.trace_request_ctx
        if isinstance(attempt, Attempt):
            attempt.reused = True

    async def before_write(session, ctx, params) -> None:
        attempt = ctx.trace_request_ctx
        if not isinstance(attempt, Attempt) or not attempt.reused or attempt.polled:
            return
        attempt.polled = True
        if peer_has_closed(attempt.transport):
            raise StaleConnectionError("the upstream closed this pooled connection; "
                                       "nothing was written to it")

    config.on_connection_reuseconn.append(reused)
    config.on_request_chunk_sent.append(before_write)
    return config


def open_pool(connect_timeout_s: float | None, trace_configs: list[aiohttp.TraceConfig],
              relay_bodies: bool = True) -> UpstreamPool:
    """The app's sessions (created inside its event loop, closed in `cleanup_ctx`). With
    `relay_bodies` (aiohttp_hooks found the tap's hooks), response bodies can be relayed as they
    arrive; an aiohttp that refuses the tap all the same is an error, never a silent slow path."""
    traces = [*trace_configs, attempt_trace_config()]

    def session(connector: aiohttp.BaseConnector) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, connect=connect_timeout_s),
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),  # never carry one client's cookies to another
            trust_env=False,
            trace_configs=traces,
        )

    pooled = PoolConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=KEEPALIVE_TIMEOUT_S)
    fresh = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, force_close=True)
    if relay_bodies:
        for connector in (pooled, fresh):
            if not bodytap.install(connector):
                raise RuntimeError("aiohttp_hooks.check() found the body tap's hooks, yet the "
                                   "connector refused the tap: bring check() up to date")
    return UpstreamPool(session(pooled), session(fresh))

