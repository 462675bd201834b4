"""How long `streamtap stats` takes over a big trace directory: `python bench/stats_bench.py`.

Writes 100,000 index lines as streamtap writes them (index_line() of real records, spread over 20
sessions, 3 routes and 6 models, with rare provider closes and terminals after an error; no record
files: stats never opens them) into a temporary directory, then times `streamtap stats` as a user
runs it, in a fresh process each, and prints the best wall and CPU time of `--repeat` runs.
Target: at most a second.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from streamtap.diagnostics.record.schema import index_line, record_from_dict
from streamtap.diagnostics.verdict.client_sees import judge

SESSIONS = 20
ROUTES = ("openai", "anthropic", "gateway")
MODELS = ("gpt-a", "gpt-b", "claude-a", "claude-b", "gemini-a", "llama-a")
# (one in N, boundary, phase, first evidence code, terminal, terminal after an error)
ENDINGS = ((577, "provider_close", "text", "clean_close", False, False),
           (911, "provider_error", "text", "wrapped_chunk", True, True),
           (97, "transport", "tool_input", "upstream_reset", False, False),
           (313, "client_abort", "text", "client_disconnected", False, False))


def record(n: int, session: str) -> dict:
    """A record with what index_line() reads, shaped like the recorder's."""
    boundary, phase, evidence, terminal, after_error = "none", "complete", "terminal_event", \
        True, False
    for every, *ending in ENDINGS:
        if n % every == 0:
            boundary, phase, evidence, terminal, after_error = ending
            break
    route = ROUTES[n % len(ROUTES)]
    headers = 150.0 + n % 400
    return {
        "schema_version": 1, "trace_id": f"{n:016x}", "session_id": session,
        "started_at": f"2026-11-{1 + n % 25:02d}T{n % 24:02d}:{n % 60:02d}:{n % 59:02d}"
                      f".{n % 1000:03d}Z",
        "message_id": None, "route": route, "provider": route, "dialect": "openai-chat",
        "dialect_source": "path", "upstream_url": f"https://{route}.example:443/v1/chat",
        "request": {"method": "POST", "path": "/v1/chat/completions",
                    "model": MODELS[n % len(MODELS)]},
        "response": {"status": 200}, "downstream": {"status": 200},
        "outcome": {"ok": boundary == "none", "boundary": boundary, "phase": phase,
                    "evidence": [evidence], "client_sees": judge(boundary, [evidence]),
                    "summary": f"The {route} stream ended ({boundary})."},
        "timeline": {"response_headers": headers, "first_byte": headers + 20,
                     "first_event": headers + 20, "terminal_event": 4000.0 if terminal else None,
                     "max_gap_ms": 300.0 + n % 700, "duration_ms": 4021.7 + n % 3000},
        "frames": [[4000.0, 14, "finish", 0]],
        "stream": {"frame_count": 240, "terminal": "[DONE]" if terminal else None,
                   "errors": [{"shape": "wrapped_chunk", "t_ms": 3900.0}] if after_error
                   else []},
        "fault": None,
    }


def write_index(trace_dir: Path, lines: int) -> None:
    per_session = max(lines // SESSIONS, 1)
    for s in range(SESSIONS):
        folder = trace_dir / f"session-{s:02d}"
        folder.mkdir(parents=True)
        out = [json.dumps(index_line(record_from_dict(record(n, folder.name)),
                                     f"{n:016x}.json"), separators=(",", ":"))
               for n in range(s * per_session, (s + 1) * per_session)]
        (folder / "index.jsonl").write_text("\n".join(out) + "\n")


def time_command(args: list[str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run: on a shared machine the CPU time
    says what the command costs, the wall time what a user waited."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "streamtap", *args], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per command; the best counts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace_dir = Path(tmp)
        write_index(trace_dir, args.lines)
        startup = min(time_command(["--help"]) for _ in range(args.repeat))
        for flags in (["--by", "route"], ["--by", "model", "--format", "json"]):
            wall, cpu = min(time_command(["stats", "--trace-dir", str(trace_dir), *flags])
                            for _ in range(args.repeat))
            print(f"streamtap stats {' '.join(flags):<26} over {args.lines:,} index lines: "
                  f"{wall:.2f} s wall, {cpu:.2f} s CPU (starting Python and streamtap: "
                  f"{startup[0]:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
