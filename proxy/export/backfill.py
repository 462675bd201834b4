"""`streamtap export --otlp`: re-send records already on disk as spans, so a team can backfill a
trace backend with what streamtap recorded before export was on (or while the backend was down).

Re-sent records keep their span and trace ids (derived from the record's trace id), so a backend
can tell a re-sent span from a new one.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from streamtap.proxy.config import (Config, ConfigError, check_url, load_file, otlp_from_env,
                                    Export)
from streamtap.proxy.export.otlp import OtlpExporter
from streamtap.proxy.logs import configure_logging
from streamtap.proxy.readout.tracedir import (parse_since, read_records, record_files,
                                              started_since)


def add_otlp_export(parser: argparse.ArgumentParser) -> None:
    """The OTLP-specific flags of `streamtap export` (the format flag `--otlp` itself is in the
    command's mutually exclusive format group)."""
    parser.add_argument("--otlp-endpoint", metavar="URL",
                        help="OTLP/HTTP base URL (/v1/traces is appended); default: "
                             "[export.otlp] in --config, then OTEL_EXPORTER_OTLP_ENDPOINT")
    parser.add_argument("--config", metavar="FILE",
                        help="TOML config whose [export.otlp] and [routes] to use")


def otlp_settings(args: argparse.Namespace, environ=os.environ) -> Config:
    """Defaults, OTEL_* variables, the config file, then --otlp-endpoint (as `serve` does)."""
    base = replace(Config(), export=Export(otlp=otlp_from_env(environ)))
    config = load_file(args.config, base) if getattr(args, "config", None) else base
    if getattr(args, "otlp_endpoint", None):
        otlp = replace(config.export.otlp, traces_endpoint="",
                       endpoint=check_url("--otlp-endpoint", args.otlp_endpoint))
        config = replace(config, export=Export(otlp=otlp))
    return config


def run_otlp_export(args: argparse.Namespace) -> int:
    """Send every record under --trace-dir (filtered by --session, --since) as a span. A bad
    flag, config or trace dir raises (a StreamtapError: the command line says it and exits 2)."""
    config = otlp_settings(args)
    if not config.export.otlp.url:
        raise ConfigError("--otlp-endpoint", "no OTLP endpoint: pass --otlp-endpoint URL "
                                             "(e.g. http://127.0.0.1:6006 for Phoenix), set "
                                             "[export.otlp] endpoint, or "
                                             "OTEL_EXPORTER_OTLP_ENDPOINT")
    since = parse_since(args.since) if getattr(args, "since", None) else None
    files = record_files(Path(args.trace_dir or Config().trace_dir),
                         getattr(args, "session", None))
    log = configure_logging("auto")
    exporter = OtlpExporter(config.export.otlp, log,
                            {name: route.url for name, route in config.routes.items()})
    timeout = config.export.otlp.timeout_ms / 1000 * 2 + 1
    offered = skipped = older = 0
    for path, record, why in read_records(files):
        if record is None:
            skipped += 1
            print(f"streamtap: skipped {path}: {why}", file=sys.stderr)
            continue
        if not started_since(record, since):
            older += 1
            continue
        exporter.offer_waiting(record, timeout)
        offered += 1
    exporter.flush(timeout * (offered // max(config.export.otlp.batch_size, 1) + 2))
    exporter.close()
    health = exporter.health()
    print(f"exported {health['exported']} of {offered} record(s) as spans; "
          f"{health['dropped']} dropped, {health['unmappable']} unmappable, "
          f"{older} older than --since, {skipped} unreadable file(s) skipped")
    if health["dropped"] or health["unmappable"]:
        why = health["last_error"] or "see above"
        print(f"streamtap: not every record reached the backend ({why}); check that it is up at that endpoint and run this again (spans keep "
              "their ids, so a backend can tell a re-sent span from a new one)",
              file=sys.stderr)
        return 1
    return 0

