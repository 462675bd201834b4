"""`streamtap export`: trace records in a format other tools read. Each format is one function
`(records, out) -> None` in FORMATS; the command picks records and hands them over."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from streamtap import __version__
from streamtap.diagnostics.trace_record import TraceRecord
from streamtap.diagnostics.views.har import har_log
from streamtap.proxy.readout.tracedir import TraceError, read_record
from streamtap.proxy.readout.traces import read_index_since, record_path, select

Record = tuple[TraceRecord, Path]  # a record and the file it was read from


def _captured(record: TraceRecord, path: Path) -> dict[str, bytes] | None:
    """The bodies --capture-bodies wrote next to the record, if it was made with it."""
    if not record.capture:
        return None
    stem = path.name[:-len(".json")]
    bodies = {}
    for side in ("request", "response"):
        try:
            bodies[side] = (path.parent / f"{stem}.{side}.body").read_bytes()
        except OSError:
            bodies[side] = None
    return bodies


def write_har(records: list[Record], out: Path) -> None:
    document = har_log([(record, _captured(record, path)) for record, path in records],
                       __version__)
    out.write_text(json.dumps(document, indent=1))


FORMATS: dict[str, Callable[[list[Record], Path], None]] = {"har": write_har}


def export(fmt: str, trace_dir: str | Path, out: str | Path, *, session: str | None = None,
           failed: bool = False, since: str | None = None) -> int:
    listing, cutoff = read_index_since(Path(trace_dir), session, since)
    lines = select(listing, failed=failed, since=cutoff)
    records: list[Record] = []
    for line in reversed(lines):  # oldest first, as a browser lists requests
        try:
            path = record_path(line)
            records.append((read_record(path), path))
        except TraceError as exc:
            print(f"streamtap: skipped: {exc}", file=sys.stderr)
    FORMATS[fmt](records, Path(out))
    print(f"wrote {out}: {len(records)} request(s)", file=sys.stderr)
    return 0
