"""`probe`: run a client command through every way a stream can end and grade what it did."""

from __future__ import annotations

import argparse
import json

from streamtap.diagnostics.probe.catalog import ALL_DIALECTS
from streamtap.proxy.cli.flags import trace_dir_flag, trace_dir_of
from streamtap.proxy.config import ConfigError


def add_probe_command(commands) -> None:
    probe = commands.add_parser(
        "probe", help="run your client through every way a stream can end, and grade it",
        usage="streamtap probe [OPTIONS] [--from DIR ...] -- CMD [ARGS...]",
        description="Runs CMD once on a complete stream (it must succeed), then once per ending "
                    "of the catalog, against a fake provider behind streamtap. CMD gets "
                    "OPENAI_BASE_URL (ending in /v1), ANTHROPIC_BASE_URL and STREAMTAP_BASE_URL; "
                    "{base_url} in ARGS becomes the one that fits the dialect. Grades: ok, "
                    "raised, recovered, SILENT (exit 0 although every request broke at the "
                    "wire), HUNG (killed at --timeout). Exit status 1 when a grade breaks its "
                    "expectation (or a grade pinned with --expect), 2 when the probe cannot run. "
                    "With --from, CMD meets `streamtap repro` folders' recorded failures "
                    "instead of the catalog.")
    probe.add_argument("--endings", metavar="A,B", help="only these endings (see --list)")
    probe.add_argument("--from", dest="from_dirs", action="append", metavar="DIR",
                       help="a `streamtap repro` folder: its recorded failure replaces the "
                            "catalog, graded as `repro:<trace id>`, and its dialect sets "
                            "--dialect (repeatable; one dialect per run)")
    probe.add_argument("--dialect", choices=ALL_DIALECTS,
                       help="the client's dialect (default: that of its first request)")
    probe.add_argument("--once", action="store_true",
                       help="apply each ending to the first request only, so a retry can "
                            "recover (default: every request)")
    probe.add_argument("--timeout", type=float, default=30.0, metavar="S",
                       help="seconds a run may take before it is killed and graded HUNG "
                            "(default %(default)g)")
    probe.add_argument("--format", choices=("table", "json", "md"), default="table",
                       help="table for a terminal (default), json (what --expect reads), md")
    probe.add_argument("--expect", metavar="FILE",
                       help="pinned grades: the JSON --format json prints, or a subset of its "
                            "endings; a grade other than the pinned one fails the run")
    probe.add_argument("--session", metavar="S",
                       help="session of the records (default probe-YYYYMMDD-HHMMSS)")
    probe.add_argument("--list", action="store_true", help="print the catalog and exit")
    trace_dir_flag(probe)
    probe.add_argument("command", nargs=argparse.REMAINDER, metavar="CMD",
                       help="the client command, after `--`")
    probe.set_defaults(func=cmd_probe)


def _catalog_lines(catalog) -> list[str]:
    lines = []
    for ending in catalog.endings:
        dialects = "all" if len(ending.dialects) == len(ALL_DIALECTS) else ",".join(ending.dialects)
        pending = f"  [{ending.pending}]" if ending.pending else ""
        lines.append(f"{ending.name:28} {dialects:46} {ending.made_by}\n"
                     f"{'':28} expect: {ending.expect.says}{pending}")
    return lines


def _pins(path: str | None) -> dict:
    from streamtap.diagnostics.probe.grade import pinned_grades

    if path is None:
        return {}
    try:
        with open(path) as handle:
            return pinned_grades(json.load(handle))
    except OSError as exc:
        raise ConfigError("--expect", f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # not JSON, or a PinError
        raise ConfigError("--expect", f"{path}: {exc}") from None


def cmd_probe(args: argparse.Namespace) -> int:
    from streamtap.diagnostics.probe.catalog import Catalog
    from streamtap.diagnostics.views.probe import markdown, text_table
    from streamtap.proxy.probe.repros import repro_rows
    from streamtap.proxy.probe.run import ProbeOptions, Probe

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    catalog, dialect = Catalog(), args.dialect
    if args.from_dirs:
        catalog, dialect = repro_rows(args.from_dirs, args.dialect)
    catalog = catalog.pick(args.endings.split(",") if args.endings else None)
    if args.list:
        print("\n".join(_catalog_lines(catalog)))
        return 0
    if not args.timeout > 0:
        raise ConfigError("--timeout", f"must be more than 0 seconds, got {args.timeout:g}")
    options = ProbeOptions(command, catalog, dialect, args.once, args.timeout,
                           trace_dir_of(args), args.session, _pins(args.expect),
                           dialect_named_by="" if args.dialect or not args.from_dirs
                           else "the repro folders")
    result = Probe(options).run()
    if args.format == "json":
        print(json.dumps(result.as_dict(), indent=2))
    else:
        print("\n".join(markdown(result) if args.format == "md" else text_table(result)))
    return 0 if result.passed else 1
