"""Command-line parsing only: each command turns its flags into plain values and calls a function.

One module per family of commands; this one builds the parser, runs the command, and turns any
error streamtap raises on purpose (a StreamtapError) into one line and an exit status."""

from __future__ import annotations

import argparse
import difflib
import re
import sys

from streamtap import __version__
from streamtap.diagnostics.errors import STREAMTAP, UPSTREAM, USER, StreamtapError
from streamtap.proxy.cli.reading import (add_demo_command, add_export_command, add_ls_command,
                                          add_report_command, add_show_command,
                                          add_stats_command, add_tail_command)
from streamtap.proxy.cli.probe import add_probe_command
from streamtap.proxy.cli.serving import add_fault_command, add_serve_command, config_from_args
from streamtap.proxy.cli.workbench import (add_replay_command, add_repro_command,
                                            add_samples_command)

__all__ = ["build_parser", "config_from_args", "main", "unknown_option"]

_NEGATIVE_NUMBER = re.compile(r"-\d+(\.\d*)?")
# Exit status by whose fault an error is: 2 is the usage error (what the user gave is wrong),
# 1 a failure somewhere else. A command can set its own with `set_defaults(error_status=N)`.
EXIT_STATUS = {USER: 2, UPSTREAM: 1, STREAMTAP: 1}
BUG_HINT = ("this is a bug in streamtap, not in what you gave it: please report it with the "
            "command you ran and `streamtap --version`")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamtap",
        description="A flight recorder for LLM streams: a local reverse proxy that records "
                    "where a stream broke.",
        epilog="`streamtap COMMAND --help` tells more about a command.")
    parser.add_argument("--version", action="version", version=f"streamtap {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    add_serve_command(commands)
    add_fault_command(commands)
    add_samples_command(commands)
    add_replay_command(commands)
    add_probe_command(commands)
    add_repro_command(commands)
    add_ls_command(commands)
    add_show_command(commands)
    add_stats_command(commands)
    add_tail_command(commands)
    add_report_command(commands)
    add_export_command(commands)
    add_demo_command(commands)
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
    except StreamtapError as exc:
        return explain(exc, args)
    except KeyboardInterrupt:
        return 130


def explain(error: StreamtapError, args: argparse.Namespace) -> int:
    """Print a StreamtapError as one line (its message says what to do) and return the exit
    status: the command's own `error_status`, else the one for whose fault it is."""
    print(f"streamtap: {error}", file=sys.stderr)
    if error.fault == STREAMTAP:
        print(f"streamtap: {BUG_HINT}", file=sys.stderr)
    return getattr(args, "error_status", None) or EXIT_STATUS[error.fault]
