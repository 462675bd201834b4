"""The fake SSE upstream for bench/run.py: a paced OpenAI-Chat-shaped stream, every frame stamped.

    python bench/upstream.py [--port 0]      # prints `listening on http://127.0.0.1:PORT`

Any path and method are accepted (a request body is read and ignored); the query says what to
send:

    n=FRAMES        frames carrying a stamp (default 10); a `data: [DONE]` frame follows them
    rate=HZ         frames per second for this stream; 0 = unpaced (as fast as the socket drains)
    size=BYTES      approximate size of each frame on the wire (default 300)
    phase_us=US     delay before the first frame, so concurrent streams are not phase-aligned

Each frame is `data: {"t":<time.time_ns() when it was written>,"id":...,"choices":[...]}\\n\\n`,
an OpenAI Chat Completions chunk (a role chunk, content chunks, a finish chunk) with the stamp as
its first key, so a receiver on the same machine reads the send time at a fixed offset. The stamp
is taken right before the frame is handed to the socket. Paced frames are scheduled on absolute
deadlines (no drift); unpaced frames are written in batches of 128 (one stamp per batch, so the
upstream is never what limits a proxy's throughput) and respect the transport's flow control, so
a slow reader slows the writer instead of growing a buffer.

HTTP/1.1 requests get a chunked, keep-alive response (the connection serves the next request);
HTTP/1.0 or `Connection: close` requests get a close-delimited body. Standard library only, on
uvloop when it is installed. Loopback only; stops on SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from urllib.parse import parse_qsl

MAX_FRAMES = 10_000_000  # a bound on any single stream, whatever the query says
MAX_HEAD = 64 * 1024
BATCH = 128  # unpaced frames per write

HEAD_CHUNKED = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"cache-control: no-cache\r\nx-request-id: req_bench\r\n"
                b"transfer-encoding: chunked\r\n\r\n")
HEAD_CLOSE = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
              b"cache-control: no-cache\r\nx-request-id: req_bench\r\nconnection: close\r\n\r\n")
PREFIX = b'data: {"t":'
# The envelope OpenAI sends; frames asked to be smaller than it get the compact one that
# compatible servers send (no id, object, created, model).
ENVELOPE = (b',"id":"chatcmpl-bench0001","object":"chat.completion.chunk","created":1700000000,'
            b'"model":"bench-model","system_fingerprint":"fp_bench"')
CHOICES = (b',"choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]}\n\n')
FULL_MIN_SIZE = 280
DONE = b"data: [DONE]\n\n"
STAMP_DIGITS = 19  # time.time_ns() has 19 digits until the year 2286


def templates(size: int) -> tuple[bytes, bytes, bytes]:
    """(role, content, finish): what follows the stamp in each kind of frame, the content one
    padded so that a frame is about `size` bytes."""
    envelope = ENVELOPE if size >= FULL_MIN_SIZE else b""
    role = envelope + CHOICES % (b'{"role":"assistant","content":""}', b"null")
    finish = envelope + CHOICES % (b"{}", b'"stop"')
    empty = envelope + CHOICES % (b'{"content":""}', b"null")
    pad = max(size - len(PREFIX) - STAMP_DIGITS - len(empty), 1)
    text = (b"lorem ipsum dolor sit amet " * (pad // 27 + 1))[:pad]
    return role, envelope + CHOICES % (b'{"content":"%s"}' % text, b"null"), finish


class Stream:
    """One response in progress on a connection."""

    def __init__(self, conn: "Conn", n: int, rate: float, size: int, phase_s: float,
                 chunked: bool):
        self.conn = conn
        self.n = n  # stamped frames: role + content + finish
        self.sent = 0
        self.rate = rate
        self.chunked = chunked
        self.role, self.tail, self.finish_tail = templates(size)
        self.loop = asyncio.get_running_loop()
        self.handle: asyncio.TimerHandle | asyncio.Handle | None = None
        self.start = self.loop.time() + phase_s

    def frame(self) -> bytes:
        i = self.sent
        self.sent += 1
        tail = self.role if i == 0 else self.finish_tail if i == self.n - 1 else self.tail
        return b"%s%d%s" % (PREFIX, time.time_ns(), tail)

    def write(self, body: bytes) -> None:
        if self.chunked:
            self.conn.transport.write(b"%x\r\n%s\r\n" % (len(body), body))
        else:
            self.conn.transport.write(body)

    def begin(self) -> None:
        self.conn.transport.write(HEAD_CHUNKED if self.chunked else HEAD_CLOSE)
        if self.rate > 0:
            self.handle = self.loop.call_at(self.start, self.paced)
        else:
            self.handle = self.loop.call_at(self.start, self.pump)

    def paced(self) -> None:
        if self.conn.closed:
            return
        self.write(self.frame())
        if self.sent >= self.n:
            self.finish()
            return
        self.handle = self.loop.call_at(self.start + self.sent / self.rate, self.paced)

    def pump(self) -> None:
        """Unpaced: write batches until the transport asks us to pause or the stream is done."""
        self.handle = None
        conn = self.conn
        while not conn.closed and not conn.paused and self.sent < self.n:
            if self.sent == 0 or self.sent == self.n - 1:  # the role and the finish frames
                self.write(self.frame())
                continue
            # A batch of identical content frames sharing one stamp, so that the upstream is
            # never what limits the throughput of a proxy.
            count = min(BATCH, self.n - 1 - self.sent)
            self.write(b"%s%d%s" % (PREFIX, time.time_ns(), self.tail) * count)
            self.sent += count
        if conn.closed:
            return
        if self.sent >= self.n:
            self.finish()
        elif not conn.paused:
            self.handle = self.loop.call_soon(self.pump)
        # else: resume_writing() calls pump() again

    def finish(self) -> None:
        self.handle = None
        if self.chunked:
            self.write(DONE)
            self.conn.transport.write(b"0\r\n\r\n")
            self.conn.stream_done()
        else:
            self.conn.transport.write(DONE)
            self.conn.transport.close()

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.closed = False
        self.paused = False
        self.stream: Stream | None = None
        self.keep_alive = True
        self.pending: tuple | None = None  # (params, need_body_bytes or -1 for chunked)

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self.stream is not None:
            self.stream.cancel()
            self.stream = None

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.stream is not None and self.stream.rate <= 0 and self.stream.handle is None:
            self.stream.pump()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > MAX_HEAD + 16 * 1024 * 1024:
            self.transport.close()
            return
        self.parse()

    def parse(self) -> None:
        while self.stream is None and not self.closed:
            if self.pending is None:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.buf) > MAX_HEAD:
                        self.transport.close()
                    return
                head = bytes(self.buf[:end]).decode("latin-1")
                del self.buf[:end + 4]
                lines = head.split("\r\n")
                try:
                    method, target, version = lines[0].split(" ", 2)
                except ValueError:
                    self.transport.close()
                    return
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                conn_hdr = headers.get("connection", "").lower()
                self.keep_alive = version == "HTTP/1.1" and "close" not in conn_hdr
                need = -1 if "chunked" in headers.get("transfer-encoding", "").lower() else \
                    int(headers.get("content-length", "0") or 0)
                query = target.partition("?")[2]
                self.pending = (dict(parse_qsl(query)), need)
            params, need = self.pending
            if need == -1:  # a chunked request body: wait for its last chunk, ignore the rest
                end = self.buf.find(b"0\r\n\r\n")
                if end < 0:
                    return
                del self.buf[:end + 5]
            else:
                if len(self.buf) < need:
                    return
                del self.buf[:need]
            self.pending = None
            self.start_stream(params)

    def start_stream(self, params: dict) -> None:
        try:
            n = min(max(int(params.get("n", "10")), 2), MAX_FRAMES)
            rate = float(params.get("rate", "0"))
            size = min(max(int(params.get("size", "300")), 1), 64 * 1024)
            phase_s = max(float(params.get("phase_us", "0")), 0.0) / 1e6
        except ValueError:
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n"
                                 b"connection: close\r\n\r\n")
            self.transport.close()
            return
        self.stream = Stream(self, n, rate, size, min(phase_s, 60.0), chunked=self.keep_alive)
        self.stream.begin()

    def stream_done(self) -> None:
        self.stream = None
        if self.buf:
            self.parse()


async def main_async(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Conn, host, port, backlog=4096, reuse_address=True)
    print(f"listening on http://{host}:{server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        import uvloop
        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        runner.run(main_async(args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
