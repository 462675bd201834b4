"""Command-line parsing only: each command turns its flags into plain values and calls a function."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from dataclasses import replace

from streamtap import __version__
from streamtap.diagnostics.decode.triggers import TRIGGER_HELP
from streamtap.diagnostics.verdict.events import EVENT_KINDS
from streamtap.proxy.config import (Config, ConfigError, Export, check_url, load_file,
                                    otlp_from_env, parse_route_flag, validate)
from streamtap.proxy.faults.rules import ACTIONS

ACTION_HELP = {
    "reset": "TCP RST", "truncate": "FIN mid-body, no final chunk",
    "close": "clean end without the terminal event", "drop_terminal": "all but the terminal event",
    "stall": "stop forwarding", "error_chunk": "the dialect's error event in the stream",
    "http_error": "answer an HTTP error instead of the upstream", "delay": "add latency",
    "throttle": "limit bytes per second",
}
_NEGATIVE_NUMBER = re.compile(r"-\d+(\.\d*)?")


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
    serve.add_argument("--log-format", choices=("auto", "console", "json"),
                       help="one log line per request: console lines, JSON lines, or auto "
                            "(console on a terminal, JSON otherwise; the default)")
    serve.add_argument("--capture-bodies", action="store_true", default=None,
                       help="also write raw request/response bodies next to each record "
                            "(local debugging only: they hold prompts and outputs)")
    serve.add_argument("--trace-header", action="store_true", default=None,
                       help="add x-streamtap-trace-id to every proxied response, so a client "
                            "can name its record")
    serve.add_argument("--connect-timeout-ms", type=int, metavar="MS",
                       help="give up connecting to an upstream after MS (default 30000; 0 = "
                            "wait forever)")
    serve.add_argument("--idle-timeout-ms", type=int, metavar="MS",
                       help="abort a stream after MS without a byte (0 = off)")
    serve.add_argument("--progress-timeout-ms", type=int, metavar="MS",
                       help="abort a stream after MS without model progress (0 = off)")
    serve.add_argument("--ready-json", action="store_true",
                       help="when listening, print one JSON line {\"url\": ..., \"port\": ...} "
                            "on stdout (the banner goes to stderr): for test runners, with "
                            "--port 0")
    serve.add_argument("--otlp-endpoint", metavar="URL",
                       help="also send every record as an OpenTelemetry span to this OTLP/HTTP "
                            "base URL (/v1/traces is appended); needs streamtap[otel]")
    serve.set_defaults(func=cmd_serve)


def config_from_args(args: argparse.Namespace) -> Config:
    """Defaults, then the config file, then the flags that were given."""
    base = replace(Config(), export=Export(otlp=otlp_from_env(os.environ)))
    config = load_file(args.config, base) if args.config else base
    flags = {name: getattr(args, name) for name in
             ("host", "port", "trace_dir", "session", "log_format", "capture_bodies",
              "trace_header")
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
    return run(config, ready_json=args.ready_json)


def _fault_parser(commands) -> None:
    fault = commands.add_parser("fault", help="arm, list and remove fault rules on a running "
                                              "proxy",
                                description="Arm, list and remove fault rules on a running "
                                            "`streamtap serve`, through its control API.")
    actions = fault.add_subparsers(dest="fault_command", metavar="ACTION", title="actions")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--proxy", default="http://127.0.0.1:8787",
                        help="the streamtap to talk to (default http://127.0.0.1:8787)")
    _fault_add_parser(actions, common)
    actions.add_parser("list", parents=[common], help="list rules: how often each fired, how "
                                                      "many fires remain, whether it is spent")
    remove = actions.add_parser("remove", parents=[common], help="remove one rule")
    remove.add_argument("name", help="the rule's name, as `fault list` shows it")
    actions.add_parser("clear", parents=[common], help="remove every rule, config rules too")
    fault.set_defaults(func=cmd_fault, help_of=fault)


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
                     help="an action parameter: status, style, type, code, message, "
                          "duration_ms, then, latency_ms, jitter_ms, per_frame, bytes_per_s, "
                          "mid_frame, retry_after (repeatable)")


def cmd_fault(args: argparse.Namespace) -> int:
    import json

    from streamtap.proxy.faults.client import ControlError, call, rule_from_flags
    from streamtap.proxy.faults.rules import FaultError

    if args.fault_command is None:
        args.help_of.print_help()
        return 2
    try:
        if args.fault_command == "add":
            rule = rule_from_flags(args.name, args.action, args.at, args.times,
                                   args.probability, args.seed, args.match, args.set)
            result = call(args.proxy, "POST", "faults?replace=1" if args.replace else "faults",
                          rule)
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
                    "where a stream broke.",
        epilog="`streamtap COMMAND --help` tells more about a command.")
    parser.add_argument("--version", action="version", version=f"streamtap {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    _serve_parser(commands)
    _fault_parser(commands)
    _samples_parser(commands)
    _replay_parser(commands)
    _ls_parser(commands)
    _show_parser(commands)
    _tail_parser(commands)
    _report_parser(commands)
    _export_parser(commands)
    _demo_parser(commands)
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def unknown_option(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """The first option the command does not have, with the closest one it does: argparse
    alone would say `unrecognized arguments` (or that a required option is missing)."""
    for token in argv:
        if token == "--":
            return None
        if not token.startswith("-") or _NEGATIVE_NUMBER.fullmatch(token):
            parser = _subcommands(parser).get(token, parser)
            continue
        flag = token.split("=", 1)[0]
        known = list(parser._option_string_actions)
        if flag in known or (flag.startswith("--") and
                             sum(option.startswith(flag) for option in known) == 1):
            continue  # argparse accepts an unambiguous abbreviation
        close = difflib.get_close_matches(flag, known, n=1)
        hint = f"did you mean `{close[0]}`?" if close else f"see `{parser.prog} --help`"
        return f"{parser.prog}: unknown option `{flag}`; {hint}"
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    problem = unknown_option(parser, argv)
    if problem:
        print(f"{problem}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130


def _samples_parser(commands) -> None:
    samples = commands.add_parser("samples", help="export content-free samples of recorded "
                                                  "streams, and compare providers")
    actions = samples.add_subparsers(dest="samples_command", metavar="ACTION", title="actions")
    export = actions.add_parser("export", help="turn trace records into sample files",
                                description="Sample files of recorded traces: timing, sizes, frame "
                                            "shapes and how the stream ended, never content. "
                                            "Requests streamtap answered itself are left out; "
                                            "runs of the same structure and ending make one "
                                            "sample (the median timing).")
    _trace_dir_flag(export)
    export.add_argument("--session", metavar="S", help="only this session's records")
    export.add_argument("--since", metavar="1h|ISO", help="only records started at or after "
                        "this time: 30m, 1h, 2d ago, or an ISO time (2025-06-01T12:00:00Z)")
    export.add_argument("--include-injected", action="store_true",
                        help="also export streams broken by streamtap's own fault injection")
    export.add_argument("-o", "--out", required=True, metavar="OUT",
                        help="folder for the sample files (created if missing)")
    matrix = actions.add_parser("matrix", help="one row per provider and dialect: what the "
                                               "samples show")
    matrix.add_argument("dirs", nargs="+", metavar="DIR", help="folders of *.sample.json files")
    matrix.add_argument("--format", choices=("table", "md", "json"), default="table",
                        help="table: one block per provider and dialect, for a terminal "
                             "(default); md: a markdown table; json: the rows as data")
    samples.set_defaults(func=cmd_samples, help_of=samples)


def cmd_samples(args: argparse.Namespace) -> int:
    import json

    from streamtap.diagnostics.samples.matrix import build_matrix, render_markdown
    from streamtap.diagnostics.samples.matrix_table import render_table

    from streamtap.proxy.replay.samplestore import ExportError, export_samples, load_samples

    if args.samples_command is None:
        args.help_of.print_help()
        return 2
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
    elif args.format == "md":
        print(render_markdown(rows), end="")
    else:
        print(render_table(rows), end="")
    return 0


def _replay_parser(commands) -> None:
    replay = commands.add_parser(
        "replay", help="serve samples as a fake provider",
        description="Serve samples as a fake provider: a request gets a sample's status, "
                    "headers, frames rebuilt from its shapes at its timing, and the same ending "
                    "(a reset is a reset, a stall lasts until the client leaves). By default a "
                    "request gets a complete sample of its dialect that matches its `stream` "
                    "flag; it gets another one when it names it (its `model`, or an "
                    "x-streamtap-sample header with a sample name or an ending), or with "
                    "--ending or --cycle.")
    replay.add_argument("targets", nargs="*", metavar="SAMPLE|DIR",
                        help="a *.sample.json file, or a folder of them (default: the starter "
                             "corpus that ships with streamtap)")
    replay.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    replay.add_argument("--port", type=int, default=8788,
                        help="port (default 8788; 0 picks a free one)")
    replay.add_argument("--speed", type=float, default=1.0,
                        help="timing factor: 2 plays twice as fast, 0.5 half as fast "
                             "(default 1.0)")
    replay.add_argument("--ending", default="complete", choices=(
        "complete", "terminal", "clean_close", "reset", "truncated", "stalled", "client_gone",
        "http_error", "no_response"),
        help="what a request gets unless it names a sample: a sample of its dialect and "
             "stream flag with this ending (default complete: ended normally, no error)")
    replay.add_argument("--cycle", "--loop", dest="cycle", action="store_true",
                        help="hand each request the next sample recorded for its path (else "
                             "its dialect), whatever its ending, round and round")
    replay.add_argument("--ready-json", action="store_true",
                        help="when listening, print one JSON line {\"url\": ..., \"port\": ...} "
                             "on stdout (the banner goes to stderr): for test runners, with "
                             "--port 0")
    replay.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from streamtap.proxy.replay.server import run

    return run(args.targets, args.host, args.port, args.speed, args.ending, args.cycle,
               args.ready_json)


def _trace_dir_flag(parser) -> None:
    parser.add_argument("--trace-dir", metavar="DIR",
                        help="where streamtap serve wrote records (default ./streamtap-traces)")


def _trace_filter_flags(parser) -> None:
    """The filters ls, report and export share, read by readout.traces the same way."""
    parser.add_argument("--session", metavar="S", help="only this session")
    parser.add_argument("--failed", action="store_true",
                        help="only requests that did not end well")
    parser.add_argument("--since", metavar="1h|ISO", help="only requests started since then "
                                                          "(30m, 1h, 2d, or an ISO time)")


def _ls_parser(commands) -> None:
    ls = commands.add_parser("ls", help="list recorded requests, newest first",
                             description="List recorded requests, newest first, from the "
                                         "index files only (fast over many records).")
    _trace_dir_flag(ls)
    _trace_filter_flags(ls)
    ls.add_argument("--last", type=int, metavar="N", help="at most N requests (default: 50 in "
                                                          "a table, all in JSON)")
    ls.add_argument("--format", choices=("table", "json"), default="table",
                    help="a table for people (default), or one JSON object per line for tools")
    ls.set_defaults(func=cmd_ls)


def cmd_ls(args: argparse.Namespace) -> int:
    from streamtap.proxy.readout.commands import ls

    return ls(args.trace_dir or Config().trace_dir, session=args.session, failed=args.failed,
              since=args.since, last=args.last, fmt=args.format)


def _show_parser(commands) -> None:
    show = commands.add_parser("show", help="explain one recorded request",
                               description="The summary first, then the phase timeline, the "
                                           "frames over time, tool calls, the error, ids and "
                                           "the fault.")
    show.add_argument("trace", nargs="?", metavar="TRACE_ID|FILE",
                      help="a trace id (a prefix is enough), or a record file")
    show.add_argument("--last", action="store_true", help="the newest request")
    show.add_argument("--failed", action="store_true", help="with --last: the newest failed one")
    _trace_dir_flag(show)
    show.set_defaults(func=cmd_show)


def cmd_show(args: argparse.Namespace) -> int:
    from streamtap.proxy.readout.commands import show

    if args.trace is None and not args.last:
        print("streamtap: name a trace (an id, a prefix of one, or a file) or pass --last",
              file=sys.stderr)
        return 2
    return show(args.trace_dir or Config().trace_dir, args.trace, last=args.last,
                failed=args.failed)


def _tail_parser(commands) -> None:
    tail = commands.add_parser("tail", help="follow a running proxy: one row per finished request",
                               description="Print one row per request as it finishes, from the "
                                           "proxy's /_streamtap/events stream. Ctrl-C stops.")
    tail.add_argument("--proxy", default="http://127.0.0.1:8787",
                      help="the streamtap to follow (default http://127.0.0.1:8787)")
    tail.add_argument("--failed", action="store_true", help="only requests that did not end well")
    tail.set_defaults(func=cmd_tail)


def cmd_tail(args: argparse.Namespace) -> int:
    from streamtap.proxy.readout.follow import tail

    return tail(args.proxy, failed=args.failed)


def _report_parser(commands) -> None:
    report = commands.add_parser("report", help="write the traces as one self-contained HTML file",
                                 description="The live page's views as one HTML file (inline CSS "
                                             "and SVG, no network) to attach to a bug report.")
    _trace_dir_flag(report)
    _trace_filter_flags(report)
    report.add_argument("--last", type=int, metavar="N", help="at most the newest N requests")
    report.add_argument("-o", "--out", required=True, metavar="FILE", help="the HTML file")
    report.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from streamtap.proxy.readout.pages import report

    return report(args.trace_dir or Config().trace_dir, args.out, session=args.session,
                  failed=args.failed, since=args.since, last=args.last)


def _export_parser(commands) -> None:
    export = commands.add_parser("export", help="write traces in a format other tools read",
                                 description="Write trace records for another tool: --har for a "
                                             "browser's network monitor, --otlp for a trace "
                                             "backend.")
    formats = export.add_mutually_exclusive_group(required=True)
    formats.add_argument("--har", dest="format", action="store_const", const="har",
                         help="HAR 1.2 (Firefox and Chrome import it); frames as "
                              "_eventSourceMessages holding shapes, never content")
    formats.add_argument("--otlp", dest="format", action="store_const", const="otlp",
                         help="as OpenTelemetry spans to an OTLP/HTTP backend, to backfill "
                              "(needs streamtap[otel])")
    _trace_dir_flag(export)
    _trace_filter_flags(export)
    export.add_argument("-o", "--out", metavar="FILE", help="the file to write (with --har)")
    from streamtap.proxy.export.backfill import add_otlp_export

    add_otlp_export(export)  # --otlp-endpoint, --config
    export.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    if args.format == "otlp":
        from streamtap.proxy.export.backfill import run_otlp_export

        return run_otlp_export(args)
    if not args.out:
        print("streamtap: --har writes a file: name it with -o FILE", file=sys.stderr)
        return 2
    from streamtap.proxy.readout.export import export

    return export(args.format, args.trace_dir or Config().trace_dir, args.out,
                  session=args.session, failed=args.failed, since=args.since)


def _demo_parser(commands) -> None:
    demo = commands.add_parser("demo", help="see a diagnosis now: no API key, no network",
                               description="Replay the bundled corpus as a fake OpenAI behind a "
                                           "recording proxy, send four requests (one completes, "
                                           "three fail differently), print `ls` and `show`.")
    demo.add_argument("--keep", action="store_true",
                      help="keep running afterwards and print the live page's URL")
    demo.add_argument("--trace-dir", metavar="DIR",
                      help="where the records go, in session `demo` (default "
                           "./streamtap-traces, where serve writes)")
    demo.add_argument("--port", type=int, default=0,
                      help="the proxy's port (default 0: a free one)")
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from streamtap.proxy.readout.demo import demo

    return demo(args.trace_dir or Config().trace_dir, args.keep, args.port)
