"""`streamtap replay`: serve samples as a fake provider. A request gets a sample's status, headers,
frames rebuilt from its shapes at its timing (scaled by `--speed`), and the same ending, carried
out by the ending machinery fault injection uses (proxy/endings.py): a reset is a reset, a stall is
a stall until the client leaves.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from streamtap.diagnostics.dialects import dialect_for_path
from streamtap.diagnostics.samples.rebuild import Rebuilt, rebuild, writes
from streamtap.diagnostics.record.redact import redact_path
from streamtap.diagnostics.samples.samples import SampleError, check_sample

from streamtap import __version__
from streamtap.proxy.serve import sockets
from streamtap.proxy.faults.endings import end_response, stall
from streamtap.proxy.serve.forward import PassThroughResponse
from streamtap.proxy.serve.run import is_loopback, listen, stop_on_signals

SUFFIX = ".sample.json"
DEFAULT_PORT = 8788
SHUTDOWN_GRACE_S = 1.0
# Headers that describe a body replay does not send as it was (a sample is the decoded stream,
# rebuilt): aiohttp sets the framing of the body it sends.
_NOT_REPLAYED = frozenset({"content-length", "content-encoding", "transfer-encoding",
                           "connection", "keep-alive"})
_HOW = {"terminal": "close", "clean_close": "close", "reset": "reset", "truncated": "truncate"}
_PATH_MODEL = re.compile(r"/models/([^/:]+)")


class ReplayError(Exception):
    """A sample replay cannot serve, with the file it came from and what to do."""


@dataclass
class Loaded:
    name: str  # the file name without `.sample.json`: what a request's `model` can pick
    path: Path
    sample: dict
    rebuilt: Rebuilt
    writes: list[tuple[float, bytes]]

    @property
    def request_path(self) -> str:
        return (self.sample.get("request") or {}).get("path") or ""

    @property
    def dialects(self) -> set[str]:
        names = {self.sample.get("dialect"), dialect_for_path(self.request_path)}
        return {name for name in names if name}


def sample_name(path: Path) -> str:
    name = path.name
    return name[:-len(SUFFIX)] if name.endswith(SUFFIX) else path.stem


def load_one(path: Path) -> Loaded:
    try:
        sample = check_sample(json.loads(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    except (ValueError, SampleError) as exc:
        raise ReplayError(f"{path}: not a usable sample: {exc}") from exc
    try:
        rebuilt = rebuild(sample)
        planned = writes(sample, rebuilt)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise ReplayError(f"{path}: the sample's frames or shapes are malformed "
                          f"({type(exc).__name__}: {exc}); export it again with "
                          "`streamtap samples export`") from exc
    return Loaded(sample_name(path), path, sample, rebuilt, planned)


def load_library(targets: list[str]) -> list[Loaded]:
    """Every sample named: files as given, folders' `*.sample.json` in name order."""
    loaded: list[Loaded] = []
    for target in targets:
        path = Path(target)
        if path.is_dir():
            files = sorted(path.glob(f"*{SUFFIX}"))
            if not files:
                raise ReplayError(f"{path}: no *{SUFFIX} files in this folder; export some with "
                                  "`streamtap samples export -o DIR`")
            loaded.extend(load_one(file) for file in files)
        elif path.exists():
            loaded.append(load_one(path))
        else:
            raise ReplayError(f"{path}: no such file or folder")
    return loaded


@dataclass
class Chooser:
    """Which sample a request gets: the one named by its `model`, else the next one recorded for
    its path, else the next one of its dialect. Without `loop` the last one keeps being served."""

    samples: list[Loaded]
    loop: bool = False
    _cursors: dict[str, int] = field(default_factory=dict)

    def choose(self, path: str, model: str | None) -> Loaded | None:
        if model:
            for loaded in self.samples:
                if loaded.name == model:
                    return loaded
        path = redact_path(path)
        by_path = [loaded for loaded in self.samples if loaded.request_path == path]
        if by_path:
            return self._next(f"path:{path}", by_path)
        dialect = dialect_for_path(path)
        by_dialect = [loaded for loaded in self.samples if dialect in loaded.dialects]
        if dialect and by_dialect:
            return self._next(f"dialect:{dialect}", by_dialect)
        return None

    def _next(self, key: str, candidates: list[Loaded]) -> Loaded:
        turn = self._cursors.get(key, 0)
        self._cursors[key] = turn + 1
        if self.loop:
            return candidates[turn % len(candidates)]
        return candidates[min(turn, len(candidates) - 1)]


def request_model(body: bytes, path: str) -> str | None:
    """The request's `model` (Gemini names it in the path instead)."""
    try:
        obj = json.loads(body) if body else None
    except ValueError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("model"), str):
        return obj["model"]
    found = _PATH_MODEL.search(path)
    return found.group(1) if found else None


