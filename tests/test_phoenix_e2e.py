"""The proof against a real trace backend: streamtap exports to Arize Phoenix, and the spans read
back from Phoenix's REST API say what broke, carry the GenAI attributes, and hold no content.
Then Phoenix goes away mid-run: forwarding does not notice, and the drop is counted.

Phoenix is large, so it lives in its own cached venv: `.ci/phoenix-venv` makes it (CI runs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import httpx
import openai
import pytest

from tests.clients import wait_for
from tests.fakeprovider import Scenario
from tests.phoenixproc import PHOENIX_BIN, PhoenixProcess
from tests.proxyproc import ProxyProcess, new_session
from tests.readme import shell_blocks
from tests.streams import CANARY_OUTPUT, chat_text_stream, chat_tool_stream, sse

pytestmark = pytest.mark.skipif(
    not PHOENIX_BIN.exists(),
    reason=f"Arize Phoenix is not installed at {PHOENIX_BIN}; run .ci/phoenix-venv to install it "
           "(about 850 MB, once)")

PROMPT = "CANARY-PROMPT-phoenix"
API_KEY = "sk-CANARY-KEY-phoenix"


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    process = PhoenixProcess(tmp_path_factory.mktemp("phoenix"))
    yield process
    process.stop()


def wrapped_error_stream() -> list[bytes]:
    """Text, then an error wrapped in a chunk (what OpenAI sends when it fails mid-stream)."""
    text = chat_text_stream(3, done=False)[:-1]
    return text + [sse({"error": {"message": f"{CANARY_OUTPUT} internal detail",
                                  "type": "server_error", "param": None, "code": None}})]


def chat(proxy, fake, scenario: Scenario, session: str, message: str) -> str:
    """One streamed chat through the proxy with the openai SDK; returns what the client saw."""
    client = openai.OpenAI(base_url=proxy.url("fake") + fake.add(scenario) + "/v1",
                           api_key=API_KEY, max_retries=0, timeout=10,
                           default_headers={"x-streamtap-session": session,
                                            "x-streamtap-message": message})
    got = ""
    try:
        for chunk in client.chat.completions.create(
                model="gpt-test", stream=True, messages=[{"role": "user", "content": PROMPT}]):
            if chunk.choices:
                got += chunk.choices[0].delta.content or ""
    except openai.APIError as exc:
        got += f"<{type(exc).__name__}>"
    return got


def test_the_readme_screenshot_command_runs_verbatim(phoenix, tmp_path):
    """README's screenshot command, on the module's Phoenix (before the next test stops it)."""
    from tests.phoenix_screenshot import CHROMIUM
    from tests.test_readme_team_scale import REPO, SCREENSHOT, shell_env

    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM} (set CHROMIUM to another binary)")
    assert SCREENSHOT in shell_blocks("Team scale")
    env = {**shell_env(), "STREAMTAP_PHOENIX_URL": phoenix.url, "PYTHONPATH": str(REPO)}
    result = subprocess.run(SCREENSHOT, shell=True, cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    picture = (tmp_path / "docs" / "phoenix-spans.png").read_bytes()
    assert picture[:8] == b"\x89PNG\r\n\x1a\n" and len(picture) > 10_000
    assert phoenix.spans("streamtap")  # what it photographed is there


def test_spans_in_phoenix_say_what_broke_and_hold_no_content(fake, phoenix, tmp_path):
    project = f"streamtap-e2e-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "streamtap.toml"
    config.write_text(f"[export.otlp]\nproject = \"{project}\"\n"
                      "queue_limit = 4\nbatch_size = 1\n")
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, "--config", str(config),
                         "--otlp-endpoint", phoenix.url)
    try:
        session = new_session()
        assert CANARY_OUTPUT in chat(proxy, fake, Scenario(chat_text_stream(3)), session,
                                     "complete")
        chat(proxy, fake, Scenario(chat_tool_stream(5, finish=False), ending="reset"), session,
             "reset")
        chat(proxy, fake, Scenario(wrapped_error_stream()), session, "wrapped")
        records = {r["message_id"]: r for r in proxy.records(session, 3)}

        spans = wait_for(lambda: len(found := phoenix.spans(project)) >= 3 and found, timeout=60)
        assert spans, (f"no spans in Phoenix project {project}:\n{proxy.log()}\n"
                       f"{phoenix.log()[-3000:]}")
        by_message = {span["attributes"]["streamtap.message_id"]: span for span in spans}
        assert set(by_message) == {"complete", "reset", "wrapped"}
        for message, span in by_message.items():
            record = records[message]
            attrs = span["attributes"]
            assert span["name"] == "chat gpt-test"
            assert (attrs["gen_ai.operation.name"], attrs["gen_ai.request.model"],
                    attrs["gen_ai.request.stream"]) == ("chat", "gpt-test", True)
            assert (attrs["server.address"], attrs["server.port"]) == ("127.0.0.1", fake.port)
            assert attrs["session.id"] == session and attrs["streamtap.trace_id"] == \
                record["trace_id"]
            assert span["context"]["span_id"] == record["trace_id"]
            frame_events = [e for e in span["events"] if e["name"] == "streamtap.frame"]
            assert len(frame_events) == record["stream"]["frame_count"] == \
                attrs["streamtap.frame_count"]
            assert attrs["streamtap.boundary"] == record["outcome"]["boundary"]

        complete, reset, wrapped = (by_message[m] for m in ("complete", "reset", "wrapped"))
        assert complete["status_code"] != "ERROR"
        assert complete["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
        assert complete["attributes"]["gen_ai.response.id"] == "chatcmpl-e2e1"
        assert complete["attributes"]["streamtap.boundary"] == "none"

        assert reset["status_code"] == "ERROR"
        assert reset["status_message"] == records["reset"]["outcome"]["summary"]
        assert (reset["attributes"]["streamtap.boundary"], reset["attributes"]["streamtap.phase"],
                reset["attributes"]["error.type"]) == ("transport", "tool_input",
                                                       "transport:upstream_reset")
        assert reset["attributes"]["gen_ai.response.finish_reasons"] == ["error"]

        assert wrapped["status_code"] == "ERROR"
        assert wrapped["attributes"]["streamtap.boundary"] == "provider_error"
        assert wrapped["attributes"]["streamtap.evidence"][:2] == ["wrapped_chunk",
                                                                   "server_error"]
        phase_points = [e["name"] for e in wrapped["events"] if e["name"] != "streamtap.frame"]
        assert phase_points[:3] == ["streamtap.first_byte", "streamtap.first_event",
                                    "streamtap.first_progress"]
        assert phase_points[-1] == "streamtap.end"

        # No canary anywhere Phoenix stored or serves: the REST answer, and its files on disk.
        served = json.dumps(spans)
        assert "CANARY" not in served and "sk-" not in served
        for path in (phoenix.workdir / "phoenix-data").rglob("*"):
            if path.is_file():
                assert b"CANARY" not in path.read_bytes(), path

        # Phoenix goes away mid-run: forwarding is unaffected, the drop is counted.
        exported = httpx.get(proxy.url() + "/_streamtap/health", timeout=5).json()["otlp"]
        assert exported["exported"] == 3 and exported["dropped"] == 0
        phoenix.stop()
        started = time.monotonic()
        assert CANARY_OUTPUT in chat(proxy, fake, Scenario(chat_text_stream(3)), session,
                                     "after-phoenix")
        assert time.monotonic() - started < 5.0  # the 10 s export timeout is not in it
        proxy.records(session, 4)
        health = wait_for(lambda: (h := httpx.get(proxy.url() + "/_streamtap/health",
                                                  timeout=5).json())["otlp"]["dropped"] and h,
                          timeout=30)
        assert health, "the span for the request after Phoenix stopped was not counted"
        assert health["otlp"]["dropped"] == 1 and health["otlp"]["state"] == "failing"
        assert health["otlp"]["exported"] == 3 and health["records_written"] == 4
    finally:
        proxy.stop()
