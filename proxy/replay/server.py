"""`streamtap replay`: serve samples as a fake provider. A request gets a sample's status, headers,
frames rebuilt from its shapes at its timing (scaled by `--speed`), and the same ending, carried
out by the ending machinery fault injection uses (proxy/connection/endings.py, through
replay/body.py): a reset is a reset, a stall is a stall until the client leaves.
"""

from __future__ import annotations

import asyncio
import sys

from aiohttp import web

from streamtap import __version__
from streamtap.proxy.replay.choose import COMPLETE, Choice, Chooser, read_ask
from streamtap.proxy.replay.bundled import bundled_samples_dir
from streamtap.proxy.replay.playable import Loaded, ReplayError, load_library
from streamtap.proxy.replay.body import end_body, no_response, sleep_until, write_at
from streamtap.proxy.serve.passthrough import PassThroughResponse
from streamtap.proxy.serve.run import is_loopback, listen, ready_line, stop_on_signals

DEFAULT_PORT = 8788
SHUTDOWN_GRACE_S = 1.0
# Headers that describe a body replay does not send as it was (a sample is the decoded stream,
# rebuilt): aiohttp sets the framing of the body it sends.
_NOT_REPLAYED = frozenset({"content-length", "content-encoding", "transfer-encoding",
                           "connection", "keep-alive"})
# An end recorded this soon after the last frame came with it: the gap is the recording proxy's
# own time to notice. Waiting it out would let a client that leaves on the last frame (an SDK
# raising on an error event) leave before the end, which the original client never could.
WITH_THE_LAST_FRAME_MS = 10.0
_HOW = {"terminal": "close", "clean_close": "close", "reset": "reset", "truncated": "truncate"}


# -- playing one sample ---------------------------------------------------------------------------
CHOOSER_KEY: web.AppKey["Chooser"] = web.AppKey("chooser")
SPEED_KEY: web.AppKey[float] = web.AppKey("speed")
LOG_KEY: web.AppKey[bool] = web.AppKey("log_requests")


def _headers(sample: dict) -> dict[str, str]:
    headers = {name: value for name, value in (sample.get("headers") or {}).items()
               if name.lower() not in _NOT_REPLAYED}
    content_type = sample.get("content_type") or headers.get("content-type")
    if content_type:
        headers["content-type"] = content_type
    return headers


async def play(request: web.Request, loaded: Loaded, speed: float) -> web.StreamResponse:
    sample = loaded.sample
    scale = 1.0 / (speed * loaded.speed)
    loop = asyncio.get_running_loop()
    started = loop.time()
    timing = sample.get("timing") or {}
    ending = sample["ending"]
    if ending == "no_response":
        # The original never answered: wait as long as it took to fail, then end the connection
        # without headers. A reset if it was reset (streamtap resets its client's connection
        # too); otherwise (refused, unresolved, disconnected: nothing a server that accepted the
        # connection can repeat) a FIN, which streamtap answers with the 502 the original got.
        await sleep_until(started + (timing.get("end_ms") or 0.0) / 1000.0 * scale)
        error = sample.get("error")  # scripted samples have none
        return no_response(request.transport,
                           reset=error is None or error.get("code") == "ECONNRESET")
    await sleep_until(started + (timing.get("response_headers_ms") or 0.0) / 1000 * scale)
    status = sample.get("status") or 200
    headers = _headers(sample)
    rebuilt = loaded.rebuilt
    if ending == "http_error":
        headers.setdefault("content-type", "application/json")
    response = PassThroughResponse(status=status, headers=headers)
    if rebuilt.body is not None and (ending == "http_error" or _HOW.get(ending) == "close"):
        response.content_length = len(rebuilt.body)  # a whole JSON reply, as providers send it
    await response.prepare(request)
    if ending == "http_error":
        await response.write(rebuilt.body or b"")
        await response.write_eof()
        return response
    base = loop.time()
    try:
        await write_at(response, loaded.writes, base, scale)
    except ConnectionError:  # the client left mid-stream: nothing more to play
        return response
    end_ms = timing.get("end_ms") or 0.0
    if end_ms - (loaded.writes[-1][0] if loaded.writes else 0.0) > WITH_THE_LAST_FRAME_MS:
        await sleep_until(base + end_ms / 1000.0 * scale)
    # stalled, client_gone: nothing more, until the client gives up
    await end_body(response, request.transport, _HOW.get(ending, "stall"))
    return response


