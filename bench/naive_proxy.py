"""The yardstick: a naive aiohttp pass-through that records nothing (the issue's ~40 lines).

    python bench/naive_proxy.py --upstream http://127.0.0.1:PORT [--port 0] [--loop uvloop|asyncio]

Forwards every request to the upstream, then copies the response body with an `iter_any()` loop.
"""

import argparse
import asyncio

import aiohttp
from aiohttp import web

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}


async def handle(request: web.Request) -> web.StreamResponse:
    session: aiohttp.ClientSession = request.app["session"]
    headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
    async with session.request(request.method, request.app["upstream"] + request.path_qs,
                               headers=headers, data=await request.read(),
                               allow_redirects=False) as upstream:
        response = web.StreamResponse(status=upstream.status, headers={
            k: v for k, v in upstream.headers.items() if k.lower() not in HOP})
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


async def main(args: argparse.Namespace) -> None:
    app = web.Application()
    app["upstream"] = args.upstream.rstrip("/")
    app["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                           auto_decompress=False)
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port, backlog=4096)
    await site.start()
    print(f"listening on http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()  # until SIGTERM/SIGINT


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    ns = parser.parse_args()
    factory = None
    if ns.loop == "uvloop":
        import uvloop
        factory = uvloop.new_event_loop
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(main(ns))
    except KeyboardInterrupt:
        pass
