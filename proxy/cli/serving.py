"""`serve` and `fault`: running the proxy and arming its fault rules."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

from streamtap.diagnostics.faults.triggers import TRIGGER_HELP
from streamtap.diagnostics.dialects.events import EVENT_KINDS
from streamtap.proxy.config import (Config, ConfigError, Export, check_url, default_of,
                                    default_proxy_url, load_file, otlp_from_env,
                                    parse_route_flag, validate, check_layers)
from streamtap.diagnostics.faults.rules import ACTIONS


ACTION_HELP = {
    "reset": "TCP RST", "truncate": "FIN mid-body, no final chunk",
    "close": "clean end without the terminal event", "drop_terminal": "all but the terminal event",
    "stall": "stop forwarding", "error_chunk": "the dialect's error event in the stream",
    "http_error": "answer an HTTP error instead of the upstream", "delay": "add latency",
    "throttle": "limit bytes per second",
    "hold": "keep the connection open after the terminal event",
    "bad_chunk_size": "a malformed chunk-size line, then a FIN",
}


def add_serve_command(commands) -> None:
    serve = commands.add_parser("serve", help="run the recording proxy",
                                description="Run the recording reverse proxy. Flags override "
                                            "the config file, which overrides the defaults.")
    serve.add_argument("--config", metavar="FILE", help="TOML config (see config.example.toml)")
    # Each default shown is read from the config's one source (proxy/config.py), never restated.
    serve.add_argument("--host", help=f"bind address (default {default_of('host')})")
    serve.add_argument("--port", type=int, help=f"port (default {default_of('port')}; 0 picks a "
                                                "free one)")
    serve.add_argument("--trace-dir", metavar="DIR", help="where records go "
                                                         f"(default {default_of('trace_dir')})")
    serve.add_argument("--route", action="append", default=[], metavar="NAME=URL",
                       help="add or replace a route: /NAME/... is forwarded to URL/... "
                            "(repeatable)")
    serve.add_argument("--session", metavar="ID", help="session id for requests that name none "
                                                       f"(default \"{default_of('session')}\")")
    serve.add_argument("--log-format", choices=("auto", "console", "json"),
                       help="one log line per request: console lines, JSON lines, or auto: "
                            "console on a terminal, JSON otherwise (default "
                            f"{default_of('log_format')})")
    serve.add_argument("--capture-bodies", action="store_true", default=None,
                       help="also write raw request/response bodies next to each record "
                            "(local debugging only: they hold prompts and outputs)")
    serve.add_argument("--trace-header", action="store_true", default=None,
                       help="add x-streamtap-trace-id to every proxied response, so a client "
                            "can name its record")
    serve.add_argument("--answer-502-on-upstream-reset", action="store_true", default=None,
                       help="when an upstream resets the connection before any response byte, "
                            "answer 502 instead of resetting the client's connection too")
    serve.add_argument("--connect-timeout-ms", type=int, metavar="MS",
                       help="give up connecting to an upstream after MS (default "
                            f"{default_of('watchdog.connect_timeout_ms')}; 0 = wait forever)")
    serve.add_argument("--idle-timeout-ms", type=int, metavar="MS",
                       help="abort a stream after MS without a byte (default "
                            f"{default_of('watchdog.idle_timeout_ms')}; 0 = off)")
    serve.add_argument("--progress-timeout-ms", type=int, metavar="MS",
                       help="abort a stream after MS without model progress (default "
                            f"{default_of('watchdog.progress_timeout_ms')}; 0 = off)")
    serve.add_argument("--ready-json", action="store_true",
                       help="when listening, print one JSON line {\"url\": ..., \"port\": ...} "
                            "on stdout (the banner goes to stderr): for test runners, with "
                            "--port 0")
    serve.add_argument("--otlp-endpoint", metavar="URL",
                       help="also send every record as an OpenTelemetry span to this OTLP/HTTP "
                            "base URL (/v1/traces is appended); needs streamtap[otel]")
    serve.add_argument("--metrics-listen", metavar="HOST:PORT",
                       help="also serve GET /metrics (and nothing else) on this address, for a "
                            "Prometheus on another host; anyone who can reach it reads routes, "
                            "models and failure counts")
    serve.set_defaults(func=cmd_serve)


def config_from_args(args: argparse.Namespace) -> Config:
    """Defaults, then the config file, then the flags that were given."""
    base = replace(Config(), export=Export(otlp=otlp_from_env(os.environ)))
    config = load_file(args.config, base) if args.config else base
    flags = {name: getattr(args, name) for name in
             ("host", "port", "trace_dir", "session", "log_format", "capture_bodies",
              "trace_header", "metrics_listen", "answer_502_on_upstream_reset")
             if getattr(args, name) is not None}
    config = replace(config, **flags)
    if args.route:
        routes = dict(config.routes)
        for text in args.route:
            route = parse_route_flag(text)
            routes[route.name] = route
        config = replace(config, routes=routes)
    watchdog = {name: getattr(args, name) for name in
                ("connect_timeout_ms", "idle_timeout_ms", "progress_timeout_ms")
                if getattr(args, name) is not None}
    for name, value in watchdog.items():
        if value < 0:
            raise ConfigError(f"--{name.replace('_', '-')}", f"must be 0 or more, got {value}")
    if watchdog:
        config = replace(config, watchdog=replace(config.watchdog, **watchdog))
    if getattr(args, "otlp_endpoint", None):
        otlp = replace(config.export.otlp, endpoint=check_url("--otlp-endpoint",
                                                              args.otlp_endpoint),
                       traces_endpoint="")
        config = replace(config, export=Export(otlp=otlp))
    return check_layers(validate(config))


def cmd_serve(args: argparse.Namespace) -> int:
    from streamtap.proxy.serve.run import run

    return run(config_from_args(args), ready_json=args.ready_json)


def add_fault_command(commands) -> None:
    fault = commands.add_parser("fault", help="arm, list and remove fault rules on a running "
                                              "proxy",
                                description="Arm, list and remove fault rules on a running "
                                            "`streamtap serve`, through its control API.")
    actions = fault.add_subparsers(dest="fault_command", metavar="ACTION", title="actions")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--proxy", default=default_proxy_url(),
                        help="the streamtap to talk to (default %(default)s)")
    _fault_add_parser(actions, common)
    actions.add_parser("list", parents=[common], help="list rules: how often each fired, how "
                                                      "many fires remain, whether it is spent")
    remove = actions.add_parser("remove", parents=[common], help="remove one rule")
    remove.add_argument("name", help="the rule's name, as `fault list` shows it")
    actions.add_parser("clear", parents=[common], help="remove every rule, config rules too")
    # A rule refused (by the flags' check or by the proxy) exits 1, as it always has.
    fault.set_defaults(func=cmd_fault, help_of=fault, error_status=1)


def _fault_add_parser(actions, common: argparse.ArgumentParser) -> None:
    kinds = ", ".join(EVENT_KINDS)
    add = actions.add_parser(
        "add", parents=[common], help="arm a rule",
        description="Arm a fault rule on a running proxy. The next requests it matches are "
                    "broken on purpose, and their records say so (boundary `injected`).",
        epilog=f"event kinds for --at event:<kind>:<n>: {kinds}")
    add.add_argument("--action", required=True, metavar="ACTION",
                     help="what to do: " + "; ".join(f"{name} ({what})"
                                                     for name, what in ACTION_HELP.items()
                                                     if name in ACTIONS))
    add.add_argument("--name", help="the rule's name, unique among armed rules (default: the "
                                    "action, with a suffix such as `reset-2` if taken)")
    add.add_argument("--replace", action="store_true",
                     help="replace an armed rule of the same --name instead of refusing")
    add.add_argument("--at", help=f"trigger: {TRIGGER_HELP}; event kinds: {kinds} (default: "
                                  "first_progress; http_error at request, drop_terminal at "
                                  "terminal, delay at headers)")
    add.add_argument("--times", type=int, help="fire N times, then the rule is spent (default "
                                               "1; 0 = no limit); a request that never reaches "
                                               "the trigger does not count")
    add.add_argument("--probability", type=float,
                     help="chance from 0 to 1 that a matching request is broken (default 1)")
    add.add_argument("--seed", type=int, help="seed for --probability and jitter: the same "
                                              "seed breaks the same requests every run")
    add.add_argument("--match", action="append", default=[], metavar="KEY=GLOB",
                     help="route, path, model or session glob (repeatable; all must match)")
    add.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="an action parameter: status, style, type, code, message, body, "
                          "duration_ms, then, heartbeat_ms, latency_ms, jitter_ms, per_frame, "
                          "bytes_per_s, mid_frame, retry_after (repeatable)")


def cmd_fault(args: argparse.Namespace) -> int:
    import json

    from streamtap.proxy.faults.client import call, rule_from_flags

    if args.fault_command is None:
        args.help_of.print_help()
        return 2
    if args.fault_command == "add":
        rule = rule_from_flags(args.name, args.action, args.at, args.times,
                               args.probability, args.seed, args.match, args.set)
        result = call(args.proxy, "POST", "faults?replace=1" if args.replace else "faults", rule)
    elif args.fault_command == "list":
        result = call(args.proxy, "GET", "faults")
    elif args.fault_command == "remove":
        result = call(args.proxy, "DELETE", f"faults/{args.name}")
    else:
        result = call(args.proxy, "DELETE", "faults")
    print(json.dumps(result, indent=2))
    return 0
