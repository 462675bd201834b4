"""The load generator for bench/run.py: N concurrent SSE streams over raw asyncio sockets.

    python bench/client.py --port P --streams 200 --frames 200 --rate 50 [--stamps]
                           [--rss-pids 12,13] [--rss-mode open|long] [--timeout 120]

A separate process from the proxies, kept lean so it is never the bottleneck: hand-written
HTTP/1.1 (one POST per stream, `Connection: close`), a chunked-body decoder, and a frame scan
with `bytes.find`; uvloop when installed. It prints one JSON object on stdout:

- frames, bytes, streams ok/failed, wall time, and its own CPU time (to check it was not the
  bottleneck: `cpu_s / wall_s` well under 1);
- `frames_per_read`: stamped frames per socket read. About 1 for paced streams delivered as they
  were sent; above 1 when something upstream of the client (a saturated proxy) batched them;
- with `--stamps`: delivery latency of each stamped frame, receive time (`time.time_ns()` when the
  socket read returned) minus the stamp the upstream put in the frame, as percentiles in ms, for
  all frames (`latency`) and for the middle 80% of each stream (`latency_steady`: without the
  frames that share the loop with the starts and ends of the other streams), and as a histogram
  of frames per latency bucket (`latency_histogram`);
- with `--rss-pids`: the summed resident memory of those processes (the proxy and its workers),
  `open` mode: before the first connection and then every 0.5 s while all streams are open;
  `long` mode (one long stream): once the first 1% of the frames arrived and once all did.

Every stream and the whole run are bounded by `--timeout`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from array import array
from bisect import bisect_left

PREFIX = b'data: {"t":'
PLEN = len(PREFIX)
BODY = (b'{"model":"bench-model","stream":true,'
        b'"messages":[{"role":"user","content":"count to a large number"}]}')


def rss_kib(pids: list[int]) -> int | None:
    """Summed VmRSS of `pids` in KiB (None if none could be read)."""
    total, seen = 0, False
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"VmRSS:"):
                        total += int(line.split()[1])
                        seen = True
                        break
        except OSError:
            pass
    return total if seen else None


class Run:
    """Shared counters for all streams of one run."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.latencies = array("q")
        self.steady = array("q")  # frames past the first and before the last 10% of a stream
        edge = max(args.frames // 10, 1)
        self.steady_range = (edge, args.frames - edge)
        self.frames = 0
        self.bytes = 0
        self.reads = 0  # socket reads that carried body bytes
        self.ok = 0
        self.failed = 0
        self.errors: dict[str, int] = {}
        self.first_frame_streams = 0
        self.all_open = asyncio.Event()
        self.first_done = asyncio.Event()
        self.rss: dict[str, object] = {}
        self.pids = [int(p) for p in args.rss_pids.split(",") if p] if args.rss_pids else []
        self.long_marks: list[int] = []

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


class StreamClient(asyncio.Protocol):
    __slots__ = ("run", "request", "done", "transport", "head", "in_body", "chunked",
                 "chunk_left", "skip", "size_line", "tail", "frames", "bytes", "finished",
                 "got_first", "status", "nl", "t_sent", "t_end", "stamps")

    def __init__(self, run: Run, request: bytes, done: asyncio.Future):
        self.run = run
        self.request = request
        self.done = done
        self.transport = None
        self.head = b""
        self.in_body = False
        self.chunked = False
        self.chunk_left = 0
        self.skip = 0
        self.size_line = b""
        self.tail = b""
        self.frames = 0
        self.bytes = 0
        self.finished = False
        self.got_first = False
        self.status = 0
        self.nl = False  # count mode: the previous piece ended in LF
        self.t_sent = 0.0
        self.t_end = 0.0
        self.stamps = run.args.stamps

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.t_sent = time.perf_counter()
        transport.write(self.request)

    def connection_lost(self, exc) -> None:
        if not self.finished:
            if self.in_body and not self.chunked:  # close-delimited body: EOF is the end
                self.end(None)
            else:
                self.end(f"connection lost: {type(exc).__name__ if exc else 'EOF'}")

    def end(self, error: str | None) -> None:
        if self.finished:
            return
        self.finished = True
        self.t_end = time.perf_counter()
        expected = self.run.args.frames
        if error is None and self.frames != expected:
            error = f"got {self.frames} frames, expected {expected}"
        if error is None and self.status != 200:
            error = f"status {self.status}"
        if error is None:
            self.run.ok += 1
        else:
            self.run.failed += 1
            self.run.error(error)
        self.run.first_done.set()
        if self.transport is not None:
            self.transport.close()
        if not self.done.done():
            self.done.set_result(self)

    def data_received(self, data: bytes) -> None:
        now = time.time_ns()
        if not self.in_body:
            self.head += data
            cut = self.head.find(b"\r\n\r\n")
            if cut < 0:
                if len(self.head) > 65536:
                    self.end("response head too large")
                return
            head, data = self.head[:cut].decode("latin-1"), self.head[cut + 4:]
            self.head = b""
            self.in_body = True
            lines = head.split("\r\n")
            try:
                self.status = int(lines[0].split(" ", 2)[1])
            except (IndexError, ValueError):
                self.end("bad status line")
                return
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "transfer-encoding" and "chunked" in value.lower():
                    self.chunked = True
            if not data:
                return
        self.run.reads += 1
        if self.chunked:
            pieces = self.dechunk(data)
        else:
            pieces = (data,)
        for piece in pieces:
            self.scan(piece, now)
        if self.finished is False and self.chunk_left == -1:
            self.end(None)

    def dechunk(self, data: bytes) -> list[bytes]:
        out = []
        pos, size = 0, len(data)
        while pos < size:
            if self.chunk_left > 0:
                take = min(self.chunk_left, size - pos)
                out.append(data[pos:pos + take] if take != size else data)
                pos += take
                self.chunk_left -= take
                if self.chunk_left == 0:
                    self.skip = 2
            elif self.skip > 0:
                take = min(self.skip, size - pos)
                pos += take
                self.skip -= take
            elif self.chunk_left == -1:  # after the last chunk: trailers, ignored
                break
            else:
                nl = data.find(b"\n", pos)
                if nl < 0:
                    self.size_line += data[pos:]
                    break
                line = self.size_line + data[pos:nl]
                self.size_line = b""
                pos = nl + 1
                try:
                    n = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    self.end("bad chunk size")
                    return out
                self.chunk_left = n if n > 0 else -1
        return out

    def scan(self, piece: bytes, now: int) -> None:
        run = self.run
        self.bytes += len(piece)
        run.bytes += len(piece)
        if self.stamps:
            data = self.tail + piece if self.tail else piece
            start = 0
            find = data.find
            lat = run.latencies
            steady = run.steady
            lo, hi = run.steady_range
            index = self.frames
            count = 0
            while True:
                end = find(b"\n\n", start)
                if end < 0:
                    break
                if data.startswith(PREFIX, start):
                    value = now - int(data[start + PLEN:start + PLEN + 19])
                    lat.append(value)
                    if lo <= index + count < hi:
                        steady.append(value)
                    count += 1
                start = end + 2
            self.tail = data[start:] if start < len(data) else b""
        else:
            # Frames end in a blank line; only the [DONE] frame carries no stamp.
            count = piece.count(b"\n\n") + (1 if self.nl and piece[:1] == b"\n" else 0)
            self.nl = piece[-1:] == b"\n"
            if self.frames + count > run.args.frames:  # the [DONE] frame
                count = run.args.frames - self.frames
        if count:
            self.frames += count
            run.frames += count
            if not self.got_first:
                self.got_first = True
                run.first_frame_streams += 1
                if run.first_frame_streams == run.args.streams:
                    run.all_open.set()
            if run.args.rss_mode == "long" and run.pids:
                marks = run.long_marks
                if marks and self.frames >= marks[0]:
                    name = "start" if len(marks) == 2 else "end"
                    marks.pop(0)
                    run.rss[name] = rss_kib(run.pids)
                    run.rss[f"{name}_at_frame"] = self.frames


async def rss_sampler(run: Run) -> None:
    """`open` mode: sample every 0.5 s from the moment all streams are open until one ends."""
    await run.all_open.wait()
    samples = []
    while not run.first_done.is_set():
        samples.append(rss_kib(run.pids))
        try:
            await asyncio.wait_for(run.first_done.wait(), 0.5)
        except asyncio.TimeoutError:
            pass
    samples = [s for s in samples if s is not None]
    if samples:
        run.rss["open_last"] = samples[-1]
        run.rss["open_max"] = max(samples)
        run.rss["open_samples"] = len(samples)


async def one_stream(run: Run, index: int, gate: asyncio.Semaphore) -> StreamClient | None:
    args = run.args
    loop = asyncio.get_running_loop()
    phase_us = int(index * 1e6 / args.rate / args.streams) if args.rate > 0 else 0
    query = f"n={args.frames}&rate={args.rate:g}&size={args.size}&phase_us={phase_us}"
    request = (f"POST {args.path}?{query} HTTP/1.1\r\nHost: 127.0.0.1:{args.port}\r\n"
               f"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
               f"Authorization: Bearer sk-bench-not-a-real-key\r\n"
               f"x-streamtap-session: bench\r\nContent-Length: {len(BODY)}\r\n"
               f"Connection: close\r\n\r\n").encode() + BODY
    done = loop.create_future()
    async with gate:
        try:
            await loop.create_connection(lambda: StreamClient(run, request, done),
                                         args.host, args.port)
        except OSError as exc:
            run.failed += 1
            run.error(f"connect: {type(exc).__name__}: {exc.strerror or exc}")
            run.first_done.set()
            return None
    return await done


# Upper edges (ms) of the delivery-latency histogram's buckets; the last bucket is open.
HISTOGRAM_EDGES_MS = (0.25, 0.5, 1, 2, 5, 10, 20, 50, 100)


def histogram(values: array) -> dict:
    """Frames per latency bucket (`<=1`: at most 1 ms, `>100`: the rest): where the tail sits,
    which percentiles alone do not show (a few 30 ms stalls against many 2 ms delays)."""
    edges_ns = [edge * 1e6 for edge in HISTOGRAM_EDGES_MS]
    counts = [0] * (len(edges_ns) + 1)
    for value in values:
        counts[bisect_left(edges_ns, value)] += 1
    labels = [f"<={edge:g}" for edge in HISTOGRAM_EDGES_MS] + [f">{HISTOGRAM_EDGES_MS[-1]:g}"]
    return dict(zip(labels, counts))


def percentiles(values: array) -> dict:
    if not values:
        return {}
    ordered = sorted(values)
    n = len(ordered)

    def pct(p: float) -> float:
        return round(ordered[min(n - 1, int(p / 100 * n))] / 1e6, 3)

    return {"n": n, "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99),
            "p999_ms": pct(99.9), "max_ms": round(ordered[-1] / 1e6, 3),
            "mean_ms": round(sum(ordered) / n / 1e6, 3)}


async def main_async(args: argparse.Namespace) -> dict:
    run = Run(args)
    if run.pids:
        run.rss["before"] = rss_kib(run.pids)
        if args.rss_mode == "long":
            run.long_marks = [max(min(1000, args.frames), args.frames // 100), args.frames]
    gate = asyncio.Semaphore(args.connect_concurrency)
    sampler = (asyncio.create_task(rss_sampler(run))
               if run.pids and args.rss_mode == "open" else None)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    tasks = [asyncio.create_task(one_stream(run, i, gate)) for i in range(args.streams)]
    timed_out = False
    try:
        done, pending = await asyncio.wait(tasks, timeout=args.timeout)
    finally:
        for task in tasks:
            task.cancel()
        if sampler is not None:
            run.first_done.set()
            sampler.cancel()
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    if pending:
        timed_out = True
        run.error(f"timeout after {args.timeout:g} s ({len(pending)} streams unfinished)")
        run.failed += len(pending)
    clients = [t.result() for t in done if not t.cancelled() and t.exception() is None
               and t.result() is not None]
    spans = [c.t_end - c.t_sent for c in clients if c.t_end]
    out = {
        "streams": args.streams, "frames_per_stream": args.frames, "rate": args.rate,
        "frame_size": args.size, "ok": run.ok, "failed": run.failed, "errors": run.errors,
        "timed_out": timed_out, "frames": run.frames, "bytes": run.bytes,
        "frames_per_read": round(run.frames / run.reads, 2) if run.reads else None,
        "wall_s": round(wall, 4), "stream_s_max": round(max(spans), 4) if spans else None,
        "cpu_s": round((cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime), 4),
        "latency": percentiles(run.latencies) if args.stamps else None,
        "latency_steady": percentiles(run.steady) if args.stamps else None,
        "latency_histogram": histogram(run.latencies) if args.stamps else None,
        "rss_kib": run.rss or None,
    }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/bench/v1/chat/completions")
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--frames", type=int, default=10, help="stamped frames per stream")
    parser.add_argument("--rate", type=float, default=0.0, help="frames/s per stream, 0 = unpaced")
    parser.add_argument("--size", type=int, default=300, help="approximate bytes per frame")
    parser.add_argument("--stamps", action="store_true", help="measure per-frame latency")
    parser.add_argument("--rss-pids", default="", help="comma-separated pids to sample RSS of")
    parser.add_argument("--rss-mode", choices=("open", "long"), default="open")
    parser.add_argument("--connect-concurrency", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    if args.frames < 2 or args.streams < 1:
        parser.error("need --frames >= 2 and --streams >= 1")
    try:
        import uvloop
        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        out = runner.run(main_async(args))
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0 if out["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
