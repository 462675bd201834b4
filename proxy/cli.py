"""Command-line parsing only: each command turns its flags into plain values and calls a function."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from streamtap.proxy.config import (Config, ConfigError, Export, check_url, load_file,
                                    otlp_from_env, parse_route_flag, validate)


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
    serve.add_argument("--otlp-endpoint", metavar="URL",
                       help="also send every record as an OpenTelemetry span to this OTLP/HTTP "
                            "base URL (/v1/traces is appended); needs streamtap[otel]")
    serve.set_defaults(func=cmd_serve)


def config_from_args(args: argparse.Namespace) -> Config:
    """Defaults, then the config file, then the flags that were given."""
    base = replace(Config(), export=Export(otlp=otlp_from_env(os.environ)))
    config = load_file(args.config, base) if args.config else base
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
    if getattr(args, "otlp_endpoint", None):
        otlp = replace(config.export.otlp, endpoint=check_url("--otlp-endpoint",
                                                              args.otlp_endpoint),
                       traces_endpoint="")
        config = replace(config, export=Export(otlp=otlp))
    return validate(config)


def cmd_serve(args: argparse.Namespace) -> int:
    from streamtap.proxy.serve.run import run

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

    from streamtap.proxy.faults.client import ControlError, call, rule_from_flags
    from streamtap.proxy.faults.rules import FaultError

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
    _samples_parser(commands)
    _replay_parser(commands)
    _export_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130


def _samples_parser(commands) -> None:
    samples = commands.add_parser("samples", help="export content-free samples of recorded "
                                                  "streams, and compare providers")
    actions = samples.add_subparsers(dest="samples_command", required=True)
    export = actions.add_parser("export", help="turn trace records into sample files",
                                description="One sample file per trace: timing, sizes, frame "
                                            "shapes and how the stream ended, never content. "
                                            "Identical samples are written once.")
    export.add_argument("--trace-dir", metavar="DIR",
                        help="where streamtap serve wrote records (default ./streamtap-traces)")
    export.add_argument("--session", metavar="S", help="only this session's records")
    export.add_argument("--since", metavar="ISO", help="only records started at or after this "
                                                       "time (e.g. 2025-06-01T12:00:00Z)")
    export.add_argument("--include-injected", action="store_true",
                        help="also export streams broken by streamtap's own fault injection")
    export.add_argument("-o", "--out", required=True, metavar="OUT",
                        help="folder for the sample files (created if missing)")
    matrix = actions.add_parser("matrix", help="one row per provider and dialect: what the "
                                               "samples show")
    matrix.add_argument("dirs", nargs="+", metavar="DIR", help="folders of *.sample.json files")
    matrix.add_argument("--format", choices=("md", "json"), default="md")
    samples.set_defaults(func=cmd_samples)


def cmd_samples(args: argparse.Namespace) -> int:
    import json

    from streamtap.diagnostics.samples.matrix import build_matrix, render_markdown

    from streamtap.proxy.replay.samplestore import ExportError, export_samples, load_samples

    try:
        if args.samples_command == "export":
            summary = export_samples(args.trace_dir or Config().trace_dir, args.out,
                                     session=args.session, since=args.since,
                                     include_injected=args.include_injected)
            for path, why in summary.unreadable:
                print(f"streamtap: skipped {path}: {why}", file=sys.stderr)
            for path in summary.written:
                print(path)
            print("; ".join(summary.lines()), file=sys.stderr)
            return 0
        samples, skipped = load_samples(args.dirs)
    except ExportError as exc:
        print(f"streamtap: {exc}", file=sys.stderr)
        return 2
    for path, why in skipped:
        print(f"streamtap: skipped {path}: {why}", file=sys.stderr)
    if not samples:
        print("streamtap: no samples found; export some with `streamtap samples export -o DIR`",
              file=sys.stderr)
        return 1
    rows = build_matrix(samples)
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    else:
        print(render_markdown(rows), end="")
    return 0


def _replay_parser(commands) -> None:
    replay = commands.add_parser(
        "replay", help="serve samples as a fake provider",
        description="Serve samples as a fake provider: a request gets a sample's status, "
                    "headers, frames rebuilt from its shapes at its timing, and the same ending "
                    "(a reset is a reset, a stall lasts until the client leaves). A request "
                    "picks the sample named by its `model`, else the next one for its path, "
                    "else for its dialect.")
    replay.add_argument("targets", nargs="+", metavar="SAMPLE|DIR",
                        help="a *.sample.json file, or a folder of them")
    replay.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    replay.add_argument("--port", type=int, default=8788,
                        help="port (default 8788; 0 picks a free one)")
    replay.add_argument("--speed", type=float, default=1.0,
                        help="timing factor: 2 plays twice as fast, 0.5 half as fast "
                             "(default 1.0)")
    replay.add_argument("--loop", action="store_true",
                        help="after the last sample for a path or dialect, start again at the "
                             "first (default: keep serving the last)")
    replay.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from streamtap.proxy.replay.server import run

    return run(args.targets, args.host, args.port, args.speed, args.loop)


def _export_parser(commands) -> None:
    from streamtap.proxy.export.backfill import add_otlp_export

    export = commands.add_parser("export", help="send recorded traces elsewhere",
                                 description="Send records already on disk to another tool.")
    formats = export.add_mutually_exclusive_group(required=True)
    formats.add_argument("--otlp", action="store_true",
                         help="as OpenTelemetry spans to an OTLP/HTTP backend (backfill; needs "
                              "streamtap[otel])")
    export.add_argument("--trace-dir", metavar="DIR",
                        help="where streamtap serve wrote records (default ./streamtap-traces)")
    export.add_argument("--session", metavar="S", help="only this session's records")
    export.add_argument("--since", metavar="ISO", help="only records started at or after this "
                                                       "time (e.g. 2025-06-01T12:00:00Z)")
    add_otlp_export(export)
    export.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from streamtap.proxy.export.backfill import run_otlp_export

    return run_otlp_export(args)
