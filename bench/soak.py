"""Soak: many concurrent streams through a real `streamtap serve`, for a bounded time, on loopback.

    python bench/soak.py [--seconds 60] [--streams 1000] [--seed 1]

Each stream is a client that loops until the time is up: an ordinary stream of one of five
dialects (OpenAI chat, Anthropic, OpenAI responses, Gemini, Ollama), often with a random fault
from the fault engine (a header rule, and an armed rule with a probability); or a hostile upstream
(one event that never ends, one huge line, a slow drip); or a client that never reads its reply.
A canary word rides in every place a secret or content can be (the API key, the query, the prompt,
the model's output): none may reach a record or the log.

It prints what it saw and exits 1 if an invariant fails: requests == records, no unhandled
exception in the proxy's log, no canary found, RSS at the end within 10% of the middle (in runs
of 30 s or more: a shorter one is still warming up at its middle).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile  # noqa: E402  (bench/hostile.py, next to this file)

CANARY = "zqxcanary7"  # a word no record, shape or log line may ever hold
DIALECT_PATHS = list(hostile.DIALECTS)
FAULTS = [
    "reset; at=events:{n}", "truncate; at=events:{n}", "close; at=first_progress",
    "error_chunk; at=events:{n}", "stall; at=events:{n}; duration_ms=300",
    "http_error; status=529", "delay; at=headers; latency_ms=50",
    "throttle; at=events:{n}; bytes_per_s=20000", "drop_terminal; at=terminal",
    "reset; at=bytes:{b}; mid_frame=true",
]
# What rises in the log when streamtap itself failed (never expected, whatever the traffic).
UNHANDLED_MARKS = ("Traceback", "proxy_internal_error", "record_failed", "trace_write_failed",
                   "Error handling request", "exception was never retrieved",
                   "record_log_failed")
LOG_EVERY_S = 10
FLAT_RSS_FROM_S = 30


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


class Tally:
    def __init__(self):
        self.attempts = 0
        self.sent = 0
        self.ids: list[str] = []
        self.errors: dict[str, str] = {}  # message id -> what the client got, when it failed
        self.connect_failed = 0
        self.kinds: dict[str, int] = {}
        self.client_errors = 0

    def count(self, kind: str) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1


def plan(rng: random.Random) -> dict:
    """One request: what to ask for, how to read it, and the fault header if any."""
    roll = rng.random()
    path = rng.choice(DIALECT_PATHS)
    query = {"kind": "stream", "words": rng.randint(5, 40), "ms": rng.choice((0, 5, 20, 50)),
             "text": CANARY, "api_key": CANARY}
    item = {"path": path, "query": query, "fault": None, "read": "all", "kind": "dialect"}
    if roll < 0.04:
        item.update(kind="endless", read="all")
        query.update(kind="endless", bytes=rng.choice((2, 4, 9)) * 1024 * 1024)
        path = item["path"] = "/v1/chat/completions"
    elif roll < 0.08:
        item.update(kind="huge_line", read="all")
        query.update(kind="huge_line", bytes=rng.choice((2, 4, 9)) * 1024 * 1024)
        item["path"] = "/v1/chat/completions"
    elif roll < 0.14:
        item.update(kind="slow_drip")
        query.update(ms=rng.choice((300, 600)), words=rng.randint(3, 8))
    elif roll < 0.19:
        item.update(kind="never_reads", read="never")
        query.update(kind="huge_line", bytes=4 * 1024 * 1024)
        item["path"] = "/v1/chat/completions"
    if item["kind"] in ("dialect", "endless", "huge_line") and rng.random() < 0.35:
        item["fault"] = rng.choice(FAULTS).format(n=rng.randint(1, 6), b=rng.randint(50, 900))
        item["kind"] += "+fault"
    return item


async def one_request(session: aiohttp.ClientSession, base: str, rng: random.Random,
                      tally: Tally, sessions: int) -> None:
    item = plan(rng)
    headers = {"authorization": f"Bearer sk-{CANARY}-0123456789abcdef",
               "x-streamtap-session": f"soak-{rng.randrange(sessions)}"}
    if item["fault"]:
        headers["x-streamtap-fault"] = item["fault"]
    # The record keeps it as message_id: a request without a record can be named.
    headers["x-streamtap-message"] = f"{item['kind'].replace('+', '_')}.{tally.attempts}"
    body = {"model": "soak-model", "stream": True,
            "messages": [{"role": "user", "content": f"say {CANARY} please"}]}
    tally.attempts += 1
    tally.count(item["kind"])
    try:
        async with session.post(base + item["path"], params=item["query"], json=body,
                                headers=headers) as response:
            if item["read"] == "never":
                await asyncio.sleep(rng.uniform(1.0, 3.0))  # hold it open, read nothing
                return
            async for _ in response.content.iter_any():
                pass
    except aiohttp.ClientConnectorError:
        tally.connect_failed += 1  # never reached streamtap: no record is owed
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        tally.client_errors += 1  # faults end streams badly on purpose
        tally.errors[headers["x-streamtap-message"]] = type(exc).__name__


async def client(base: str, seed: int, deadline: float, tally: Tally, sessions: int,
                 connector: aiohttp.BaseConnector) -> None:
    rng = random.Random(seed)
    timeout = aiohttp.ClientTimeout(total=30)
    sent = aiohttp.TraceConfig()

    async def headers_sent(_session, _ctx, params) -> None:
        tally.sent += 1  # the request reached streamtap's socket: a record is owed
        tally.ids.append(params.headers.get("x-streamtap-message"))

    sent.on_request_headers_sent.append(headers_sent)
    async with aiohttp.ClientSession(connector=connector, connector_owner=False,
                                     timeout=timeout, auto_decompress=False,
                                     trace_configs=[sent]) as session:
        await asyncio.sleep(rng.uniform(0, 1.0))  # do not all connect in the same millisecond
        while time.monotonic() < deadline:
            await one_request(session, base, rng, tally, sessions)


def start_proxy(trace_dir: Path, upstream: str, log_path: Path) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "streamtap", "serve", "--port", "0", "--trace-dir",
         str(trace_dir), "--log-format", "json", "--route", f"h={upstream}"],
        stdout=subprocess.PIPE, stderr=open(log_path, "wb"))
    for _ in range(20):
        line = process.stdout.readline().decode()
        if "listening on http://127.0.0.1:" in line:
            return process, int(line.rsplit(":", 1)[1])
    process.kill()
    raise SystemExit(f"streamtap did not start; see {log_path}")


def canaries_in(folder: Path, *extra: Path) -> int:
    found = 0
    needle = CANARY.encode()
    for path in [*folder.rglob("*"), *extra]:
        if path.is_file():
            found += path.read_bytes().count(needle)
    return found


async def soak(seconds: float, streams: int, seed: int, workdir: Path) -> dict:
    runner, upstream_port = await hostile.start()
    trace_dir, log_path = workdir / "traces", workdir / "proxy.log"
    proxy, port = start_proxy(trace_dir, f"http://127.0.0.1:{upstream_port}", log_path)
    base = f"http://127.0.0.1:{port}/h"
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    tally = Tally()
    try:
        async with aiohttp.ClientSession(connector=connector, connector_owner=False) as session:
            async with session.post(f"http://127.0.0.1:{port}/_streamtap/faults", json={
                    "name": "soak-random", "action": "reset", "at": "events:3",
                    "probability": 0.03, "seed": seed, "times": 0}) as armed:
                assert armed.status == 201, await armed.text()
            async with session.post(base + "/v1/chat/completions", json={"model": "warm"}) as r:
                await r.read()
        tally.attempts += 1  # the warm-up is a request too
        tally.sent += 1
        rss = {"start": rss_mib(proxy.pid)}
        started = time.monotonic()
        deadline = started + seconds
        workers = [asyncio.create_task(client(base, seed * 100_003 + i, deadline, tally,
                                              max(1, streams // 50), connector))
                   for i in range(streams)]
        next_log = started + LOG_EVERY_S
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            now = time.monotonic()
            if "middle" not in rss and now >= started + seconds / 2:
                rss["middle"] = rss_mib(proxy.pid)
            if now >= next_log:
                next_log += LOG_EVERY_S
                print(f"  {now - started:4.0f} s: {tally.attempts} requests, "
                      f"RSS {rss_mib(proxy.pid):.0f} MiB", flush=True)
        await asyncio.gather(*workers)
        rss["end"] = rss_mib(proxy.pid)
        rss["peak"] = rss_mib(proxy.pid, "VmHWM")
    finally:
        proxy.send_signal(signal.SIGTERM)
        status = proxy.wait(30)
        await connector.close()
        await runner.cleanup()
    record_files = [path for path in trace_dir.rglob("*.json") if not path.name.startswith(".")]
    records = len(record_files)
    seen = {json.loads(path.read_text()).get("message_id") for path in record_files}
    missing = sorted(set(tally.ids) - seen - {None})
    index_lines = sum(len(path.read_text().splitlines()) for path in trace_dir.rglob("index.jsonl"))
    log = log_path.read_text(errors="replace")
    unhandled = sum(1 for line in log.splitlines() if any(mark in line for mark in UNHANDLED_MARKS))
    return {"seconds": seconds, "streams": streams, "requests": tally.sent,
            "attempts": tally.attempts, "records": records, "index_lines": index_lines,
            "unhandled_exceptions": unhandled, "rss_mib": rss,
            "canaries_found": canaries_in(trace_dir, log_path), "exit_status": status,
            "connect_failed": tally.connect_failed, "client_errors": tally.client_errors,
            "kinds": dict(sorted(tally.kinds.items())),
            "without_record": [f"{name}({tally.errors.get(name, 'ok')})" for name in missing]}


def report(result: dict) -> list[str]:
    rss = result["rss_mib"]
    lines = [f"soak: {result['seconds']:g} s, {result['streams']} concurrent streams",
             f"requests: {result['requests']}",
             f"records: {result['records']}  (index lines: {result['index_lines']})",
             f"unhandled exceptions: {result['unhandled_exceptions']}",
             f"rss MiB: start {rss['start']:.1f} middle {rss['middle']:.1f} end {rss['end']:.1f} "
             f"(peak {rss['peak']:.1f})",
             f"canaries found: {result['canaries_found']}",
             f"proxy exit status: {result['exit_status']}",
             f"by kind: {json.dumps(result['kinds'])}",
             f"client-side errors (faults end streams on purpose): {result['client_errors']}; "
             f"connections refused: {result['connect_failed']}; requests never sent: "
             f"{result['attempts'] - result['requests']}"]
    return lines


def failures(result: dict) -> list[str]:
    rss = result["rss_mib"]
    problems = []
    if result["requests"] != result["records"] or result["records"] != result["index_lines"]:
        problems.append("requests, records and index lines differ; requests without a record "
                        f"(kind.number): {' '.join(result['without_record'][:20])}")
    if result["unhandled_exceptions"]:
        problems.append("unhandled exceptions in the proxy's log")
    if result["canaries_found"]:
        problems.append("a canary reached a record or the log")
    # A short run is still warming up at its middle (allocator arenas, pools): judged from 30 s.
    if result["seconds"] >= FLAT_RSS_FROM_S and rss["end"] > rss["middle"] * 1.10:
        problems.append("RSS grew more than 10% from the middle to the end")
    if result["exit_status"] != 0:
        problems.append("the proxy did not exit cleanly")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long (default 60)")
    parser.add_argument("--streams", type=int, default=1000,
                        help="concurrent streams (default 1000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", metavar="DIR", help="a new folder to keep the trace dir and "
                                                       "the proxy's log in (default: deleted)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.streams <= 0:
        parser.error("--seconds and --streams must be positive")
    if args.keep:  # to look at the records and the proxy's log afterwards
        Path(args.keep).mkdir(parents=True, exist_ok=False)
        result = asyncio.run(soak(args.seconds, args.streams, args.seed, Path(args.keep)))
    else:
        with tempfile.TemporaryDirectory(prefix="streamtap-soak-") as folder:
            result = asyncio.run(soak(args.seconds, args.streams, args.seed, Path(folder)))
    for line in report(result):
        print(line)
    problems = failures(result)
    for problem in problems:
        print(f"FAILED: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
