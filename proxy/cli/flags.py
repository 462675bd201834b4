"""Flags several commands share."""

from __future__ import annotations

from streamtap.proxy.config import Config, default_of


def trace_dir_flag(parser) -> None:
    parser.add_argument("--trace-dir", metavar="DIR", help="where streamtap serve wrote records "
                                                           f"(default {default_of('trace_dir')})")


def one_trace_flags(parser) -> None:
    """How show and repro name one trace, read by readout.traces.find_trace."""
    parser.add_argument("trace", nargs="?", metavar="TRACE_ID|FILE",
                        help="a trace id (a prefix is enough), or a record file")
    parser.add_argument("--last", action="store_true", help="the newest request")
    parser.add_argument("--failed", action="store_true",
                        help="with --last: the newest failed one")


def session_and_since_flags(parser) -> None:
    """--session and --since, read by readout.traces the same way for every command."""
    parser.add_argument("--session", metavar="S", help="only this session")
    parser.add_argument("--since", metavar="1h|ISO", help="only requests started since then "
                                                          "(30m, 1h, 2d, or an ISO time)")


def trace_filter_flags(parser) -> None:
    """The filters ls, report and export share."""
    session_and_since_flags(parser)
    parser.add_argument("--failed", action="store_true",
                        help="only requests that did not end well")


def trace_dir_of(args) -> str:
    """The folder --trace-dir names, else where `streamtap serve` writes by default."""
    return args.trace_dir or Config().trace_dir
