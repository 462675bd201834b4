"""`streamtap serve`: start the proxy, print where it listens, stop cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import ipaddress
import signal
import sys
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web

from streamtap import __version__
from streamtap.proxy.serve.app import PROXY_KEY, build_app
from streamtap.proxy.config import Config
from streamtap.proxy.logs import configure_logging
from streamtap.proxy.export.otlp import ExportUnavailable, make_exporter
from streamtap.proxy.store import TraceStore

SHUTDOWN_GRACE_S = 5.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def banner(config: Config, port: int) -> str:
    host = config.host if ":" not in config.host else f"[{config.host}]"
    lines = [f"streamtap {__version__} listening on http://{host}:{port}",
             f"traces: {Path(config.trace_dir).resolve()}  (one folder per session)",
             "routes: point a client's base URL at the left column",]
    width = max(len(route.base_url(host, port)) for route in config.routes.values())
    for route in config.routes.values():
        lines.append(f"  {route.base_url(host, port):<{width}}  ->  "
                     f"{route.url}{route.example_suffix}")
    if not is_loopback(config.host):
        lines.append(f"WARNING: bound to {config.host}, not loopback: anyone who can reach this "
                     "port can use the API keys your clients send through it.")
    if config.export.otlp.url:
        parts = urlsplit(config.export.otlp.url)  # no user:password, no query: they may be keys
        lines.append(f"otlp: every record also goes as a span to {parts.scheme}://"
                     f"{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}")
    if config.capture_bodies:
        lines.append("WARNING: --capture-bodies is on: raw request and response bodies (prompts, "
                     "outputs, tool arguments) are written next to each trace record.")
    return "\n".join(lines)


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT/SIGTERM. Install it before listening: a supervisor may send
    SIGTERM as soon as it reads the banner."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows
            pass
    return stop


async def listen(runner: web.AppRunner, host: str, port: int) -> int | None:
    """Start listening; return the bound port, or None (said on stderr) if the port is taken."""
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        print(f"streamtap: cannot listen on {host}:{port}: {exc.strerror or exc} "
              "(choose another with --port)", file=sys.stderr)
        return None
    return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


async def serve(config: Config, ready: asyncio.Event | None = None) -> int:
    log = configure_logging(config.log_format)
    store = TraceStore(config.trace_dir, log)
    problem = store.check()
    if problem:
        log.error("trace_dir_unusable", problem=problem,
                  hint="traffic is still forwarded; records will fail until this is fixed")
    try:
        exporter = make_exporter(config.export.otlp, log,
                                 {name: route.url for name, route in config.routes.items()})
    except ExportUnavailable as exc:
        print(f"streamtap: {exc}", file=sys.stderr)
        store.close()
        return 2
    app = build_app(config, store, log, exporter)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None,
                           max_line_size=config.max_header_bytes,
                           max_field_size=config.max_header_bytes,
                           shutdown_timeout=SHUTDOWN_GRACE_S)
    await runner.setup()
    stop = stop_on_signals()
    port = await listen(runner, config.host, config.port)
    if port is None:
        await runner.cleanup()
        store.close()
        if exporter is not None:
            exporter.close()
        return 1
    print(banner(config, port), flush=True)
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("shutting_down", inflight=len(app[PROXY_KEY].inflight))
    await runner.cleanup()
    store.close()
    if exporter is not None:  # after the store: its last records are offered on the way out
        exporter.close()
    return 0


def run(config: Config) -> int:
    """Run `serve` on uvloop when it is installed and wanted, else on asyncio's loop."""
    factory = None
    if config.uvloop and sys.platform != "win32":
        try:
            import uvloop

            factory = uvloop.new_event_loop
        except ImportError:
            pass
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(serve(config))
