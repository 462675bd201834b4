"""`streamtap serve`: start the proxy, print where it listens, stop cleanly on SIGINT/SIGTERM.

A second signal means "exit now": the records of finished exchanges are written, then the process
exits (status 0). The handlers stay until the process is gone, so a signal never kills it midway.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from streamtap import __version__
from streamtap.proxy.serve.app import PROXY_KEY, build_app
from streamtap.proxy.config import Config
from streamtap.proxy.logs import configure_logging
from streamtap.proxy.store import TraceStore

SHUTDOWN_GRACE_S = 5.0
# aiohttp's default accept queue is 128: a burst of new connections past it (hundreds of streams
# opening while the loop is busy) overflows it, and Linux drops connections the client already
# believes open (it sends its request, then gets a reset: no record, no answer). The kernel caps
# this at net.core.somaxconn.
LISTEN_BACKLOG = 2048


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def banner(config: Config, port: int, trace_problem: str | None = None) -> str:
    host = config.host if ":" not in config.host else f"[{config.host}]"
    lines = [f"streamtap {__version__} listening on http://{host}:{port}",
             f"traces: {Path(config.trace_dir).resolve()}  (one folder per session)",
             "routes: point a client's base URL at the left column",]
    if trace_problem:
        lines[1] = (f"traces: UNUSABLE: {trace_problem}; records will fail until this is fixed "
                    "(traffic is still forwarded; see GET /_streamtap/health)")
    width = max(len(route.base_url(host, port)) for route in config.routes.values())
    for route in config.routes.values():
        lines.append(f"  {route.base_url(host, port):<{width}}  ->  "
                     f"{route.url}{route.example_suffix}")
    if not is_loopback(config.host):
        lines.append(f"WARNING: bound to {config.host}, not loopback: anyone who can reach this "
                     "port can use the API keys your clients send through it.")
    if config.capture_bodies:
        lines.append("WARNING: --capture-bodies is on: raw request and response bodies (prompts, "
                     "outputs, tool arguments) are written next to each trace record.")
    return "\n".join(lines)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_on_signals(exit_now: Callable[[], None] | None = None) -> asyncio.Event:
    """An event set by SIGINT/SIGTERM; a second signal calls `exit_now` (by default, exits at
    once: there is nothing to write). Install it before listening: a supervisor may send SIGTERM
    as soon as it reads the banner."""
    if exit_now is None:
        def exit_now() -> None:
            _exit_now(0)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():
            exit_now()
        stop.set()

    for signum in STOP_SIGNALS:
        try:
            loop.add_signal_handler(signum, on_signal)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows
            pass
    return stop


def ignore_late_signals() -> None:
    """Everything is written and the process is on its way out: a late signal is ignored, so it
    can only end the way it is already ending (status 0).

    Left alone, the default action (death by the signal, status -15) comes back twice: when the
    loop closes, and when Python finalizes (it resets its own handlers to the default, but leaves
    SIG_IGN alone). The swap happens with the signals blocked, so there is no gap between."""
    loop = asyncio.get_running_loop()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        for signum in STOP_SIGNALS:
            try:
                loop.remove_signal_handler(signum)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows
                pass
            signal.signal(signum, signal.SIG_IGN)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _exit_now(status: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


async def listen(runner: web.AppRunner, host: str, port: int) -> int | None:
    """Start listening; return the bound port, or None (said on stderr) if the port is taken."""
    site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG)
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

    def exit_now() -> None:
        """A second SIGINT/SIGTERM: write the records of exchanges already finished, then go."""
        log.warning("exiting_now", reason="a second stop signal",
                    inflight=len(app[PROXY_KEY].inflight))
        store.close()
        _exit_now(0)
    app = build_app(config, store, log)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None,
                           max_line_size=config.max_header_bytes,
                           max_field_size=config.max_header_bytes,
                           shutdown_timeout=SHUTDOWN_GRACE_S)
    await runner.setup()
    stop = stop_on_signals(exit_now)
    port = await listen(runner, config.host, config.port)
    if port is None:
        await runner.cleanup()
        store.close()
        return 1
    print(banner(config, port, problem), flush=True)
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("shutting_down", inflight=len(app[PROXY_KEY].inflight))
    await runner.cleanup()
    store.close()
    ignore_late_signals()
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
