"""A small Chrome DevTools Protocol client over aiohttp websockets, to drive headless Chromium
(Debian's `chromium`) in tests: open a page, evaluate script in it, take a screenshot.

`--dump-dom` cannot be used: with a virtual time budget it never returns while a page holds an
EventSource open, and the live page always does.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import aiohttp

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--remote-debugging-port=0")
_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class CdpError(RuntimeError):
    pass


class Browser:
    """One headless Chromium process and one page in it (flattened CDP session)."""

    def __init__(self, binary: str):
        self.binary = binary
        self.profile = tempfile.TemporaryDirectory(prefix="streamtap-chromium-")
        self.process: subprocess.Popen | None = None
        self.http: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.session_id: str | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._events: dict[str, list[asyncio.Future]] = {}
        self._reader: asyncio.Task | None = None

    async def __aenter__(self) -> "Browser":
        self.process = subprocess.Popen(
            [self.binary, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile.name}",
             "--window-size=1280,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        url = await asyncio.wait_for(asyncio.to_thread(self._devtools_url), 30)
        self.http = aiohttp.ClientSession()
        self.ws = await self.http.ws_connect(url, max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        target = await self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = await self.send("Target.attachToTarget",
                                   {"targetId": target["targetId"], "flatten": True},
                                   session=False)
        self.session_id = attached["sessionId"]
        await self.send("Page.enable")
        await self.send("Runtime.enable")
        return self

    def _devtools_url(self) -> str:
        for raw in self.process.stderr:
            match = _LISTENING.search(raw.decode(errors="replace"))
            if match:
                return match.group(1)
        raise CdpError("chromium exited before it printed its DevTools URL")

    async def __aexit__(self, *exc) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self.ws is not None:
            await self.ws.close()
        if self.http is not None:
            await self.http.close()
        if self.process is not None:
            self.process.terminate()
            try:
                await asyncio.to_thread(self.process.wait, 10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.profile.cleanup()

    async def _read(self) -> None:
        async for message in self.ws:
            data = json.loads(message.data)
            if "id" in data:
                future = self._pending.pop(data["id"], None)
                if future is not None and not future.done():
                    if "error" in data:
                        future.set_exception(CdpError(str(data["error"])))
                    else:
                        future.set_result(data.get("result", {}))
            elif "method" in data:
                for future in self._events.pop(data["method"], []):
                    if not future.done():
                        future.set_result(data.get("params", {}))

    async def send(self, method: str, params: dict | None = None, *, session: bool = True,
                   timeout: float = 30.0) -> dict:
        message_id = next(self._ids)
        message = {"id": message_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session_id
        future = asyncio.get_running_loop().create_future()
        self._pending[message_id] = future
        await self.ws.send_str(json.dumps(message))
        return await asyncio.wait_for(future, timeout)

    def event(self, method: str) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self._events.setdefault(method, []).append(future)
        return future

    async def open(self, url: str, timeout: float = 30.0) -> None:
        loaded = self.event("Page.loadEventFired")
        await self.send("Page.navigate", {"url": url})
        await asyncio.wait_for(loaded, timeout)

    async def evaluate(self, expression: str):
        result = await self.send("Runtime.evaluate", {"expression": expression,
                                                      "returnByValue": True})
        if "exceptionDetails" in result:
            raise CdpError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 15.0):
        """Poll a script expression until it is truthy; return its value."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if asyncio.get_running_loop().time() > deadline:
                raise CdpError(f"timed out waiting for {expression}")
            await asyncio.sleep(0.1)

    async def screenshot(self, path: Path, width: int = 1280, height: int = 1000) -> None:
        await self.send("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": height, "deviceScaleFactor": 1,
                         "mobile": False})
        shot = await self.send("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))
