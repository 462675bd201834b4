"""`streamtap ls` and `streamtap show`: plain functions the CLI calls with parsed values."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TextIO

from streamtap.diagnostics.views import text
from streamtap.diagnostics.views.model import build_view
from streamtap.proxy.readout.console import emit
from streamtap.proxy.readout.traces import (find_trace, public, read_index, read_index_since,
                                            select)

TABLE_ROWS = 50  # a table longer than a screen or two is read with --last or --format json


def ls(trace_dir: str | Path, *, session: str | None = None, failed: bool = False,
       since: str | None = None, last: int | None = None, fmt: str = "table",
       out: TextIO | None = None, now: datetime | None = None) -> int:
    out = out or sys.stdout
    listing, cutoff = read_index_since(Path(trace_dir), session, since, now)
    table_limit = last is None and fmt == "table"
    limit = TABLE_ROWS + 1 if table_limit else last
    lines = select(listing, failed=failed, since=cutoff, last=limit)
    if table_limit and len(lines) > TABLE_ROWS:
        lines = lines[:TABLE_ROWS]
        print(f"streamtap: showing the newest {TABLE_ROWS}; pass --last N for more",
              file=sys.stderr)
    if listing.skipped:
        print(f"streamtap: skipped {listing.skipped} unreadable index line(s)", file=sys.stderr)
    if fmt == "json":
        for line in lines:
            out.write(json.dumps(public(line)) + "\n")
        return 0
    if not lines:
        what = "failed requests" if failed else "requests"
        print(f"streamtap: no {what} recorded in {trace_dir}"
              + (f" since {since}" if since else ""), file=sys.stderr)
        return 0
    emit(text.ls_table(lines), out)
    return 0


def show(trace_dir: str | Path, ref: str | None, *, last: bool = False, failed: bool = False,
         out: TextIO | None = None) -> int:
    record = find_trace(Path(trace_dir), ref, last=last, failed=failed)
    emit(text.show(build_view(record)), out or sys.stdout)
    return 0


def failed_trace_ids(trace_dir: str | Path, session: str | None = None) -> list[str]:
    """The trace ids of failed requests, newest first."""
    return [line["trace_id"]
            for line in select(read_index(Path(trace_dir), session), failed=True)]
