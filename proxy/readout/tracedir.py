"""The one reader of a trace folder: its session folders, the record files in them, one record
read and upgraded to the current schema, and `--since`, read the same way by every command.

Every consumer of records (ls and show, report, samples export, the OTLP backfill, the Python
API's `records()`) goes through here, so they find the same files and say the same thing about
one they cannot read: `PATH: why, and what to do`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

from streamtap.diagnostics.errors import UserError
from streamtap.diagnostics.record.schema import RecordVersionError, record_from_dict
from streamtap.diagnostics.trace_record import TraceRecord
from streamtap.proxy.config import Config

_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
SESSIONS_NAMED = 10  # sessions a "no such session" message lists


class TraceError(UserError, ValueError):
    """A trace dir, session or record that cannot be found or read; the message says what to
    do."""


class UnreadableRecord(TraceError):
    """One record file that cannot be read: `path`, and `why` (without the path)."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


# -- --since ---------------------------------------------------------------------------------
def parse_time(text: str) -> datetime | None:
    """An ISO 8601 time (a trailing Z allowed) as an aware datetime; without a zone it is UTC,
    as `started_at` in records is. None when it is not one."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """`--since` as every command reads it: `30m`, `1h`, `2d`, `1w` before `now`, or an ISO
    time. Raises TraceError saying how to write it."""
    match = _RELATIVE.fullmatch(text.strip())
    if match:
        now = now or datetime.now(timezone.utc)
        return now - timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    moment = parse_time(text)
    if moment is None:
        raise TraceError(f"--since {text!r} is neither a duration (30m, 1h, 2d) nor an ISO "
                         "time (2026-11-25T12:00:00Z)")
    return moment


def since_cutoff(text: str, now: datetime) -> str:
    """parse_since() as the ISO UTC string index times are compared with (as bytes, unparsed)."""
    moment = parse_since(text, now).astimezone(timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def started_since(record: TraceRecord, since: datetime | None) -> bool:
    """Whether a record started at or after `since` (no `since`: every record did); a record
    whose start cannot be read never did."""
    if since is None:
        return True
    started = parse_time(record.started_at)
    return started is not None and started >= since


# -- folders and files -----------------------------------------------------------------------
def session_dirs(trace_dir: Path, session: str | None = None) -> list[Path]:
    """The session folders of a trace dir, by name (only `session`'s with one)."""
    if not trace_dir.is_dir():
        raise TraceError(f"trace dir {trace_dir} does not exist; pass --trace-dir DIR, the "
                         f"folder `streamtap serve` writes to (default {Config().trace_dir})")
    folders = sorted(path for path in trace_dir.iterdir() if path.is_dir())
    if session is None:
        return folders
    folder = trace_dir / session
    if not folder.is_dir():
        known = ", ".join(path.name for path in folders[:SESSIONS_NAMED]) or "none"
        raise TraceError(f"no session {session!r} in {trace_dir}; sessions there: {known}")
    return [folder]


def record_files(trace_dir: Path, session: str | None = None) -> list[Path]:
    """Every record file of a trace dir (one session's with `session`), oldest first within a
    session. A name starting with `.` is a record still being written (store.py renames it)."""
    files = []
    for folder in session_dirs(trace_dir, session):
        # Record names start with their UTC time, so a name sort is a time sort.
        files += sorted(path for path in folder.glob("*.json") if not path.name.startswith("."))
    return files


# -- records ---------------------------------------------------------------------------------
def read_record(path: Path) -> TraceRecord:
    """One record file, upgraded to the current schema and typed; UnreadableRecord says why
    not."""
    try:
        record = json.loads(path.read_bytes())
    except OSError as exc:
        raise UnreadableRecord(path, f"cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UnreadableRecord(path, f"not JSON ({exc}); a record half-written by a crash, or "
                                     "not ours") from None
    if not isinstance(record, dict) or "trace_id" not in record:
        raise UnreadableRecord(path, "not a streamtap trace record (no trace_id)")
    try:
        return record_from_dict(record)
    except RecordVersionError as exc:
        raise UnreadableRecord(path, str(exc)) from None


def read_records(files: list[Path]) -> Iterator[tuple[Path, TraceRecord | None, str | None]]:
    """`(path, record, None)` for each readable record, `(path, None, why)` for any other file:
    reading many never stops at one bad file."""
    for path in files:
        try:
            yield path, read_record(path), None
        except UnreadableRecord as exc:
            yield path, None, exc.why
