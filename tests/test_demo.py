"""`streamtap demo`: no API key, no network; four requests through a real proxy in front of the
bundled corpus, and the four verdicts on the terminal within seconds. `--keep` serves the page."""

import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

# Every test here starts a process or a server (tests/README.md).
pytestmark = pytest.mark.e2e


def test_demo_prints_the_four_verdicts_and_shows_the_failures(tmp_path):
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "streamtap", "demo"], capture_output=True,
                            text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert time.monotonic() - started < 30
    assert "the client saw ClientPayloadError" in out  # the reset reached the client as one
    table = out.split("$ streamtap ls", 1)[1].split("$ streamtap show", 1)[0]
    # the outcome cell, then what the client was not told (a silent truncation, an error event)
    outcomes = re.findall(r"  (ok|FAIL [^\s,]+)(?:, client sees (\S+))?\s*$", table, flags=re.M)
    assert sorted(outcomes) == sorted([("ok", ""), ("FAIL transport/tool_input", ""),
                                       ("FAIL provider_error/text", "in_band_error"),
                                       ("FAIL provider_close/text", "silent_truncation")])
    shows = out.split("$ streamtap show")[1:]
    assert len(shows) == 3
    firsts = sorted(show.splitlines()[1] for show in shows)
    assert firsts[0].startswith("FAIL provider_close/text  openai (or a gateway in between) "
                                "closed the stream cleanly")
    assert firsts[1].startswith("FAIL provider_error/text  openai sent an error inside the "
                                "stream (server_error), as a wrapped chunk")
    assert firsts[2].startswith("FAIL transport/tool_input  The connection to openai was reset "
                                "while the model was still writing the arguments of tool call")
    # Recorded where serve writes, so the other commands read them right after.
    assert len(list((tmp_path / "streamtap-traces" / "demo").glob("*.json"))) == 4


def test_demo_keep_serves_the_live_page_until_interrupted(tmp_path):
    demo = subprocess.Popen([sys.executable, "-m", "streamtap", "demo", "--keep"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    try:
        url = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = demo.stdout.readline()
            if not line:
                break
            if line.startswith("live page: "):
                url = line.split()[2]
                break
        assert url is not None, demo.stderr.read()
        page = httpx.get(url, timeout=10).text
        assert page.count('class="trace-row') == 4 and page.count("failure-marker") == 3
    finally:
        demo.send_signal(signal.SIGINT)
        assert demo.wait(15) == 0