# -- playing one sample ---------------------------------------------------------------------------
CHOOSER_KEY: web.AppKey[Chooser] = web.AppKey("chooser")
SPEED_KEY: web.AppKey[float] = web.AppKey("speed")


async def _sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
    delay = deadline - loop.time()
    if delay > 0:
        await asyncio.sleep(delay)


def _headers(sample: dict) -> dict[str, str]:
    headers = {name: value for name, value in (sample.get("headers") or {}).items()
               if name.lower() not in _NOT_REPLAYED}
    content_type = sample.get("content_type") or headers.get("content-type")
    if content_type:
        headers["content-type"] = content_type
    return headers


async def play(request: web.Request, loaded: Loaded, speed: float) -> web.StreamResponse:
    sample = loaded.sample
    scale = 1.0 / speed
    loop = asyncio.get_running_loop()
    started = loop.time()
    timing = sample.get("timing") or {}
    ending = sample["ending"]
    if ending == "no_response":
        # The original never answered: wait as long as it took to fail, then reset, no headers.
        await _sleep_until(loop, started + (timing.get("end_ms") or 0.0) / 1000.0 * scale)
        sockets.reset(request.transport)
        return web.Response(status=502)  # never sent: the connection is gone
    await _sleep_until(loop, started + (timing.get("response_headers_ms") or 0.0) / 1000 * scale)
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
        for t_ms, data in loaded.writes:
            await _sleep_until(loop, base + t_ms / 1000.0 * scale)
            await response.write(data)
    except ConnectionError:  # the client left mid-stream: nothing more to play
        return response
    await _sleep_until(loop, base + (timing.get("end_ms") or 0.0) / 1000.0 * scale)
    how = _HOW.get(ending)
    if how is None:  # stalled, client_gone: nothing more, until the client gives up
        await stall(None)
        return response
    await end_response(response, request.transport, how)
    return response


async def handle(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    path = request.raw_path.partition("?")[0]
    chooser = request.app[CHOOSER_KEY]
    loaded = chooser.choose(path, request_model(body, path))
    if loaded is None:
        names = ", ".join(sample.name for sample in chooser.samples)
        message = (f"streamtap replay has no sample for {request.method} {path}: none is named "
                   f"by the request's model, recorded for this path, or of its dialect "
                   f"(loaded: {names})")
        return web.json_response({"error": {"type": "streamtap_no_sample",
                                            "message": message}}, status=404)
    print(f"replay: {request.method} {path} -> {loaded.name} ({loaded.sample['ending']})",
          file=sys.stderr, flush=True)
    return await play(request, loaded, request.app[SPEED_KEY])


def build_replay_app(samples: list[Loaded], speed: float = 1.0,
                     loop: bool = False) -> web.Application:
    app = web.Application()
    app[CHOOSER_KEY] = Chooser(samples, loop)
    app[SPEED_KEY] = speed
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def banner(host: str, port: int, samples: list[Loaded], speed: float, loop: bool) -> str:
    shown = host if ":" not in host else f"[{host}]"
    lines = [f"streamtap replay listening on http://{shown}:{port}  (streamtap {__version__})",
             f"samples: {len(samples)} loaded (speed {speed:g}, loop {'on' if loop else 'off'})"]
    width = max(len(loaded.name) for loaded in samples)
    for loaded in samples:
        sample = loaded.sample
        lines.append(f"  {loaded.name:<{width}}  {sample.get('dialect') or '?':<18} "
                     f"{sample['ending']:<11} {len(sample['frames']):>5} frames  "
                     f"{loaded.request_path}")
    lines.append("pick one with the request's model (the name above), else by path, else by "
                 "dialect")
    if not is_loopback(host):
        lines.append(f"WARNING: bound to {host}, not loopback")
    return "\n".join(lines)


async def serve_replay(samples: list[Loaded], host: str, port: int, speed: float,
                       loop: bool) -> int:
    app = build_replay_app(samples, speed, loop)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None,
                           shutdown_timeout=SHUTDOWN_GRACE_S)
    await runner.setup()
    stop = stop_on_signals()
    bound = await listen(runner, host, port)
    if bound is None:
        await runner.cleanup()
        return 1
    print(banner(host, bound, samples, speed, loop), flush=True)
    await stop.wait()
    await runner.cleanup()
    return 0


def run(targets: list[str], host: str, port: int, speed: float, loop: bool) -> int:
    if not speed > 0:
        print(f"streamtap: --speed must be more than 0, got {speed}", file=sys.stderr)
        return 2
    try:
        samples = load_library(targets)
    except ReplayError as exc:
        print(f"streamtap: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(serve_replay(samples, host, port, speed, loop))
