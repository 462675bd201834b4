"""`streamtap stats`: failure rates over a trace directory, from its index files alone.

Reads the index lines (proxy/readout/traces.py), hands each line's fields to the pure tally
(diagnostics/views/stats.py) and prints the table. A line that is no index line is counted and
named (file:line), never fatal.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TextIO

from streamtap.diagnostics.views import stats_text
from streamtap.diagnostics.views.stats import StatsTable, Tally
from streamtap.proxy.readout.console import emit
from streamtap.proxy.readout.traces import Listing, read_index_since, read_lines


def tally_listing(listing: Listing, by: str, cutoff: str | None = None) -> StatsTable:
    """The table of every index line started at or after `cutoff` (ISO, from since_cutoff)."""
    tally = Tally(by)
    add = tally.add
    by_session = by == "session"  # only then does an old line need its folder's name
    for values, folder in read_lines(listing, tally.reader.read, cutoff):
        add(values, folder.name if by_session else None)
    return tally.table()


def stats(trace_dir: str | Path, *, by: str = "route", session: str | None = None,
          since: str | None = None, fmt: str = "table", out: TextIO | None = None,
          now: datetime | None = None) -> int:
    out = out or sys.stdout
    listing, cutoff = read_index_since(Path(trace_dir), session, since, now, newest_first=False)
    table = tally_listing(listing, by, cutoff)
    if listing.skipped:
        named = "".join(f"\n  {line}" for line in listing.bad_lines)
        more = listing.skipped - len(listing.bad_lines)
        print(f"streamtap: skipped {listing.skipped} index line(s) that are not streamtap index "
              f"lines:{named}" + (f"\n  ... and {more} more" if more > 0 else ""),
              file=sys.stderr)
    if fmt == "json":
        out.write(json.dumps(stats_text.as_json(table, listing.bad_lines, listing.skipped))
                  + "\n")
        return 0
    if not table.total.requests:
        print(f"streamtap: no requests recorded in {trace_dir}"
              + (f" since {since}" if since else ""), file=sys.stderr)
        return 0
    if fmt == "md":
        out.write(stats_text.markdown(table))
    else:
        emit(stats_text.text_table(table), out)
    return 0
