"""`streamtap demo`: a diagnosis within seconds of installing, with no API key and no network.

In one process it starts a replay of the bundled corpus as a fake OpenAI, a recording proxy in
front of it, sends four requests through the proxy with a real HTTP client (one that completes,
one reset mid tool call, one Responses stream with a wrapped error chunk, one clean early close),
then prints `ls` and `show` of the failures. `--keep` leaves both running for the live page.
"""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path

import aiohttp
from aiohttp import web

from streamtap.proxy.config import Config, Route
from streamtap.proxy.logs import configure_logging
from streamtap.proxy.readout import commands
from streamtap.proxy.replay.bundled import bundled_samples_dir
from streamtap.proxy.replay.choose import Chooser
from streamtap.proxy.replay.server import build_replay_app, load_library, start_server
from streamtap.proxy.serve.app import build_app
from streamtap.proxy.serve.run import stop_on_signals
from streamtap.proxy.store import TraceStore

SESSION = "demo"
# (what it shows, the bundled sample the request names as its model, the API path)
REQUESTS = (
    ("a stream that completes", "openai__openai-chat__terminal__1", "/v1/chat/completions"),
    ("a reset in the middle of a tool call", "openai__openai-chat__reset__1",
     "/v1/chat/completions"),
    ("a Responses stream with a wrapped error chunk", "openai__openai-responses__clean_close__3",
     "/v1/responses"),
    ("a clean close before the end", "openai__openai-chat__clean_close__1",
     "/v1/chat/completions"),
)


async def _start(app: web.Application, port: int = 0) -> tuple[web.AppRunner, int]:
    runner, bound = await start_server(app, "127.0.0.1", port)
    if bound is None:
        raise OSError(f"cannot listen on 127.0.0.1:{port}")
    return runner, bound


async def _send(client: aiohttp.ClientSession, url: str, model: str) -> str:
    """What the client saw: a whole body, or the error it got."""
    body = {"model": model, "stream": True, "input": "demo",
            "messages": [{"role": "user", "content": "demo"}]}
    try:
        async with client.post(url, json=body, headers={"x-streamtap-session": SESSION}) as resp:
            data = await resp.read()
            return f"HTTP {resp.status}, {len(data)} bytes, no error"
    except aiohttp.ClientError as exc:
        return f"{type(exc).__name__}"


async def run_demo(trace_dir: Path, keep: bool, port: int, out=None) -> int:
    out = out or sys.stdout
    # The canonical log lines would interleave with the demo's own output: `ls` shows them.
    log = configure_logging("json", io.StringIO())
    # Each request names its sample as its model, so the replay's default (a complete stream)
    # never applies here.
    replay, replay_port = await _start(build_replay_app(Chooser(load_library([str(
        bundled_samples_dir())])), speed=2.0, log_requests=False))
    config = Config(port=port, trace_dir=str(trace_dir), session=SESSION, routes={
        "openai": Route("openai", f"http://127.0.0.1:{replay_port}", example_suffix="/v1")})
    store = TraceStore(trace_dir, log)
    proxy, proxy_port = await _start(build_app(config, store, log), port)
    base = f"http://127.0.0.1:{proxy_port}"
    try:
        print(f"streamtap demo: a replay of the bundled corpus as a fake OpenAI, and a proxy at "
              f"{base}/openai/v1 recording into {trace_dir}\n", file=out)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as client:
            for what, model, path in REQUESTS:
                seen = await _send(client, f"{base}/openai{path}", model)
                print(f"  sent {what}: the client saw {seen}", file=out)
        for _ in range(500):  # records are written on the store's thread
            if store.written + store.failed >= len(REQUESTS):
                break
            await asyncio.sleep(0.01)
        print(f"\n$ streamtap ls --session {SESSION} --last {len(REQUESTS)}", file=out)
        commands.ls(trace_dir, session=SESSION, last=len(REQUESTS), out=out)
        failed = commands.failed_trace_ids(trace_dir, SESSION)[:len(REQUESTS)]
        for trace_id in reversed(failed):
            print(f"\n$ streamtap show {trace_id[:8]}", file=out)
            commands.show(trace_dir, trace_id, out=out)
        if keep:
            print(f"\nlive page: {base}/_streamtap/  (Ctrl-C stops the demo)", file=out,
                  flush=True)
            await stop_on_signals().wait()
        else:
            print("\nrun `streamtap demo --keep` to look at the same traces in a browser",
                  file=out)
    finally:
        await proxy.cleanup()
        await replay.cleanup()
        store.close()
    return 0


def demo(trace_dir: str, keep: bool, port: int) -> int:
    """Records go where `streamtap serve` writes them (session `demo`), so `ls`, `show`,
    `report` and `export` work on them right after."""
    return asyncio.run(run_demo(Path(trace_dir), keep, port))
