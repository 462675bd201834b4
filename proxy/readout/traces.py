"""Reading a trace directory's index back: index lines for listing, and the one record a
listing or a trace id names (folders, record files and records come from tracedir.py).

Listing reads only `index.jsonl` files (one per session folder), never the records, so `ls`
stays fast over a hundred thousand requests. A broken line or an unreadable folder is skipped
and counted, never fatal: a trace directory is often written while it is read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from streamtap.diagnostics.record.index_fields import NotAnIndexLine, parse_index_line
from streamtap.diagnostics.trace_record import TraceRecord
from streamtap.diagnostics.verdict.client_sees import QUIET_FAILURES, listed_as_failed
from streamtap.proxy.readout.tracedir import TraceError, read_record, session_dirs, since_cutoff

T = TypeVar("T")
NAMED_BAD_LINES = 20  # unreadable index lines named (file:line); the rest are only counted


@dataclass
class Listing:
    """Index lines (newest first unless read in file order), still as bytes: only the ones a
    command shows get parsed."""

    # (time, line, dir, line number in the dir's index.jsonl)
    entries: list[tuple[bytes, bytes, Path, int]] = field(default_factory=list)
    skipped: int = 0  # lines that were not index lines (a write in progress, a bad edit)
    bad_lines: list[str] = field(default_factory=list)  # the first of them, `file:line: why`
    newest_first: bool = True  # entries sorted by time (else in the files' order)

    def skip(self, folder: Path, number: int, why: str) -> None:
        self.skipped += 1
        if len(self.bad_lines) < NAMED_BAD_LINES:
            self.bad_lines.append(f"{folder / 'index.jsonl'}:{number}: {why}")

    @property
    def lines(self) -> list[dict]:
        """Every line parsed (for the few callers that want them all)."""
        return select(self)


# Index lines are written by json.dumps with compact separators (proxy/store.py), so the time and
# the verdict can be read from the bytes; json.loads on every one of 100,000 lines would not fit
# in `ls`'s one second.
_STARTED = re.compile(rb'"started_at":\s*"([^"]*)"')
_OK = b'"ok":true'
# An ok line whose client was not told (silent truncation behind a 200) is still listed as failed.
_QUIET = re.compile(rb'"client_sees":"(?:' + b"|".join(q.encode() for q in QUIET_FAILURES) + rb')"')


def read_index(trace_dir: Path, session: str | None = None, newest_first: bool = True) -> Listing:
    """Every index line of the trace dir (or one session), unparsed; newest first unless the
    caller reads them all anyway (stats: sorting 100,000 lines costs a tenth of a second)."""
    listing = Listing()
    entries = listing.entries
    search = _STARTED.search
    for folder in session_dirs(trace_dir, session):
        try:
            data = (folder / "index.jsonl").read_bytes()
        except OSError:
            continue
        for number, raw in enumerate(data.splitlines(), 1):
            match = search(raw)
            if match is None:
                if raw.strip():
                    listing.skip(folder, number, "no started_at: not a streamtap index line")
                continue
            entries.append((match.group(1), raw, folder, number))
    listing.newest_first = newest_first
    if newest_first:
        entries.sort(key=lambda entry: entry[0], reverse=True)
    return listing


def read_lines(listing: Listing, read: Callable[[bytes], T], since: str | None = None,
               keep: Callable[[bytes], bool] | None = None) -> Iterator[tuple[T, Path]]:
    """Each line started at or after `since` (an ISO cutoff from since_cutoff()) that `keep`
    keeps, read by `read`, with its folder; a line `read` refuses (NotAnIndexLine) is skipped,
    counted and named."""
    cutoff = since.encode() if since is not None else None
    for started, raw, folder, number in listing.entries:
        if cutoff is not None and started < cutoff:
            if listing.newest_first:
                break  # everything after is older
            continue
        if keep is not None and not keep(raw):
            continue
        try:
            value = read(raw)
        except NotAnIndexLine as exc:
            listing.skip(folder, number, str(exc))
            continue
        yield value, folder


def read_index_since(trace_dir: Path, session: str | None, since: str | None,
                     now: datetime | None = None,
                     newest_first: bool = True) -> tuple[Listing, str | None]:
    """read_index(), and the ISO cutoff of a --since (None without one): what ls, stats and
    report start with. Raises TraceError for a bad --since or a missing trace dir."""
    cutoff = since_cutoff(since, now or datetime.now(timezone.utc)) if since else None
    return read_index(trace_dir, session, newest_first), cutoff


def select(listing: Listing, *, failed: bool = False, since: str | None = None,
           provider: str | None = None, last: int | None = None) -> list[dict]:
    """The newest-first index lines that pass the filters, parsed; `since` is an ISO cutoff
    from since_cutoff(). Lines that turn out not to be JSON are counted in `skipped`."""
    out = []
    keep = (lambda raw: _OK not in raw or _QUIET.search(raw) is not None) if failed else None
    for line, folder in read_lines(listing, parse_index_line, since, keep):
        if failed and not listed_as_failed(line):
            continue
        if provider is not None and line.get("provider", line.get("route")) != provider:
            continue
        # Index lines written before they named their session still list.
        line.setdefault("session_id", folder.name)
        line["_dir"] = folder
        out.append(line)
        if last is not None and len(out) >= last:
            break
    return out


def record_path(line: dict) -> Path:
    folder: Path = line["_dir"]
    if line.get("file"):
        return folder / line["file"]
    matches = sorted(folder.glob(f"*-{line['trace_id']}.json"))
    if not matches:
        raise TraceError(f"the record of trace {line['trace_id']} is missing from {folder}")
    return matches[-1]


def find_trace(trace_dir: Path, ref: str | None, *, last: bool = False,
               failed: bool = False) -> TraceRecord:
    """The record named by a file path, a trace id or an unambiguous prefix of one, or (with
    `last`) the newest one (the newest failed one with `failed`)."""
    if ref is not None and (ref.endswith(".json") or "/" in ref):
        return read_record(Path(ref))
    listing = read_index(trace_dir)
    if last or ref is None:
        chosen = select(listing, failed=failed, last=1)
        if not chosen:
            what = "failed trace" if failed else "trace"
            raise TraceError(f"no {what} in {trace_dir}")
        return read_record(record_path(chosen[0]))
    ref = ref.lower()
    needle = ref.encode()
    listing.entries = [entry for entry in listing.entries if needle in entry[1]]
    matches = [line for line in select(listing) if str(line["trace_id"]).startswith(ref)]
    if not matches:
        raise TraceError(f"no trace id starting with `{ref}` in {trace_dir}; `streamtap ls` "
                         "lists them")
    ids = sorted({line["trace_id"] for line in matches})
    if len(ids) > 1:
        raise TraceError(f"`{ref}` matches {len(ids)} traces ({', '.join(ids[:5])}"
                         f"{', ...' if len(ids) > 5 else ''}); give more characters")
    return read_record(record_path(matches[0]))


def public(line: dict) -> dict:
    """An index line without the reader's own bookkeeping, for --format json."""
    return {key: value for key, value in line.items() if not key.startswith("_")}