async def handle(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    ask = read_ask(request.method, request.raw_path, body, request.headers)
    choice = request.app[CHOOSER_KEY].choose(ask)
    if not isinstance(choice, Choice):
        return web.json_response({"error": {"type": "streamtap_no_sample",
                                            "message": choice}}, status=404)
    loaded = choice.loaded
    if request.app[LOG_KEY]:
        print(f"replay: {request.method} {ask.path} -> {loaded.name} ({loaded.sample['ending']}; "
              f"{choice.why})", file=sys.stderr, flush=True)
    return await play(request, loaded, request.app[SPEED_KEY])


def build_replay_app(chooser, speed: float = 1.0, log_requests: bool = True) -> web.Application:
    """The fake provider's app; `chooser.choose(ask)` returns a Choice or why there is none."""
    app = web.Application()
    app[LOG_KEY] = log_requests
    app[CHOOSER_KEY] = chooser
    app[SPEED_KEY] = speed
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def mode(chooser: Chooser) -> str:
    """Which rule picks a request's sample, as the banner says it."""
    if chooser.cycle:
        return "cycle: the next sample for a path or dialect, round and round"
    if chooser.ending != COMPLETE:
        return f"a `{chooser.ending}` sample of the request's dialect and stream flag"
    complete = "a complete sample of the request's dialect and stream flag"
    files = sum(loaded.named_file for loaded in chooser.samples)
    if not files:
        return complete
    named = "the sample named on the command line for its dialect, whatever its ending"
    if files == len(chooser.samples):
        return named
    return f"{named}; else {complete} (from the folders)"


def banner(host: str, port: int, chooser: Chooser, speed: float) -> str:
    samples = chooser.samples
    shown = host if ":" not in host else f"[{host}]"
    lines = [f"streamtap replay listening on http://{shown}:{port}  (streamtap {__version__})",
             f"samples: {len(samples)} loaded (speed {speed:g}); each request gets "
             f"{mode(chooser)}"]
    width = max(len(loaded.name) for loaded in samples)
    for loaded in samples:
        sample = loaded.sample
        lines.append(f"  {loaded.name:<{width}}  {sample.get('dialect') or '?':<18} "
                     f"{sample['ending']:<11} {len(sample['frames']):>5} frames  "
                     f"{loaded.request_path}")
    lines.append("pick one with the request's model or an x-streamtap-sample header (a name "
                 "above, or an ending)")
    if not is_loopback(host):
        lines.append(f"WARNING: bound to {host}, not loopback")
    return "\n".join(lines)


async def start_server(app: web.Application, host: str,
                       port: int) -> tuple[web.AppRunner, int | None]:
    """Run `app` (a fake provider's, or the demo's proxy) on `host:port` (0: a free port), as
    every fake provider runs: handlers are cancelled when their client leaves (a stall ends
    with it) and shutdown waits only SHUTDOWN_GRACE_S for them. Returns the runner and the
    bound port, or None (said on stderr, the runner cleaned up) if the port is taken."""
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None,
                           shutdown_timeout=SHUTDOWN_GRACE_S)
    await runner.setup()
    bound = await listen(runner, host, port)
    if bound is None:
        await runner.cleanup()
    return runner, bound


async def serve_replay(chooser: Chooser, host: str, port: int, speed: float,
                       ready_json: bool = False) -> int:
    stop = stop_on_signals()
    runner, bound = await start_server(build_replay_app(chooser, speed), host, port)
    if bound is None:
        return 1
    if ready_json:  # stdout holds the one JSON line; the banner goes to stderr
        print(banner(host, bound, chooser, speed), file=sys.stderr, flush=True)
        print(ready_line(host, bound), flush=True)
    else:
        print(banner(host, bound, chooser, speed), flush=True)
    await stop.wait()
    await runner.cleanup()
    return 0


def run(targets: list[str], host: str, port: int, speed: float, ending: str = COMPLETE,
        cycle: bool = False, ready_json: bool = False) -> int:
    if not speed > 0:
        print(f"streamtap: --speed must be more than 0, got {speed}", file=sys.stderr)
        return 2
    try:
        samples = load_library(targets or [str(bundled_samples_dir())])
    except ReplayError as exc:
        print(f"streamtap: {exc}", file=sys.stderr)
        return 2
    chooser = Chooser(samples, ending=ending, cycle=cycle)
    if not cycle and ending != COMPLETE and not any(
            loaded.sample["ending"] == ending for loaded in samples):
        print(f"streamtap: --ending {ending}: none of the {len(samples)} samples loaded ends "
              f"`{ending}`; endings there: "
              f"{', '.join(sorted({loaded.sample['ending'] for loaded in samples}))}",
              file=sys.stderr)
        return 2
    return asyncio.run(serve_replay(chooser, host, port, speed, ready_json))
