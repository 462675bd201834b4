"""A screenshot of streamtap's spans in Arize Phoenix, for README's "Team scale" section.

    python -m tests.phoenix_screenshot docs/phoenix-spans.png

Starts Phoenix from its cached venv (`.ci/phoenix-venv`), the test suite's fake provider and
`streamtap serve --otlp-endpoint` to Phoenix; streams a complete answer, a tool call cut by a
reset, an error wrapped in a chunk and an HTTP 429 through it with the openai SDK; waits until
Phoenix holds the spans, then has headless Chromium (`$CHROMIUM`, default /usr/bin/chromium)
photograph the project's span list. `STREAMTAP_PHOENIX_URL` uses a Phoenix already running.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import openai

from tests.fakeprovider import FakeProvider, Scenario
from tests.phoenixproc import PhoenixProcess
from tests.proxyproc import ProxyProcess
from tests.streams import chat_text_stream, chat_tool_stream, sse

PROJECT = "streamtap"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def scenarios() -> list[tuple[str, Scenario]]:
    error = sse({"error": {"message": "internal", "type": "server_error", "code": None}})
    return [
        ("complete", Scenario(chat_text_stream(5))),
        ("reset-mid-tool-call", Scenario(chat_tool_stream(5, finish=False), ending="reset")),
        ("wrapped-error", Scenario(chat_text_stream(3, done=False)[:-1] + [error])),
        ("http-429", Scenario([b'{"error": {"type": "rate_limit_error", "code": '
                               b'"rate_limit_exceeded", "message": "slow down"}}'],
                              status=429, content_type="application/json")),
        ("complete-2", Scenario(chat_text_stream(8))),
    ]


def stream_through(proxy: ProxyProcess, fake: FakeProvider) -> int:
    for message, scenario in scenarios():
        client = openai.OpenAI(base_url=proxy.url("fake") + fake.add(scenario) + "/v1",
                               api_key="sk-demo", max_retries=0, timeout=10,
                               default_headers={"x-streamtap-session": "demo",
                                                "x-streamtap-message": message})
        try:
            for _ in client.chat.completions.create(model="gpt-4o", stream=True, messages=[
                    {"role": "user", "content": "hello"}]):
                pass
        except openai.APIError:
            pass  # the broken ones break: that is what the spans show
    return len(scenarios())


def project_id(phoenix_url: str, count: int) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        spans = httpx.get(f"{phoenix_url}/v1/projects/{PROJECT}/spans", timeout=10)
        if spans.status_code == 200 and len(spans.json()["data"]) >= count:
            projects = httpx.get(f"{phoenix_url}/v1/projects", params={"limit": 100},
                                 timeout=10).json()["data"]
            return next(p["id"] for p in projects if p["name"] == PROJECT)
        time.sleep(0.5)
    raise RuntimeError(f"Phoenix did not show {count} spans in project {PROJECT} within 60 s")


def screenshot(url: str, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--user-data-dir={profile}",
                        "--window-size=1800,720", "--virtual-time-budget=20000",
                        f"--screenshot={out.resolve()}", url],
                       check=True, capture_output=True, timeout=180)
    if not out.exists() or out.stat().st_size < 10_000:
        raise RuntimeError(f"Chromium wrote no usable screenshot to {out}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    if not os.access(CHROMIUM, os.X_OK):
        print(f"no Chromium at {CHROMIUM}; install it or set CHROMIUM", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="streamtap-screenshot-") as work:
        work_dir = Path(work)
        phoenix = None
        phoenix_url = os.environ.get("STREAMTAP_PHOENIX_URL")
        if not phoenix_url:
            phoenix = PhoenixProcess(work_dir)
            phoenix_url = phoenix.url
        else:  # a Phoenix in use: start the project afresh, so the picture shows this run only
            httpx.delete(f"{phoenix_url}/v1/projects/{PROJECT}", timeout=10)
        fake = FakeProvider().start()
        config = work_dir / "streamtap.toml"
        config.write_text(f'[export.otlp]\nproject = "{PROJECT}"\n')
        proxy = ProxyProcess(work_dir, {"fake": fake.url}, "--config", str(config),
                             "--otlp-endpoint", phoenix_url)
        try:
            count = stream_through(proxy, fake)
            pid = project_id(phoenix_url, count)
            screenshot(f"{phoenix_url}/projects/{pid}/spans", out)
        finally:
            proxy.stop()
            fake.stop()
            if phoenix is not None:
                phoenix.stop()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
