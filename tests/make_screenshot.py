"""Regenerate README's screenshot of the live page: `python tests/make_screenshot.py`.

Starts `streamtap serve` on the fixture trace directory (one record per boundary), sends one
request through it that fails live, and screenshots /_streamtap/ in headless Chromium into
docs/live-page.png.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from tests.cdp import Browser, chromium_path  # noqa: E402
from tests.fakeprovider import FakeProvider, Scenario  # noqa: E402
from tests.proxyproc import ProxyProcess  # noqa: E402
from tests.streams import chat_tool_stream  # noqa: E402
from tests.tracefixtures import build  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "docs" / "live-page.png"


async def shoot(proxy: ProxyProcess, fake: FakeProvider, out: Path) -> None:
    async with Browser(chromium_path()) as browser:
        await browser.open(proxy.url() + "/_streamtap/")
        prefix = fake.add(Scenario(chat_tool_stream(5, finish=False), ending="reset",
                                   delay_s=0.05))
        await asyncio.to_thread(_send, proxy.url("fake") + prefix + "/v1/chat/completions")
        await browser.wait_for("document.querySelectorAll('section.trace').length === 10")
        time.sleep(0.2)
        await browser.screenshot(out, 1280, 1100)


def _send(url: str) -> None:
    try:
        httpx.post(url, json={"model": "gpt-live", "stream": True,
                              "tools": [{"type": "function",
                                         "function": {"name": "apply_patch"}}]},
                   headers={"x-streamtap-session": "live"}, timeout=10)
    except httpx.HTTPError:
        pass  # the reset is the point


def main() -> int:
    if chromium_path() is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 1
    fake = FakeProvider().start()
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp) / "traces")
        proxy = ProxyProcess(Path(tmp), {"fake": fake.url}, trace_dir=Path(tmp) / "traces")
        try:
            asyncio.run(shoot(proxy, fake, OUT))
        finally:
            proxy.stop()
            fake.stop()
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
