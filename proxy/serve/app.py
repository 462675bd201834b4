"""Builds the aiohttp application: routes, the control namespace, the upstream client session and
the lifecycle (in-flight exchanges are finished and recorded at shutdown)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import aiohttp
from aiohttp import web

from streamtap.proxy.config import Config
from streamtap.proxy.serve.control import add_control_routes
from streamtap.proxy.faults.rules import FaultBook
from streamtap.proxy.serve.forward import Exchange, proxy_error_response
from streamtap.proxy.logs import canonical_fields
from streamtap.proxy.store import TraceStore

CONTROL_PREFIX = "/_streamtap/"
PROXY_KEY: web.AppKey["Proxy"] = web.AppKey("proxy")


class Proxy:
    """What every exchange shares: config, the pooled upstream session, the store, the log."""

    def __init__(self, config: Config, store: TraceStore, log, exporter=None):
        self.config = config
        self.store = store
        self.log = log
        self.exporter = exporter  # streamtap.proxy.export.otlp.OtlpExporter, or None
        self.session: aiohttp.ClientSession | None = None
        self.inflight: set[Exchange] = set()
        self.faults = FaultBook([replace(rule) for rule in config.faults])

    def log_exchange(self, record: dict) -> None:
        """Called on the store's thread once a record is finished (written or not)."""
        if self.exporter is not None:
            self.exporter.offer(record)
        outcome = record.get("outcome") or {}
        level = self.log.info if outcome.get("ok") else self.log.warning
        level("request", **canonical_fields(record))


def _trace_config() -> aiohttp.TraceConfig:
    """Connection timings for the timeline; the Exchange rides along as trace_request_ctx."""
    config = aiohttp.TraceConfig()

    async def connected(session, ctx, params) -> None:
        exchange = ctx.trace_request_ctx
        if exchange is not None:
            exchange.recorder.mark("upstream_connected", exchange.now())

    async def sent(session, ctx, params) -> None:
        exchange = ctx.trace_request_ctx
        if exchange is not None:
            # The last chunk of the body wins: the request is sent when all of it is.
            exchange.recorder.marks["request_sent"] = exchange.now()

    config.on_connection_create_end.append(connected)
    config.on_connection_reuseconn.append(connected)
    config.on_request_headers_sent.append(sent)
    config.on_request_chunk_sent.append(sent)
    return config


def _split_route(raw_path: str) -> tuple[str, str]:
    """`/NAME/rest?q` -> (`NAME`, `/rest?q`), the rest exactly as the client encoded it."""
    tail = raw_path[1:]
    cut = min((i for i in (tail.find("/"), tail.find("?")) if i >= 0), default=len(tail))
    return tail[:cut], tail[cut:]


async def handle_health(request: web.Request) -> web.Response:
    proxy = request.app[PROXY_KEY]
    return web.json_response({"status": "ok", "inflight": len(proxy.inflight),
                              "records_written": proxy.store.written,
                              "records_failed": proxy.store.failed,
                              **({"otlp": proxy.exporter.health()} if proxy.exporter else {})})


async def handle_control_unknown(request: web.Request) -> web.Response:
    return proxy_error_response(404, "streamtap_not_found",
                                f"no control endpoint {request.path}; see GET /_streamtap/health")


async def handle_forward(request: web.Request) -> web.StreamResponse:
    proxy = request.app[PROXY_KEY]
    name, rest = _split_route(request.raw_path)
    route = proxy.config.routes.get(name)
    if route is None:
        known = ", ".join(sorted(proxy.config.routes))
        return proxy_error_response(
            404, "streamtap_unknown_route",
            f"no route `{name}`: streamtap forwards only configured routes ({known}); add one "
            "with --route NAME=URL")
    return await Exchange(proxy, request, route, rest).run()


def build_app(config: Config, store: TraceStore, log, exporter=None) -> web.Application:
    proxy = Proxy(config, store, log, exporter)
    app = web.Application(client_max_size=config.max_request_body_bytes + 1)
    app[PROXY_KEY] = proxy

    async def upstream_session(app: web.Application) -> AsyncIterator[None]:
        connect_s = config.watchdog.connect_timeout_ms / 1000 or None
        proxy.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
            timeout=aiohttp.ClientTimeout(total=None, connect=connect_s),
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),  # never carry one client's cookies to another
            trust_env=False,
            trace_configs=[_trace_config()],
        )
        yield
        await proxy.session.close()

    async def finish_inflight(app: web.Application) -> None:
        """SIGINT/SIGTERM: end streams in flight now (recorded as proxy_shutdown)."""
        for exchange in list(proxy.inflight):
            exchange.interrupt("shutdown")
        for _ in range(200):
            if not proxy.inflight:
                break
            await asyncio.sleep(0.01)

    app.cleanup_ctx.append(upstream_session)
    app.on_shutdown.append(finish_inflight)
    app.router.add_get(CONTROL_PREFIX + "health", handle_health)
    add_control_routes(app, CONTROL_PREFIX, lambda request: request.app[PROXY_KEY].faults)
    app.router.add_route("*", CONTROL_PREFIX + "{tail:.*}", handle_control_unknown)
    app.router.add_route("*", "/{tail:.*}", handle_forward)
    return app
