"""No view shows content or secrets: canaries planted in prompts, tool arguments, outputs, keys,
cookies and queries appear in none of `ls`, `show`, `tail`, the live page, the report and the
HAR, offline (fixture records) and live (a real request through a running proxy)."""

import io
import json
import subprocess
import sys
import time

import httpx
import pytest

from streamtap.diagnostics.views.text import plain, tail_row
from streamtap.proxy.readout import commands
from streamtap.proxy.readout.pages import live_page, report
from streamtap.proxy.readout.traces import public, read_index
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import CANARY_ARG, CANARY_OUTPUT, chat_text_stream, chat_tool_stream
from tests.tracefixtures import (CANARIES, CANARY_COOKIE, CANARY_KEY, CANARY_PROMPT,
                                 CANARY_QUERY, build)

# Every test here starts a process or a server (tests/README.md).
pytestmark = pytest.mark.e2e


def assert_clean(name: str, text: str) -> None:
    found = [canary for canary in CANARIES if canary in text]
    assert not found, f"{name} shows {found}"


def test_canaries_reach_the_recorder_but_no_offline_view(tmp_path):
    records = build(tmp_path)
    # The fixtures really carry them in: prompts, tool arguments and outputs are in the frames
    # the recorder was fed, keys/cookies/queries in its request.
    assert CANARY_ARG.encode() in b"".join(chat_tool_stream(4))
    assert CANARY_OUTPUT.encode() in b"".join(chat_text_stream(4))
    views = {}
    out = io.StringIO()
    commands.ls(tmp_path, out=out)
    views["ls"] = out.getvalue()
    out = io.StringIO()
    commands.ls(tmp_path, fmt="json", out=out)
    views["ls --format json"] = out.getvalue()
    for record in records:
        out = io.StringIO()
        commands.show(tmp_path, record["trace_id"], out=out)
        views[f"show {record['trace_id']}"] = out.getvalue()
    views["tail"] = plain([tail_row(public(line)) for line in read_index(tmp_path).lines])
    views["page"] = live_page(tmp_path, "nonce")
    report(tmp_path, tmp_path / "r.html")
    views["report"] = (tmp_path / "r.html").read_text()
    subprocess.run([sys.executable, "-m", "streamtap", "export", "--har", "--trace-dir",
                    str(tmp_path), "-o", str(tmp_path / "s.har")], check=True)
    views["har"] = (tmp_path / "s.har").read_text()
    for name, text in views.items():
        assert text.strip(), f"{name} is empty"
        assert_clean(name, text)


def test_no_canary_in_any_live_view(fake, tmp_path):
    proxy = ProxyProcess(tmp_path, {"fake": fake.url})
    prefix = fake.add(Scenario(chat_tool_stream(5, finish=False), ending="reset"))
    session = new_session()
    tail = subprocess.Popen([sys.executable, "-m", "streamtap", "tail", "--proxy", proxy.url()],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)
        try:
            httpx.post(proxy.url("fake") + prefix + f"/v1/chat/completions?key={CANARY_QUERY}",
                       json={"model": "gpt-c", "stream": True,
                             "messages": [{"role": "user", "content": CANARY_PROMPT}]},
                       headers={"authorization": f"Bearer {CANARY_KEY}",
                                "cookie": f"sid={CANARY_COOKIE}",
                                "x-streamtap-session": session}, timeout=10)
        except httpx.HTTPError:
            pass
        record = proxy.record(session)
        seen = fake.last(prefix)  # the canaries did go through the proxy
        assert CANARY_PROMPT.encode() in seen.body and CANARY_QUERY in seen.raw_path
        assert any(CANARY_KEY in value for _, value in seen.headers)
        time.sleep(0.5)
        page = httpx.get(proxy.url() + "/_streamtap/", timeout=10).text
        fragment = httpx.get(proxy.url() + f"/_streamtap/traces/{record['trace_id']}",
                             timeout=10).text
    finally:
        tail.terminate()
        tail_out = tail.communicate(timeout=10)[0].decode()
        proxy.stop()
    assert record["trace_id"][:8] in tail_out and "FAIL transport/tool_input" in tail_out
    assert record["trace_id"] in page and "tool_input" in fragment
    for name, text in {"tail": tail_out, "page": page, "fragment": fragment,
                       "record": json.dumps(record), "log": proxy.log()}.items():
        assert_clean(name, text)
