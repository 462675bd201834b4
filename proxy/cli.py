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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamtap",
        description="A flight recorder for LLM streams: a local reverse proxy that records "
                    "where a stream broke.")
    commands = parser.add_subparsers(dest="command", required=True)
    _serve_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
