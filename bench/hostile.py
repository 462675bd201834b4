"""Hostile and ordinary upstreams on loopback, for the memory tests and the soak.

`python bench/hostile.py` listens on a free port of 127.0.0.1, prints `port N`, and serves until
stdin closes (so it never outlives the process that started it). What it sends is chosen by the
query: `?kind=endless&bytes=N` (one SSE event whose `data:` lines never end), `kind=huge_line`
(one `data:` line of N bytes), `kind=drip&ms=M&frames=F` (a small frame every M ms),
`kind=chat&words=W` (an ordinary OpenAI chat stream); a POST body of any size is read as it comes
and only counted (`received` in the reply, for `kind=sink`).
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiohttp import web

CHUNK = 256 * 1024


def _chat_frame(delta: dict, finish: str | None = None) -> bytes:
    body = {"id": "chatcmpl-soak", "object": "chat.completion.chunk", "model": "soak-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def chat_stream(words: int) -> list[bytes]:
    frames = [_chat_frame({"role": "assistant", "content": ""})]
    frames += [_chat_frame({"content": f"w{i} "}) for i in range(words)]
    frames.append(_chat_frame({}, "stop"))
    frames.append(b"data: [DONE]\n\n")
    return frames


def _filler(line: bytes, total: int) -> tuple[bytes, int]:
    """A chunk of whole `line`s about CHUNK long, and how many such chunks make `total`."""
    block = line * max(1, CHUNK // len(line))
    return block, max(1, -(-total // len(block)))


async def handle(request: web.Request) -> web.StreamResponse:
    query = request.query
    kind = query.get("kind", "chat")
    if request.method == "POST" and kind == "sink":
        received = 0
        async for piece in request.content.iter_any():
            received += len(piece)
        return web.json_response({"received": received})
    await request.read()
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    total = int(query.get("bytes", 1 << 20))
    if kind == "endless":  # data lines forever, no blank line: one event that never ends
        block, count = _filler(b"data: " + b"x" * 1018 + b"\n", total)
        await response.write(b'data: {"choices":[]}\n')
        for _ in range(count):
            await response.write(block)
        await response.write(b"\n")
    elif kind == "huge_line":  # one data line of `total` bytes
        block, count = _filler(b"x" * 1024, total)
        await response.write(b"data: ")
        for _ in range(count):
            await response.write(block)
        await response.write(b"\n\n")
    elif kind == "drip":
        pause = int(query.get("ms", 200)) / 1000
        for frame in chat_stream(int(query.get("frames", 10))):
            await response.write(frame)
            await asyncio.sleep(pause)
    else:
        for frame in chat_stream(int(query.get("words", 20))):
            await response.write(frame)
    await response.write_eof()
    return response


def make_app() -> web.Application:
    app = web.Application(client_max_size=1 << 40)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def start(host: str = "127.0.0.1") -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(make_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


async def _main() -> None:
    runner, port = await start()
    print(f"port {port}", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(_main())
