"""The HTML the proxy serves (the live page, one trace's section) and `streamtap report` writes:
reads index lines and records, hands them to the pure HTML views."""

from __future__ import annotations

import json
import secrets
import sys
from datetime import datetime, timezone
from pathlib import Path

from streamtap.diagnostics.views.html import render_page, render_trace
from streamtap.diagnostics.views.model import TraceView, build_view
from streamtap.diagnostics.views.probe import RESULT_FILE as PROBE_RESULT_FILE, report_section
from streamtap.proxy.readout.tracedir import TraceError, read_record, session_dirs
from streamtap.proxy.readout.traces import (Listing, find_trace, public, read_index,
                                            read_index_since, record_path, select)

PAGE_TRACES = 50  # traces the live page opens with; older ones are a `streamtap report` away


def _views(lines: list[dict]) -> tuple[list[dict], list[TraceView]]:
    """The lines whose record could be read, and their views (a record being written or
    removed is left out, not fatal)."""
    kept, views = [], []
    for line in lines:
        try:
            views.append(build_view(read_record(record_path(line))))
        except (TraceError, KeyError, ValueError):
            continue
        kept.append(public(line))
    return kept, views


def _probes(trace_dir: Path, session: str | None) -> list[dict]:
    """The latest probe run of each session (`streamtap probe` appends one JSON line per run to
    the session's probe.jsonl); a folder without one, or a line that is not JSON, adds nothing."""
    found = []
    for folder in sorted(session_dirs(trace_dir, session)):
        try:
            lines = (folder / PROBE_RESULT_FILE).read_text().splitlines()
            data = json.loads(lines[-1])
        except (OSError, ValueError, IndexError):
            continue
        if isinstance(data, dict):
            found.append(report_section(data))
    return found


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def live_page(trace_dir: Path, nonce: str) -> str:
    try:
        listing = read_index(trace_dir)
    except TraceError:
        listing = Listing()  # nothing recorded yet: the page fills as requests finish
    lines, views = _views(select(listing, last=PAGE_TRACES))
    return render_page(lines, views, title="streamtap: live", live=True, nonce=nonce,
                       generated_at=_now())


def trace_fragment(trace_dir: Path, trace_id: str) -> str | None:
    if not trace_id.isalnum():
        return None
    try:
        return render_trace(build_view(find_trace(trace_dir, trace_id)))
    except TraceError:
        return None


def report(trace_dir: str | Path, out: str | Path, *, session: str | None = None,
           failed: bool = False, since: str | None = None, last: int | None = None) -> int:
    """`streamtap report`: the page's views as one self-contained file."""
    listing, cutoff = read_index_since(Path(trace_dir), session, since)
    lines, views = _views(select(listing, failed=failed, since=cutoff, last=last))
    title = "streamtap report" + (f": session {session}" if session else "")
    html = render_page(lines, views, title=title, live=False, nonce=secrets.token_urlsafe(16),
                       generated_at=_now(), probes=_probes(Path(trace_dir), session))
    Path(out).write_text(html)
    print(f"wrote {out}: {len(views)} trace(s)", file=sys.stderr)
    return 0
