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
from streamtap.proxy.serve.refusals import ProxyRunner
from streamtap.proxy.config import DEFAULT_ROUTES, Config, Route
from streamtap.proxy.logs import configure_logging
from streamtap.proxy.store import TraceStore

SHUTDOWN_GRACE_S = 5.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def client_suffix(route: Route) -> str:
    """What a client's base URL adds after `/NAME`: the API version path its SDK expects
    (`/v1` for OpenAI-style SDKs), unless the route URL already ends with it."""
    default = DEFAULT_ROUTES.get(route.name)
    wanted = route.example_suffix or (default.example_suffix if default else "")
    if wanted and urlsplit(route.url).path.rstrip("/").endswith(wanted):
        return ""
    return wanted


def route_lines(routes: dict[str, Route], host: str, port: int) -> list[str]:
    """Three columns that cannot be misread: the name, the URL exactly as given, and the base
    URL a client needs. `/NAME/rest` goes to `URL/rest`, nothing added or removed."""
    rows = [("route", "upstream URL (as given)", "client base URL")]
    rows += [(route.name, route.url, f"http://{host}:{port}/{route.name}{client_suffix(route)}")
             for route in routes.values()]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    return [f"  {name:<{widths[0]}}  {url:<{widths[1]}}  {base}" for name, url, base in rows]


def fault_lines(rules) -> list[str]:
    if not rules:
        return ["faults: none armed"]
    lines = ["faults armed (streamtap will break matching requests on purpose):"]
    for rule in rules:
        match = " ".join(f"{key}={value}" for key, value in rule.match.items()) or "every request"
        times = f"{rule.times} time(s)" if rule.times else "every time"
        lines.append(f"  {rule.name}: {rule.action} at {rule.at}, {match}, {times}")
    return lines


def banner(config: Config, port: int) -> str:
    host = config.host if ":" not in config.host else f"[{config.host}]"
    lines = [f"streamtap {__version__} listening on http://{host}:{port}",
             f"traces: {Path(config.trace_dir).resolve()}  (one folder per session)",
             "routes: /NAME/rest goes to UPSTREAM_URL/rest, as is; a client needs its base URL",
             *route_lines(config.routes, host, port),
             *fault_lines(config.faults)]
    if not is_loopback(config.host):
        lines.append(f"WARNING: bound to {config.host}, not loopback: anyone who can reach this "
                     "port can use the API keys your clients send through it.")
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
    app = build_app(config, store, log)
    runner = ProxyRunner(app, app[PROXY_KEY], handler_cancellation=True, access_log=None,
                           max_line_size=config.max_header_bytes,
                           max_field_size=config.max_header_bytes,
                           shutdown_timeout=SHUTDOWN_GRACE_S)
    await runner.setup()
    stop = stop_on_signals()
    port = await listen(runner, config.host, config.port)
    if port is None:
        await runner.cleanup()
        store.close()
        return 1
    print(banner(config, port), flush=True)
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("shutting_down", inflight=len(app[PROXY_KEY].inflight))
    await runner.cleanup()
    store.close()
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
