"""Every record under a trace dir, read whole and upgraded, for the commands that go through all
of them: samples export (proxy/replay/samplestore.py) and the OTLP backfill
(proxy/export/backfill.py). Reading never stops at one bad file: each is reported with why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from streamtap.diagnostics.record.schema import RecordVersionError, upgrade
from streamtap.proxy.readout.traces import TraceError, since_cutoff
from streamtap.diagnostics.errors import UserError


class ExportError(UserError, ValueError):
    """The export cannot start (no trace dir, bad --since, unwritable OUT); says what to do."""


def parse_since(text: str) -> datetime:
    """An ISO 8601 time; without a zone it is UTC (as `started_at` in records is)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ExportError(f"--since {text!r} is not an ISO 8601 time; write it like "
                          "2025-06-01T12:00:00Z or 2025-06-01") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def since_time(text: str) -> datetime:
    """--since as every command reads it: 30m, 1h or 2d ago, or an ISO time."""
    try:
        return parse_since(since_cutoff(text, datetime.now(timezone.utc)))
    except TraceError as exc:
        raise ExportError(str(exc)) from None


def record_files(trace_dir: Path, session: str | None = None) -> list[Path]:
    """Every `<session>/*.json` in a trace dir (one session's with `session`), oldest first."""
    if not trace_dir.is_dir():
        raise ExportError(f"trace dir {trace_dir} does not exist; pass the folder `streamtap "
                          "serve --trace-dir` wrote to (default ./streamtap-traces)")
    if session is not None:
        folder = trace_dir / session
        if not folder.is_dir():
            known = sorted(p.name for p in trace_dir.iterdir() if p.is_dir())[:10]
            raise ExportError(f"no session {session!r} in {trace_dir}; sessions there: "
                              f"{', '.join(known) or 'none'}")
        folders = [folder]
    else:
        folders = sorted(p for p in trace_dir.iterdir() if p.is_dir())
    files = []
    for folder in folders:
        # Record names start with their UTC time, so a name sort is a time sort.
        files += sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))
    return files


def read_records(files: list[Path]) -> Iterator[tuple[Path, dict | None, str | None]]:
    """`(path, record, None)` for each readable record, `(path, None, why)` for anything else."""
    for path in files:
        try:
            record = json.loads(path.read_bytes())
        except OSError as exc:
            yield path, None, f"cannot read it: {exc.strerror or exc}"
            continue
        except ValueError as exc:
            yield path, None, f"not JSON ({exc}); a record half-written by a crash, or not ours"
            continue
        if not isinstance(record, dict) or "trace_id" not in record:
            yield path, None, "not a streamtap trace record (no trace_id)"
            continue
        try:
            yield path, upgrade(record), None
        except RecordVersionError as exc:
            yield path, None, str(exc)


def started_since(record: dict, since: datetime | None) -> bool:
    """Whether a record started at or after `since` (no `since`: every record does); a record
    whose start cannot be read never did."""
    if since is None:
        return True
    try:
        started = parse_since(str(record.get("started_at")))
    except ExportError:
        return False
    return started >= since
