"""Serving the metrics: `GET /_streamtap/metrics` behind the control API's guard, and the opt-in
metrics-only listener for a scraper on another host.

The listener is a separate aiohttp application on its own socket with one route, `GET /metrics`:
no forwarding, no control API, no traces, so opening it to a network exposes the counters and
nothing else (which still name routes, models and how often they fail: README says so).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from streamtap.proxy.export.prometheus import CONTENT_TYPE, PrometheusMetrics

METRICS_PATH = "/metrics"


def metrics_handler(metrics: PrometheusMetrics):
    async def handle_metrics(request: web.Request) -> web.Response:
        """The Prometheus text format of this proxy's own registry. Written on a worker thread:
        thousands of series take a few hundred ms to write, which the event loop (forwarding
        every stream) must not spend."""
        body = await asyncio.get_running_loop().run_in_executor(None, metrics.exposition)
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE
        return response
    return handle_metrics


def metrics_only_app(metrics: PrometheusMetrics) -> web.Application:
    """The listener's application: `GET /metrics` (and HEAD), a 404 for every other path."""
    app = web.Application(client_max_size=1024)
    app.router.add_get(METRICS_PATH, metrics_handler(metrics))
    return app
