"""Regenerate the golden files of `ls`, `show` and `tail` output: `python tests/make_golden.py`.

The fixture trace directory (tests/tracefixtures.py) has one record per boundary; the goldens are
what a person sees for each. Read the diff by eye before committing it.
"""

from __future__ import annotations

import io
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamtap.diagnostics.views.text import plain, tail_row  # noqa: E402
from streamtap.proxy.readout import commands  # noqa: E402
from streamtap.proxy.readout.traces import public, read_index  # noqa: E402
from tests.tracefixtures import build  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "golden"
NOW = datetime(2026, 11, 25, 12, 10, 0, tzinfo=timezone.utc)


def _capture(function, *args, **kwargs) -> str:
    out = io.StringIO()  # not a TTY: plain text, as in a pipe
    assert function(*args, out=out, **kwargs) == 0
    return out.getvalue()


def render_all(trace_dir: Path) -> dict[str, str]:
    """File name -> text, for every golden file."""
    records = build(trace_dir)
    views = {
        "ls.txt": _capture(commands.ls, trace_dir),
        "ls_failed_since.txt": _capture(commands.ls, trace_dir, failed=True, since="5m", now=NOW),
        "ls_session_last.txt": _capture(commands.ls, trace_dir, session="beta", last=2),
    }
    for record in records:
        outcome = record["outcome"]
        name = f"show_{record['trace_id'][:2]}_{outcome['boundary']}.txt"
        views[name] = _capture(commands.show, trace_dir, record["trace_id"][:4])
    lines = reversed(read_index(trace_dir).lines)  # tail prints them as they finish
    views["tail.txt"] = plain([tail_row(public(line)) for line in lines])
    return views


def main() -> int:
    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        views = render_all(Path(tmp))
    for old in GOLDEN.glob("*.txt"):
        if old.name not in views:
            old.unlink()
    for name, text in views.items():
        (GOLDEN / name).write_text(text)
    print(f"wrote {len(views)} golden files to {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
