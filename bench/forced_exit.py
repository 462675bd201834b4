"""A forced exit under load: N streams in flight through `streamtap serve`, half of them from
clients that read nothing, then two stop signals. How long until the process is gone, and did
every stream keep its record?

    python bench/forced_exit.py [--streams 1000] [--gap-ms G] [--timeout 60]

The upstream is bench/upstream.py, a paced OpenAI Chat stream (2 frames/s of ~300 B) that lasts
longer than the run. The clients are raw asyncio sockets in this process: the even ones read
everything, the odd ones send their request and never read (a 4 KiB receive buffer). Once the
proxy's health endpoint counts every stream in flight, the signals go:

- by default both at once: SIGTERM and SIGINT are sent while the proxy is stopped (SIGSTOP) and
  released together (SIGCONT), so the second finds every stream still in flight: the forced
  path at its heaviest. (Two SIGTERMs would merge into one while pending.)
- with `--gap-ms G`: two SIGTERMs G ms apart, as a user sends them; the first may then end some
  streams itself (evidence `proxy_shutdown`).

It prints one JSON object: seconds from the second signal to the exit (the issue's target is
under 1 s for 1,000 streams), the CPU seconds the proxy spent from the signals to its exit (what
a busy machine does not change), the exit status, records written and expected, and the records
by evidence. It exits 1 if a record is missing or the proxy's status is not 0. Loopback only; every
process it starts is stopped when it ends.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import BENCH, Processes, cpu_seconds, wait_listening  # noqa: E402  (bench/run.py)

STREAM_QUERY = "n=100000&rate=2&size=300"  # ~14 hours at 2 frames/s: in flight for the whole run
BODY = b'{"model":"bench-model","stream":true,"messages":[{"role":"user","content":"count"}]}'
SESSION = "forced-exit"
OPENING = 64  # connections opened at a time


def request_bytes() -> bytes:
    return (f"POST /bench/v1/chat/completions?{STREAM_QUERY} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n"
            f"x-streamtap-session: {SESSION}\r\n\r\n").encode() + BODY


async def read_all(reader: asyncio.StreamReader) -> None:
    try:
        while await reader.read(65536):
            pass
    except OSError:
        pass


async def open_streams(port: int, count: int) -> list[asyncio.StreamWriter]:
    """Every even stream reads all it gets; every odd one never reads a byte."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(OPENING)
    request = request_bytes()

    async def one(index: int) -> asyncio.StreamWriter:
        reading = index % 2 == 0
        sock = socket.socket()
        if not reading:  # set before connecting: a small fixed buffer, no autotuning
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        async with gate:
            await loop.sock_connect(sock, ("127.0.0.1", port))
            reader, writer = await asyncio.open_connection(sock=sock)
            writer.write(request)
        if reading:
            asyncio.ensure_future(read_all(reader))
        else:
            writer.transport.pause_reading()
        return writer

    return list(await asyncio.gather(*(one(index) for index in range(count))))


def inflight(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_streamtap/health",
                                timeout=10) as answer:
        return json.loads(answer.read())["inflight"]


async def wait_inflight(port: int, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (seen := inflight(port)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {seen} of {count} streams in flight after {timeout:g} s")
        await asyncio.sleep(0.1)


def stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def send_signals(pid: int, gap_ms: float | None) -> float:
    """The two signals; returns when the second one was sent (or released)."""
    if gap_ms is not None:
        os.kill(pid, signal.SIGTERM)
        time.sleep(gap_ms / 1000)
        os.kill(pid, signal.SIGTERM)
        return time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while not stopped(pid) and time.monotonic() < deadline:
        time.sleep(0.001)
    os.kill(pid, signal.SIGTERM)
    os.kill(pid, signal.SIGINT)
    released = time.monotonic()
    os.kill(pid, signal.SIGCONT)
    return released


def wait_exit(proc, timeout: float) -> tuple[int, float]:
    """Reap the process: its exit status and the CPU seconds it used in its whole life (what
    the exit cost does not depend on the machine's load, unlike its wall time)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            raise RuntimeError(f"the proxy did not exit within {timeout:g} s")
        time.sleep(0.001)


def records_by_evidence(folder: Path) -> Counter:
    found: Counter = Counter()
    for path in folder.glob("*.json"):
        evidence = json.loads(path.read_text())["outcome"]["evidence"]
        found[evidence[0] if evidence else "none"] += 1
    return found


async def measure(args: argparse.Namespace, work: Path, procs: Processes) -> dict:
    upstream_log = work / "upstream.log"
    upstream = procs.start([sys.executable, str(BENCH / "upstream.py"), "--port", "0"],
                           upstream_log)
    upstream_port = wait_listening(upstream, upstream_log, None)
    trace_dir = work / "traces"
    proxy_log = work / "proxy.log"
    proxy = procs.start([sys.executable, "-m", "streamtap", "serve", "--port", "0",
                         "--trace-dir", str(trace_dir), "--log-format", "json",
                         "--route", f"bench=http://127.0.0.1:{upstream_port}"], proxy_log)
    port = wait_listening(proxy, proxy_log, None)
    writers = await open_streams(port, args.streams)
    await wait_inflight(port, args.streams, args.timeout)
    cpu_before = cpu_seconds([proxy.pid])
    sent = send_signals(proxy.pid, args.gap_ms)
    status, cpu_after = wait_exit(proxy, args.timeout)
    took = time.monotonic() - sent
    for writer in writers:
        writer.transport.abort()
    found = records_by_evidence(trace_dir / SESSION)
    return {
        "streams": args.streams,
        "not_reading": args.streams // 2,
        "signals": ("SIGTERM and SIGINT at once" if args.gap_ms is None
                    else f"two SIGTERMs {args.gap_ms:g} ms apart"),
        "exit_status": status,
        "exit_s": round(took, 3),
        "exit_cpu_s": round(cpu_after - cpu_before, 3),
        "records_written": sum(found.values()),
        "records_expected": args.streams,
        "evidence": dict(found),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--gap-ms", type=float, default=None,
                        help="two SIGTERMs this far apart (default: SIGTERM and SIGINT at once)")
    parser.add_argument("--timeout", type=float, default=60.0, help="bound on each wait, in s")
    args = parser.parse_args()
    procs = Processes()
    try:
        with tempfile.TemporaryDirectory(prefix="streamtap-forced-exit-") as work:
            result = asyncio.run(measure(args, Path(work), procs))
    finally:
        procs.stop_all()
    print(json.dumps(result))
    complete = result["records_written"] == result["records_expected"]
    return 0 if complete and result["exit_status"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
