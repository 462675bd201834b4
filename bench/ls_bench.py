"""How long `streamtap ls` takes over a big trace directory: `python bench/ls_bench.py`.

Writes 100,000 index lines (spread over 20 sessions, no record files: ls never opens them) into a
temporary directory, then times `streamtap ls --last 20` and `ls --failed` as a user runs them, in
a fresh process each, and prints the wall time. Target: under a second.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SESSIONS = 20


def write_index(trace_dir: Path, lines: int) -> None:
    per_session = lines // SESSIONS
    for s in range(SESSIONS):
        folder = trace_dir / f"session-{s:02d}"
        folder.mkdir(parents=True)
        out = []
        for i in range(per_session):
            n = s * per_session + i
            ok = n % 7 != 0
            out.append(json.dumps({
                "schema_version": 1, "trace_id": f"{n:016x}",
                "started_at": f"2026-11-{1 + n % 25:02d}T{n % 24:02d}:{n % 60:02d}:{n % 59:02d}"
                              f".{n % 1000:03d}Z",
                "session_id": folder.name, "message_id": None, "route": "openai",
                "provider": "openai", "dialect": "openai-chat", "method": "POST",
                "path": "/v1/chat/completions", "model": "gpt-test", "status": 200,
                "downstream_status": 200, "ok": ok, "boundary": "none" if ok else "transport",
                "phase": "complete" if ok else "text", "ttfb_ms": 312.5, "duration_ms": 4021.7,
                "frames": 240, "fault": None, "file": f"20261125T000000.000-{n:016x}.json",
                "summary": "The openai stream completed normally: terminal `[DONE]` after 240 "
                           "frames." if ok else "The connection to openai was reset while the "
                           "model was writing its answer.",
            }, separators=(",", ":")))
        (folder / "index.jsonl").write_text("\n".join(out) + "\n")


def time_command(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "streamtap", *args], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace_dir = Path(tmp)
        write_index(trace_dir, args.lines)
        startup = time_command(["--help"])
        for flags in (["--last", "20"], ["--failed", "--last", "50"], ["--format", "json"]):
            elapsed = time_command(["ls", "--trace-dir", str(trace_dir), *flags])
            print(f"streamtap ls {' '.join(flags):<24} over {args.lines:,} index lines: "
                  f"{elapsed:.2f} s (of which {startup:.2f} s is starting Python and streamtap)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
