"""`samples`, `replay` and `repro`: content-free samples of recorded streams, served back as a fake
provider, and one recorded failure made a repeatable test."""

from __future__ import annotations

import argparse
import sys

from streamtap.proxy.cli.flags import one_trace_flags, trace_dir_flag, trace_dir_of
from streamtap.proxy.config import default_of


def add_samples_command(commands) -> None:
    samples = commands.add_parser("samples", help="export content-free samples of recorded "
                                                  "streams, and compare providers")
    actions = samples.add_subparsers(dest="samples_command", metavar="ACTION", title="actions")
    export = actions.add_parser("export", help="turn trace records into sample files",
                                description="Sample files of recorded traces: timing, sizes, "
                                            "frame shapes and how the stream ended, never "
                                            "content. "
                                            "Requests streamtap answered itself are left out; "
                                            "runs of the same structure and ending make one "
                                            "sample (the median timing).")
    trace_dir_flag(export)
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

    from streamtap.proxy.replay.sample_files import export_samples, load_samples

    if args.samples_command is None:
        args.help_of.print_help()
        return 2
    if args.samples_command == "export":
        summary = export_samples(trace_dir_of(args), args.out,
                                 session=args.session, since=args.since,
                                 include_injected=args.include_injected)
        for path, why in summary.unreadable:
            print(f"streamtap: skipped {path}: {why}", file=sys.stderr)
        for path in summary.written:
            print(path)
        print("; ".join(summary.lines()), file=sys.stderr)
        return 0
    samples, skipped = load_samples(args.dirs)
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


def add_replay_command(commands) -> None:
    replay = commands.add_parser(
        "replay", help="serve samples as a fake provider",
        description="Serve samples as a fake provider: a request gets a sample's status, "
                    "headers, frames rebuilt from its shapes at its timing, and the same ending "
                    "(a reset is a reset, a stall lasts until the client leaves). By default a "
                    "request gets the sample named as a file for its dialect, whatever its "
                    "ending; else a complete sample of its dialect that matches its `stream` "
                    "flag from the folders; it gets another one when it names it (its `model`, "
                    "or an x-streamtap-sample header with a sample name or an ending), or with "
                    "--ending or --cycle.")
    replay.add_argument("targets", nargs="*", metavar="SAMPLE|DIR",
                        help="a *.sample.json file or a `streamtap repro` folder (served to "
                             "its dialect whatever its ending), or a folder of samples (default: "
                             "the starter corpus that ships with streamtap)")
    # A default is stated once, in `default=`; the help shows it with %(default)s.
    replay.add_argument("--host", default=default_of("host"),
                        help="bind address (default %(default)s)")
    replay.add_argument("--port", type=int, default=8788,
                        help="port (default %(default)s; 0 picks a free one)")
    replay.add_argument("--speed", type=float, default=1.0,
                        help="timing factor: 2 plays twice as fast, 0.5 half as fast "
                             "(default %(default)s)")
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


def add_repro_command(commands) -> None:
    repro = commands.add_parser(
        "repro", help="turn one recorded failure into a repeatable test",
        description="Write a folder that reproduces one recorded stream: its content-free sample "
                    "(up to where it broke, ending the same way), repro.json (dialect, ending, "
                    "frame index, phase, byte offset, the original verdict), a pytest test and "
                    "a Node node:test file that serve it with `streamtap replay DIR` and check "
                    "that a client meets the same ending.")
    one_trace_flags(repro)
    trace_dir_flag(repro)
    repro.add_argument("-o", "--out", metavar="DIR",
                       help="the folder to write (default ./streamtap-repro-<trace id>)")
    repro.set_defaults(func=cmd_repro)


def cmd_repro(args: argparse.Namespace) -> int:
    from streamtap.proxy.replay.repro import kit_file_names, write_repro

    if (args.trace is None) == (not args.last):
        print("streamtap: repro takes a TRACE_ID (a prefix is enough) or --last [--failed]; "
              "`streamtap ls --failed` lists the failures", file=sys.stderr)
        return 2
    folder, manifest = write_repro(trace_dir_of(args), args.trace, args.out,
                                   last=args.last, failed=args.failed)
    print(folder)
    where = (f"frame {manifest['frame_index']} of {manifest['frames']}, byte "
             f"{manifest['byte_offset']}, phase {manifest['phase'] or '-'}")
    print(f"repro of trace {manifest['trace_id']}: {manifest['dialect']}, ending "
          f"{manifest['ending']} at {where}", file=sys.stderr)
    for note in manifest["notes"]:
        print(f"note: {note}", file=sys.stderr)
    python_test, node_test = (folder / name for name in kit_file_names(manifest["trace_id"]))
    print(f"run it: pytest {python_test}  |  node --test {node_test}  |  "
          f"serve it: streamtap replay {folder}", file=sys.stderr)
    return 0
