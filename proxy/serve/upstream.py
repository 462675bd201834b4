"""The upstream connection pool, and the one retry streamtap allows itself.

Providers and their CDNs close idle keep-alive connections (often after 60 s). If that close
crosses streamtap taking the connection from its pool, aiohttp finds the transport closing when it
goes to write the request and fails with "Cannot write to closing transport": not one byte of the
request left streamtap, so the provider never saw it. That failure is streamtap's, not the
provider's, and it is retried once on a fresh (never pooled) connection, as browsers do and as
RFC 9112 section 9.3.1 allows when the request was never applied. Once any byte of the request
may have been written, nothing is retried: an LLM request is not idempotent (it costs tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp

from streamtap.diagnostics.verdict.errors import fingerprint

# Below the 60 s idle timeout common at provider front ends, so the pool usually drops an idle
# connection before the far side does (the race above then needs a close within these 15 s).
KEEPALIVE_TIMEOUT_S = 15.0
STALE_REASON = "stale_pooled_connection"


@dataclass
class Attempt:
    """What the pool learned while sending one request, read back by the exchange.

    The trace context (`trace_request_ctx`) of every request sent through `UpstreamPool.send`
    carries one of these as its `upstream_attempt` attribute.
    """

    reused: bool = False  # this try went out on a connection taken from the pool
    body_written: bool = False  # aiohttp reported a chunk of the request written to the socket
    # The retry, if one happened: why, and the failure of the first try (an error fingerprint:
    # exception types and aiohttp's own messages about the socket, never request content).
    retry: dict | None = None
    tries: int = 0

    def begin(self) -> None:
        self.tries += 1
        self.reused = False
        self.body_written = False


@dataclass
class UpstreamPool:
    """The pooled session every exchange shares, and a no-pool session for the one retry."""

    session: aiohttp.ClientSession
    fresh: aiohttp.ClientSession
    retries: int = field(default=0)  # stale connections retried since start (for tests and logs)

    async def send(self, ctx, method: str, url, **kwargs) -> aiohttp.ClientResponse:
        """`session.request(...)`, retried once on a fresh connection if a reused one turned
        out stale before a single byte of the request was written."""
        attempt: Attempt = ctx.upstream_attempt
        attempt.begin()
        try:
            return await self.session.request(method, url, trace_request_ctx=ctx, **kwargs)
        except (aiohttp.ClientError, OSError) as exc:
            if not (attempt.reused and not attempt.body_written and nothing_was_written(exc)):
                raise
            attempt.retry = {"reason": STALE_REASON,
                             "first_error": fingerprint("upstream_response", exc)}
            self.retries += 1
        attempt.begin()
        return await self.fresh.request(method, url, trace_request_ctx=ctx, **kwargs)

    async def close(self) -> None:
        await self.session.close()
        await self.fresh.close()


def nothing_was_written(exc: BaseException) -> bool:
    """True if the failure is aiohttp refusing to write to a transport that was already closing
    (`ClientConnectionResetError`, raised before the write, so the write sent nothing)."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if isinstance(current, aiohttp.ClientConnectionResetError):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def attempt_trace_config() -> aiohttp.TraceConfig:
    """Tells each request's `Attempt` whether its connection was pooled and whether a chunk of
    the request reached the socket (`on_request_headers_sent` fires before headers are written,
    so only chunk notifications count)."""
    config = aiohttp.TraceConfig()

    async def reused(session, ctx, params) -> None:
        attempt = getattr(ctx.trace_request_ctx, "upstream_attempt", None)
        if attempt is not None:
            attempt.reused = True

    async def written(session, ctx, params) -> None:
        attempt = getattr(ctx.trace_request_ctx, "upstream_attempt", None)
        if attempt is not None:
            attempt.body_written = True

    config.on_connection_reuseconn.append(reused)
    config.on_request_chunk_sent.append(written)
    return config


def open_pool(connect_timeout_s: float | None,
              trace_configs: list[aiohttp.TraceConfig]) -> UpstreamPool:
    """The app's sessions (created inside its event loop, closed in `cleanup_ctx`)."""
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

    pooled = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300,
                                  keepalive_timeout=KEEPALIVE_TIMEOUT_S)
    fresh = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, force_close=True)
    return UpstreamPool(session(pooled), session(fresh))

