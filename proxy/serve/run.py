"""`streamtap serve`: start the proxy, print where it listens, stop cleanly on SIGINT/SIGTERM.

A second signal means "exit now": the exchanges in flight are ended at once and their records
written with the others, then the process exits (status 0); a third exits at once (forced.py).
The handlers stay until the process is gone, so a signal never kills it midway.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from aiohttp import web

from streamtap import __version__
from streamtap.proxy.serve.app import PROXY_KEY, build_app
from streamtap.proxy.serve.forced import (STOP_SIGNALS, exit_at_once_on_signal, exit_process,
                                           force_exit)
from streamtap.proxy.serve.runner import proxy_runner
from streamtap.proxy.config import DEFAULT_ROUTES, Config, Route, parse_listen
from streamtap.proxy.route_typos import typo_warnings
from streamtap.proxy.serve.metrics import METRICS_PATH, metrics_only_app
from streamtap.proxy.logs import configure_logging
from streamtap.diagnostics.views.genai_conventions import SEMCONV_OPT_IN_VARIABLE, V1_41
from streamtap.proxy.export.otlp import ExportUnavailable, make_exporter
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


def banner(config: Config, port: int, trace_problem: str | None = None,
           metrics_port: int | None = None, fast_path: str = "on") -> str:
    """What `serve` prints once listening. `fast_path`: aiohttp_hooks.FastPath.status()."""
    host = config.host if ":" not in config.host else f"[{config.host}]"
    lines = [f"streamtap {__version__} listening on http://{host}:{port}",
             f"traces: {Path(config.trace_dir).resolve()}  (one folder per session)",
             "routes: /NAME/rest goes to UPSTREAM_URL/rest, as is; a client needs its base URL",
             *route_lines(config.routes, host, port),
             *typo_warnings(config.routes),
             *fault_lines(config.faults),
             f"fast_path: {fast_path}"]
    if trace_problem:
        lines[1] = (f"traces: UNUSABLE: {trace_problem}; records will fail until this is fixed "
                    "(traffic is still forwarded; see GET /_streamtap/health)")
    if not is_loopback(config.host):
        lines.append(f"WARNING: bound to {config.host}, not loopback: anyone who can reach this "
                     "port can use the API keys your clients send through it.")
    if config.export.otlp.url:
        parts = urlsplit(config.export.otlp.url)  # no user:password, no query: they may be keys
        lines.append(f"otlp: every record also goes as a span to {parts.scheme}://"
                     f"{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}")
        if config.export.otlp.metrics_url:
            lines.append(f"otlp: metrics too, every {config.export.otlp.metrics_interval_ms} ms, "
                         "to /v1/metrics beside it")
        if config.export.otlp.semconv != V1_41.name:
            lines.append(f"otlp: GenAI names of the semantic-conventions-genai repository "
                         f"({SEMCONV_OPT_IN_VARIABLE}={config.export.otlp.semconv})")
    if metrics_port is not None:
        metrics_host = parse_listen("metrics_listen", config.metrics_listen)[0]
        metrics_host = metrics_host if ":" not in metrics_host else f"[{metrics_host}]"
        lines.append(f"metrics: http://{metrics_host}:{metrics_port}{METRICS_PATH} serves the "
                     "metrics and nothing else; anyone who can reach it reads the routes, models "
                     "and failure counts (no traces, no keys)")
    if config.capture_bodies:
        lines.append("WARNING: --capture-bodies is on: raw request and response bodies (prompts, "
                     "outputs, tool arguments) are written next to each trace record.")
    return "\n".join(lines)


def stop_on_signals(exit_now: Callable[[], None] | None = None) -> asyncio.Event:
    """An event set by SIGINT/SIGTERM; the second signal calls `exit_now` (by default, exits at
    once: there is nothing to write), once: what a third does is exit_now's to decide. Install it
    before listening: a supervisor may send SIGTERM as soon as it reads the banner."""
    if exit_now is None:
        def exit_now() -> None:
            exit_process(0)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    received = 0

    def on_signal() -> None:
        nonlocal received
        received += 1
        if received == 2:
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


async def listen(runner: web.AppRunner, host: str, port: int,
                 flag: str = "--port") -> int | None:
    """Start listening; return the bound port, or None (said on stderr) if the port is taken."""
    site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG)
    known = len(runner.addresses)  # of sites started before this one
    try:
        await site.start()
    except OSError as exc:
        print(f"streamtap: cannot listen on {host}:{port}: {exc.strerror or exc} "
              f"(choose another with {flag})", file=sys.stderr)
        return None
    return runner.addresses[known][1]  # this site's first socket


def app_runner(app: web.Application, config: Config) -> web.AppRunner:
    """The runner for the proxy's app (shared by `serve` and the Python API's Proxy): requests
    aiohttp refuses before a handler runs still get a record (runner.py)."""
    return proxy_runner(app, app[PROXY_KEY], handler_cancellation=True, access_log=None,
                        max_line_size=config.max_header_bytes,
                        max_field_size=config.max_header_bytes,
                        shutdown_timeout=SHUTDOWN_GRACE_S)


def ready_line(host: str, port: int) -> str:
    """The one JSON line `--ready-json` prints when listening, for a test runner to read."""
    shown = host if ":" not in host else f"[{host}]"
    return json.dumps({"url": f"http://{shown}:{port}", "port": port})


async def serve(config: Config, ready: asyncio.Event | None = None,
                ready_json: bool = False) -> int:
    log = configure_logging(config.log_format)
    forced = False

    def exit_now() -> None:
        """A second SIGINT/SIGTERM: end the exchanges in flight, write every record, then go."""
        nonlocal forced
        forced = True
        force_exit(app[PROXY_KEY], log)
    try:
        exporter = make_exporter(config.export.otlp, log,
                                 {name: route.url for name, route in config.routes.items()},
                                 label_values=config.metrics_label_values)
    except ExportUnavailable as exc:
        print(f"streamtap: {exc}", file=sys.stderr)
        return 2
    store, problem, app, runner = await open_proxy(config, log, exporter)
    if problem:
        log.error("trace_dir_unusable", problem=problem,
                  hint="traffic is still forwarded; records will fail until this is fixed")
    stop = stop_on_signals(exit_now)
    port = await listen(runner, config.host, config.port)
    metrics_runner = metrics_port = None
    if port is not None and config.metrics_listen:
        metrics_runner = web.AppRunner(metrics_only_app(app[PROXY_KEY].metrics), access_log=None)
        await metrics_runner.setup()
        metrics_port = await listen(metrics_runner,
                                    *parse_listen("--metrics-listen", config.metrics_listen),
                                    flag="--metrics-listen")
        if metrics_port is None:
            port = None
    if port is None:
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        await close_proxy(runner, store, exporter)
        return 1
    settle_garbage_collector()
    fast_path = app[PROXY_KEY].fast_path.status()
    if ready_json:  # stdout holds the one JSON line; the banner goes to stderr
        print(banner(config, port, problem, metrics_port, fast_path), file=sys.stderr,
              flush=True)
        print(ready_line(config.host, port), flush=True)
    else:
        print(banner(config, port, problem, metrics_port, fast_path), flush=True)
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("shutting_down", inflight=len(app[PROXY_KEY].inflight))
    if metrics_runner is not None:
        await metrics_runner.cleanup()

    def before_last_writes() -> None:
        if not forced:
            # The loop blocks while the last records are written: a second signal now changes
            # nothing (they are written, as it would have them), a third exits at once.
            exit_at_once_on_signal(store, log, spare=1)
    await close_proxy(runner, store, exporter, before_last_writes)
    ignore_late_signals()
    return 0


def settle_garbage_collector() -> None:
    """Once listening, put what start-up left alive (every module, class and function of
    streamtap and its libraries) out of the cyclic collector's reach. A full collection
    otherwise walks all of it with the event loop stopped: 60 ms measured under load, a gap in
    every stream open at the time that no provider caused (bench/variant.py `gc-unfrozen`)."""
    gc.collect()
    gc.freeze()


class OpenProxy(NamedTuple):
    store: TraceStore
    trace_problem: str | None  # why the trace dir is unusable (store.check()), or None
    app: web.Application
    runner: web.AppRunner


async def open_proxy(config: Config, log, exporter=None) -> OpenProxy:
    """The start-up `serve` and the Python API's Proxy share: the trace store (checked), the
    app and its runner, set up; listening (and what to do about an unusable trace dir) is the
    caller's."""
    store = TraceStore(config.trace_dir, log)
    try:
        problem = store.check()
        app = build_app(config, store, log, exporter)
        runner = app_runner(app, config)
        await runner.setup()
    except BaseException:
        store.close()  # its writer thread would outlive the failed start
        raise
    return OpenProxy(store, problem, app, runner)


async def close_proxy(runner: web.AppRunner, store: TraceStore, exporter=None,
                      before_last_writes: Callable[[], None] | None = None) -> None:
    """The shutdown both share: stop serving (exchanges in flight get SHUTDOWN_GRACE_S to end
    and hand their records over), write every record, then close the exporter (after the
    store: its last records are offered on the way out)."""
    await runner.cleanup()
    if before_last_writes is not None:
        before_last_writes()
    store.close()
    if exporter is not None:
        exporter.close()


def run(config: Config, ready_json: bool = False) -> int:
    """Run `serve` on uvloop when it is installed and wanted, else on asyncio's loop."""
    factory = None
    if config.uvloop and sys.platform != "win32":
        try:
            import uvloop

            factory = uvloop.new_event_loop
        except ImportError:
            pass
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(serve(config, ready_json=ready_json))
