"""`ls`, `show`, `stats`, `tail`, `report`, `export` and `demo`: reading what was recorded."""

from __future__ import annotations

import argparse
import sys

from streamtap.proxy.cli.flags import (one_trace_flags, session_and_since_flags, trace_dir_flag,
                                       trace_dir_of, trace_filter_flags)
from streamtap.proxy.config import default_of, default_proxy_url


def add_ls_command(commands) -> None:
    ls = commands.add_parser("ls", help="list recorded requests, newest first",
                             description="List recorded requests, newest first, from the "
                                         "index files only (fast over many records).")
    trace_dir_flag(ls)
    trace_filter_flags(ls)
    ls.add_argument("--last", type=int, metavar="N", help="at most N requests (default: 50 in "
                                                          "a table, all in JSON)")
    ls.add_argument("--format", choices=("table", "json"), default="table",
                    help="a table for people (default), or one JSON object per line for tools")
    ls.set_defaults(func=cmd_ls)


def cmd_ls(args: argparse.Namespace) -> int:
    from streamtap.proxy.readout.commands import ls

    return ls(trace_dir_of(args), session=args.session, failed=args.failed,
              since=args.since, last=args.last, fmt=args.format)


def add_show_command(commands) -> None:
    show = commands.add_parser("show", help="explain one recorded request",
                               description="The summary first, then the phase timeline, the "
                                           "frames over time, tool calls, the error, ids and "
                                           "the fault.")
    one_trace_flags(show)
    trace_dir_flag(show)
    show.set_defaults(func=cmd_show)


def cmd_show(args: argparse.Namespace) -> int:
    from streamtap.proxy.readout.commands import show

    if args.trace is None and not args.last:
        print("streamtap: name a trace (an id, a prefix of one, or a file) or pass --last",
              file=sys.stderr)
        return 2
    return show(trace_dir_of(args), args.trace, last=args.last,
                failed=args.failed)


def add_stats_command(commands) -> None:
    from streamtap.diagnostics.views.stats import GROUP_FIELDS

    stats = commands.add_parser("stats", help="failure rates per route, provider, model...",
                                description="Per group: requests, completed, each boundary's "
                                            "count and rate, the endings a client most likely "
                                            "took for success, what the client saw "
                                            "(client_sees), and time to headers, to first "
                                            "event, duration and longest silence at "
                                            "p50/p90/p99 (nearest rank). Reads the index files "
                                            "only.")
    trace_dir_flag(stats)
    session_and_since_flags(stats)
    stats.add_argument("--by", choices=tuple(GROUP_FIELDS), default="route",
                       help="what a row is (default route; upstream is the route's host:port)")
    stats.add_argument("--format", choices=("table", "json", "md"), default="table",
                       help="a table for people (default), JSON for tools, or Markdown")
    stats.set_defaults(func=cmd_stats)


def cmd_stats(args: argparse.Namespace) -> int:
    from streamtap.proxy.readout.stats import stats

    return stats(trace_dir_of(args), by=args.by, session=args.session, since=args.since,
                 fmt=args.format)


def add_tail_command(commands) -> None:
    tail = commands.add_parser("tail", help="follow a running proxy: one row per finished request",
                               description="Print one row per request as it finishes, from the "
                                           "proxy's /_streamtap/events stream. Ctrl-C stops.")
    tail.add_argument("--proxy", default=default_proxy_url(),
                      help="the streamtap to follow (default %(default)s)")
    tail.add_argument("--failed", action="store_true", help="only requests that did not end well")
    tail.set_defaults(func=cmd_tail)


def cmd_tail(args: argparse.Namespace) -> int:
    from streamtap.proxy.readout.follow import tail

    return tail(args.proxy, failed=args.failed)


def add_report_command(commands) -> None:
    report = commands.add_parser("report", help="write the traces as one self-contained HTML file",
                                 description="The live page's views as one HTML file (inline CSS "
                                             "and SVG, no network) to attach to a bug report.")
    trace_dir_flag(report)
    trace_filter_flags(report)
    report.add_argument("--last", type=int, metavar="N", help="at most the newest N requests")
    report.add_argument("-o", "--out", required=True, metavar="FILE", help="the HTML file")
    report.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from streamtap.proxy.readout.pages import report

    return report(trace_dir_of(args), args.out, session=args.session,
                  failed=args.failed, since=args.since, last=args.last)


def add_export_command(commands) -> None:
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
    trace_dir_flag(export)
    trace_filter_flags(export)
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
    from streamtap.proxy.readout.har_file import export

    return export(args.format, trace_dir_of(args), args.out,
                  session=args.session, failed=args.failed, since=args.since)


def add_demo_command(commands) -> None:
    demo = commands.add_parser("demo", help="see a diagnosis now: no API key, no network",
                               description="Replay the bundled corpus as a fake OpenAI behind a "
                                           "recording proxy, send four requests (one completes, "
                                           "three fail differently), print `ls` and `show`.")
    demo.add_argument("--keep", action="store_true",
                      help="keep running afterwards and print the live page's URL")
    demo.add_argument("--trace-dir", metavar="DIR",
                      help="where the records go, in session `demo` (default "
                           f"{default_of('trace_dir')}, where serve writes)")
    demo.add_argument("--port", type=int, default=0,
                      help="the proxy's port (default 0: a free one)")
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from streamtap.proxy.replay.demo import demo

    return demo(trace_dir_of(args), args.keep, args.port)
