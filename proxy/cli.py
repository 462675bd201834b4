"""Command-line parsing only: each command turns its flags into plain values and calls a function."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from .config import Config, ConfigError, load_file, parse_route_flag, validate


def _serve_parser(commands) -> None:
    serve = commands.add_parser("serve", help="run the recording proxy",
                                description="Run the recording reverse proxy. Flags override "
                                            "the config file, which overrides the defaults.")
    serve.add_argument("--config", metavar="FILE", help="TOML config (see config.example.toml)")
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8787; 0 picks a free one)")
    serve.add_argument("--trace-dir", metavar="DIR", help="where records go "
                                                         "(default ./streamtap-traces)")
    serve.add_argument("--route", action="append", default=[], metavar="NAME=URL",
                       help="add or replace a route: /NAME/... is forwarded to URL/... "
                            "(repeatable)")
    serve.add_argument("--session", metavar="ID", help="session id for requests that name none")
    serve.add_argument("--log-format", choices=("auto", "console", "json"))
    serve.add_argument("--capture-bodies", action="store_true", default=None,
                       help="also write raw request/response bodies next to each record "
                            "(local debugging only: they hold prompts and outputs)")
    serve.add_argument("--connect-timeout-ms", type=int, metavar="MS")
    serve.add_argument("--idle-timeout-ms", type=int, metavar="MS",
                       help="abort a stream after MS without a byte (0 = off)")
    serve.add_argument("--progress-timeout-ms", type=int, metavar="MS",
                       help="abort a stream after MS without model progress (0 = off)")
    serve.set_defaults(func=cmd_serve)


def config_from_args(args: argparse.Namespace) -> Config:
    """Defaults, then the config file, then the flags that were given."""
    config = load_file(args.config) if args.config else Config()
    flags = {name: getattr(args, name) for name in
             ("host", "port", "trace_dir", "session", "log_format", "capture_bodies")
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
    return validate(config)


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve import run

    try:
        config = config_from_args(args)
    except ConfigError as exc:
        print(f"streamtap: {exc}", file=sys.stderr)
        return 2
    return run(config)


def _fault_parser(commands) -> None:
    fault = commands.add_parser("fault", help="arm, list and remove fault rules on a running "
                                              "proxy")
    actions = fault.add_subparsers(dest="fault_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--proxy", default="http://127.0.0.1:8787",
                        help="the streamtap to talk to (default http://127.0.0.1:8787)")
    add = actions.add_parser("add", parents=[common], help="arm a rule")
    add.add_argument("--action", required=True)
    add.add_argument("--name")
    add.add_argument("--at", help="trigger: request, headers, first_progress, terminal, "
                                  "event:<kind>:<n>, events:<n>, bytes:<n>, ms:<n>")
    add.add_argument("--times", type=int, help="fire for the first N requests (default 1; 0 = "
                                               "no limit)")
    add.add_argument("--probability", type=float)
    add.add_argument("--seed", type=int)
    add.add_argument("--match", action="append", default=[], metavar="KEY=GLOB",
                     help="route, path, model or session glob (repeatable)")
    add.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="an action parameter: status, style, type, code, message, "
                          "duration_ms, then, latency_ms, jitter_ms, per_frame, bytes_per_s, "
                          "mid_frame, retry_after (repeatable)")
    actions.add_parser("list", parents=[common], help="list armed rules")
    remove = actions.add_parser("remove", parents=[common], help="remove one rule")
    remove.add_argument("name")
    actions.add_parser("clear", parents=[common], help="remove every rule, config rules too")
    fault.set_defaults(func=cmd_fault)


def cmd_fault(args: argparse.Namespace) -> int:
    import json

    from .control_client import ControlError, call, rule_from_flags
    from .faults import FaultError

    try:
        if args.fault_command == "add":
            rule = rule_from_flags(args.name, args.action, args.at, args.times,
                                   args.probability, args.seed, args.match, args.set)
            result = call(args.proxy, "POST", "faults", rule)
        elif args.fault_command == "list":
            result = call(args.proxy, "GET", "faults")
        elif args.fault_command == "remove":
            result = call(args.proxy, "DELETE", f"faults/{args.name}")
        else:
            result = call(args.proxy, "DELETE", "faults")
    except (ControlError, FaultError) as exc:
        print(f"streamtap: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamtap",
        description="A flight recorder for LLM streams: a local reverse proxy that records "
                    "where a stream broke.")
    commands = parser.add_subparsers(dest="command", required=True)
    _serve_parser(commands)
    _fault_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
