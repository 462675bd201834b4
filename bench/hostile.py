"""Hostile and ordinary upstreams on loopback, for the memory tests and the soak.

`python bench/hostile.py` listens on a free port of 127.0.0.1, prints `port N`, and serves until
stdin closes (so it never outlives the process that started it). What it sends is chosen by the
query: `?kind=endless&bytes=N` (one SSE event whose `data:` lines never end), `kind=huge_line`
(one `data:` line of N bytes), otherwise an ordinary stream of the dialect the path names
(OpenAI chat, Anthropic messages, OpenAI responses, Gemini, Ollama) with `words=W` text deltas
made of `text` and a number, `ms=M` apart (a slow drip when M is large); a POST body of any size
is read as it comes and only counted (`received` in the reply, for `kind=sink`).
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiohttp import web

CHUNK = 256 * 1024


def _sse(obj: dict, event: str | None = None, end: bytes = b"\n\n") -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + json.dumps(obj).encode() + end


def _chat_frame(delta: dict, finish: str | None = None) -> bytes:
    return _sse({"id": "chatcmpl-soak", "object": "chat.completion.chunk", "model": "soak-model",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def chat_stream(words: int, text: str = "w") -> list[bytes]:
    frames = [_chat_frame({"role": "assistant", "content": ""})]
    frames += [_chat_frame({"content": f"{text}{i} "}) for i in range(words)]
    frames.append(_chat_frame({}, "stop"))
    frames.append(b"data: [DONE]\n\n")
    return frames


def anthropic_stream(words: int, text: str = "w") -> list[bytes]:
    frames = [_sse({"type": "message_start", "message": {
        "id": "msg_soak", "type": "message", "role": "assistant", "model": "claude-soak",
        "content": [], "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1}}},
        "message_start"),
        _sse({"type": "content_block_start", "index": 0,
              "content_block": {"type": "text", "text": ""}}, "content_block_start")]
    frames += [_sse({"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": f"{text}{i} "}},
                    "content_block_delta") for i in range(words)]
    frames += [_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
               _sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                     "usage": {"output_tokens": words}}, "message_delta"),
               _sse({"type": "message_stop"}, "message_stop")]
    return frames


def responses_stream(words: int, text: str = "w") -> list[bytes]:
    response = {"id": "resp_soak", "object": "response", "status": "in_progress",
                "model": "gpt-soak", "output": []}
    frames = [_sse({"type": "response.created", "response": response}, "response.created")]
    frames += [_sse({"type": "response.output_text.delta", "item_id": "msg_soak",
                     "output_index": 0, "content_index": 0, "delta": f"{text}{i} "},
                    "response.output_text.delta") for i in range(words)]
    done = {**response, "status": "completed",
            "usage": {"input_tokens": 5, "output_tokens": words, "total_tokens": words + 5}}
    frames.append(_sse({"type": "response.completed", "response": done}, "response.completed"))
    return frames


def gemini_stream(words: int, text: str = "w") -> list[bytes]:
    frames = [_sse({"candidates": [{"content": {"role": "model", "parts": [
        {"text": f"{text}{i} "}]}, "index": 0}]}, end=b"\r\n\r\n") for i in range(words)]
    frames.append(_sse({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
                                        "finishReason": "STOP", "index": 0}],
                        "usageMetadata": {"promptTokenCount": 5,
                                          "candidatesTokenCount": words}}, end=b"\r\n\r\n"))
    return frames


def ollama_stream(words: int, text: str = "w") -> list[bytes]:
    lines = [json.dumps({"model": "llama-soak", "message": {"role": "assistant",
                                                            "content": f"{text}{i} "},
                         "done": False}).encode() + b"\n" for i in range(words)]
    lines.append(json.dumps({"model": "llama-soak", "message": {"role": "assistant",
                                                                "content": ""},
                             "done": True, "done_reason": "stop", "eval_count": words}).encode()
                 + b"\n")
    return lines


# path ending -> (stream builder, content type)
DIALECTS = {
    "/v1/chat/completions": (chat_stream, "text/event-stream"),
    "/v1/messages": (anthropic_stream, "text/event-stream"),
    "/v1/responses": (responses_stream, "text/event-stream"),
    "/v1beta/models/gemini-soak:streamGenerateContent": (gemini_stream, "text/event-stream"),
    "/api/chat": (ollama_stream, "application/x-ndjson"),
}


def _filler(line: bytes, total: int) -> tuple[bytes, int]:
    """A chunk of whole `line`s about CHUNK long, and how many such chunks make `total`."""
    block = line * max(1, CHUNK // len(line))
    return block, max(1, -(-total // len(block)))


async def handle(request: web.Request) -> web.StreamResponse:
    try:
        return await _play(request)
    except ConnectionError:  # the proxy went away (a fault, a client that gave up): expected
        return web.Response(status=499)


async def _play(request: web.Request) -> web.StreamResponse:
    query = request.query
    kind = query.get("kind", "chat")
    if request.method == "POST" and kind == "sink":
        received = 0
        async for piece in request.content.iter_any():
            received += len(piece)
        return web.json_response({"received": received})
    await request.read()
    builder, content_type = next(((build, ctype) for ending, (build, ctype) in DIALECTS.items()
                                  if request.path.endswith(ending)), DIALECTS["/v1/chat/completions"])
    response = web.StreamResponse(headers={"Content-Type": content_type})
    await response.prepare(request)
    total = int(query.get("bytes", 1 << 20))
    pause = int(query.get("ms", 0)) / 1000
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
    else:  # a dialect's stream, paced `ms` apart (a slow drip when that is long)
        for frame in builder(int(query.get("words", 20)), query.get("text", "w")):
            await response.write(frame)
            if pause:
                await asyncio.sleep(pause)
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
