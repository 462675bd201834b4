"""Builds the aiohttp application: routes, the control namespace, the upstream client session and
the lifecycle (in-flight exchanges are finished and recorded at shutdown)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from urllib.parse import urlsplit
from pathlib import Path

import aiohttp
from aiohttp import web

from streamtap.proxy.config import Config
from streamtap.proxy.connection import aiohttp_hooks
from streamtap.proxy.serve.control import add_control_routes
from streamtap.proxy.serve.guard import guarded
from streamtap.proxy.serve.looplag import LoopLag
from streamtap.proxy.serve.metrics import metrics_handler
from streamtap.proxy.export.prometheus import PrometheusMetrics
from streamtap.diagnostics.faults.rules import FaultBook
from streamtap.proxy.serve.exchange import Exchange
from streamtap.proxy.serve.passthrough import proxy_error_response
from streamtap.proxy.serve.upstream import Attempt, UpstreamPool, open_pool
from streamtap.proxy.serve.refusals import refuse_unknown_route
from streamtap.diagnostics.record.schema import index_line
from streamtap.diagnostics.trace_record import TraceRecord
from streamtap.proxy.logs import canonical_fields
from streamtap.proxy.readout.routes import add_readout_routes
from streamtap.proxy.store import TraceStore

CONTROL_PREFIX = "/_streamtap/"
PROXY_KEY: web.AppKey["RunningProxy"] = web.AppKey("proxy")


class RunningProxy:
    """What every exchange of a running proxy shares (not the Python API's `streamtap.Proxy`,
    which starts one): config, the pooled upstream session, the store, the log."""

    def __init__(self, config: Config, store: TraceStore, log, exporter=None):
        self.config = config
        self.store = store
        self.log = log
        self.exporter = exporter  # streamtap.proxy.export.otlp.OtlpExporter, or None
        self.session: aiohttp.ClientSession | None = None
        self.upstream: UpstreamPool | None = None  # the pool, and its one retry (upstream.py)
        self.inflight: set[Exchange] = set()
        self.loop_lag = LoopLag()  # the event loop's own lateness, for each record's timeline
        self.warned_routes: set[str] = set()
        self.faults = FaultBook([replace(rule) for rule in config.faults],
                                routes=config.routes)
        self.feed = None  # the read-out feed (tail, the live page), set by build_app
        self.metrics = PrometheusMetrics(config.metrics_label_values)  # this proxy's registry
        # Which of aiohttp's private hooks are there: each missing one puts its part of the
        # proxy on aiohttp's public path, and the banner and health say so.
        self.fast_path = aiohttp_hooks.check()

    def warn_repeated_prefix(self, route, rest: str) -> None:
        """Once per route: every request through it would repeat the warning."""
        if route.name in self.warned_routes:
            return
        self.warned_routes.add(route.name)
        prefix = urlsplit(route.url).path.rstrip("/")
        self.log.warning("path_repeats_route_prefix", route=route.name, upstream=route.url,
                         forwarded=f"{prefix}{prefix}/...",
                         hint=f"the route URL already ends in {prefix}: point the client at "
                              f"{self.config.host}:PORT/{route.name} (no {prefix}), or drop "
                              f"{prefix} from the route URL")

    def finished(self, record: TraceRecord, path: Path | None = None) -> None:
        """Runs on the store's thread once the record is written: the log line, then the feed."""
        self.log_exchange(record, path)
        if self.feed is not None:
            self.feed.publish(index_line(record, path.name if path is not None else None))

    def log_exchange(self, record: TraceRecord, path: Path | None = None) -> None:
        """Runs on the store's thread once a record is finished (written or not)."""
        if self.exporter is not None:
            self.exporter.offer(record)
        level = self.log.info if record.outcome and record.outcome.ok else self.log.warning
        level("request", **canonical_fields(record, str(path) if path is not None else None))
        try:  # counted whether or not the record could be written: a broken trace dir is no reason
            self.metrics.observe(record)
        except Exception:  # a bug here must cost the metrics, never the log line or the feed
            self.log.exception("metrics_observe_failed", trace_id=record.trace_id)


def _trace_config() -> aiohttp.TraceConfig:
    """Connection timings for the timeline, told to the request's upstream.Attempt (its
    trace_request_ctx)."""
    config = aiohttp.TraceConfig()

    async def connected(session, ctx, params) -> None:
        if isinstance(ctx.trace_request_ctx, Attempt):
            ctx.trace_request_ctx.connected()

    async def sent(session, ctx, params) -> None:
        if isinstance(ctx.trace_request_ctx, Attempt):
            ctx.trace_request_ctx.sent()

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
    store = proxy.store.health()  # status, reason when degraded, records written and failed
    return web.json_response({**store, "inflight": len(proxy.inflight),
                              "fast_path": proxy.fast_path.status(),
                              "faults_armed": [rule.name for rule in proxy.faults.armed()],
                              **({"otlp": proxy.exporter.health()} if proxy.exporter else {})})


async def handle_control_unknown(request: web.Request) -> web.Response:
    return proxy_error_response(404, "streamtap_not_found",
                                f"no control endpoint {request.path}; see GET /_streamtap/health")


async def handle_forward(request: web.Request) -> web.StreamResponse:
    proxy = request.app[PROXY_KEY]
    name, rest = _split_route(request.raw_path)
    route = proxy.config.routes.get(name)
    if route is None:
        return refuse_unknown_route(proxy, request, name, rest)
    exchange = Exchange(proxy, request, route, rest)
    if repeats_route_prefix(route.url, rest):
        exchange.note("path_repeats_route_prefix")
        proxy.warn_repeated_prefix(route, rest)
    return await exchange.run()


def repeats_route_prefix(url: str, rest: str) -> bool:
    """`--route openai=http://host/v1` and a client base URL `.../openai/v1`: the upstream gets
    `/v1/v1/...`. True when the rest of the client's path starts with the route URL's own path,
    which the upstream path then holds twice."""
    prefix = urlsplit(url).path.rstrip("/")
    path = rest.split("?", 1)[0]
    return bool(prefix) and (path == prefix or path.startswith(prefix + "/"))


def build_app(config: Config, store: TraceStore, log, exporter=None) -> web.Application:
    proxy = RunningProxy(config, store, log, exporter)
    app = web.Application(client_max_size=config.max_request_body_bytes + 1)
    app[PROXY_KEY] = proxy

    async def upstream_session(app: web.Application) -> AsyncIterator[None]:
        connect_s = config.watchdog.connect_timeout_ms / 1000 or None
        proxy.upstream = open_pool(connect_s, [_trace_config()],
                                   relay_bodies=proxy.fast_path.body is None)
        proxy.session = proxy.upstream.session
        yield
        await proxy.upstream.close()

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
    # Every /_streamtap/ endpoint sits behind the one guard (proxy/serve/guard.py).
    app.router.add_get(CONTROL_PREFIX + "health", guarded(handle_health))
    app.router.add_get(CONTROL_PREFIX + "metrics", guarded(metrics_handler(proxy.metrics)))
    add_control_routes(app, CONTROL_PREFIX, lambda request: request.app[PROXY_KEY].faults)
    proxy.feed = add_readout_routes(app, guarded, trace_dir=config.trace_dir)
    app.router.add_route("*", CONTROL_PREFIX + "{tail:.*}", guarded(handle_control_unknown))
    app.router.add_route("*", "/{tail:.*}", handle_forward)
    return app
