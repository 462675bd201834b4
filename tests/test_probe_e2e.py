"""`streamtap probe` against real clients, each in its own process as a user runs it: a Python
script on the openai SDK, a Node script on fetch, a Node script on the official `openai` npm
package, and a Python httpx script given `{base_url}`. The grades asserted are ones a reviewer
can check by hand (README "Probing your client" shows the fetch client's whole table)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clients import env_without_providers
from tests.programs import found_or_skip, in_ci

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
NPM_CACHE = Path.home() / ".cache" / "streamtap-ci" / "npm-openai"


def probe(tmp_path: Path, *args: str, expect_exit: int | None = None,
          env: dict | None = None) -> tuple[int, dict, str]:
    """`streamtap probe --format json ARGS` with a trace dir in tmp_path (and `env` added to
    its environment): exit status, the JSON it printed ({} when none), stderr."""
    done = subprocess.run([sys.executable, "-m", "streamtap", "probe", "--format", "json",
                           "--trace-dir", str(tmp_path / "traces"), *args],
                          capture_output=True, text=True, env={**env_without_providers(), **(env or {})},
                          timeout=300,
                          cwd=tmp_path)
    if expect_exit is not None:
        assert done.returncode == expect_exit, done.stderr + done.stdout
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}, done.stderr


def rows(data: dict) -> dict[str, dict]:
    return {row["ending"]: row for row in data["endings"]}


def test_list_prints_the_catalog_and_a_typo_gets_the_closest_ending(capsys):
    from streamtap.proxy.cli import main

    assert main(["probe", "--list"]) == 0
    listing = capsys.readouterr().out
    assert "clean_end_between_events" in listing and "close; at=event:text_delta:3" in listing
    assert "expect: must not be silent" in listing
    assert main(["probe", "--endings", "http_50", "--", "node", "client.mjs"]) == 2
    assert "no ending `http_50` in the catalog; did you mean `http_500`?" in capsys.readouterr().err
    assert main(["probe"]) == 2
    assert "no client command: put it after `--`" in capsys.readouterr().err


def streamtap(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "streamtap", *args], capture_output=True,
                          text=True, check=True, timeout=60).stdout


def test_node_fetch_is_silent_on_a_clean_close_and_raises_terminated_on_a_reset(tmp_path, node):
    code, data, _ = probe(tmp_path, "--timeout", "10", "--endings",
                          "http_500,reset_mid_tool_args,clean_end_between_events",
                          "--", node, str(EXAMPLES / "probe-fetch-client.mjs"))
    assert code == 1  # a grade broke its expectation
    assert data["dialect"] == "openai-chat" and data["probe"].startswith("probe-")
    got = rows(data)
    # plain fetch iteration: a close between events without [DONE] ends the loop, exit 0
    assert (got["clean_end_between_events"]["grade"], got["clean_end_between_events"]["meets"],
            got["clean_end_between_events"]["exit_status"]) == ("SILENT", False, 0)
    # a reset in the tool call's arguments: undici's words, one request
    tool = got["reset_mid_tool_args"]
    assert (tool["grade"], tool["error_line"], tool["requests"], tool["meets"]) == (
        "raised", "TypeError: terminated", 1, True)
    # a 500 is a resolved response for fetch: the script's own check throws, nothing retries
    assert (got["http_500"]["grade"], got["http_500"]["error_line"],
            got["http_500"]["requests"]) == ("raised", "Error: HTTP 500", 1)

    # every request is a record of the probe's session: ls, show and report read it
    session, traces = data["probe"], str(tmp_path / "traces")
    listing = streamtap("ls", "--trace-dir", traces, "--session", session)
    assert len([line for line in listing.splitlines() if session in line]) == 4  # + first run
    assert "injected" in streamtap("show", "--trace-dir", traces, tool["traces"][0])
    report = tmp_path / "report.html"
    streamtap("report", "--trace-dir", traces, "--session", session, "-o", str(report))
    html = report.read_text()
    assert f"probe <code>{session}</code> (openai-chat)" in html
    assert "<td>clean_end_between_events</td><td>SILENT</td>" in html


def test_expect_pins_a_teams_grades_and_fails_when_one_changes(tmp_path, node):
    client = ["--", node, str(EXAMPLES / "probe-fetch-client.mjs")]
    _, first, _ = probe(tmp_path, "--endings", "clean_end_between_events", *client,
                        expect_exit=1)
    accepted = tmp_path / "accepted.json"
    accepted.write_text(json.dumps(first))  # the team accepts today's SILENT
    _, again, _ = probe(tmp_path, "--endings", "clean_end_between_events", "--expect",
                        str(accepted), *client, expect_exit=0)
    assert rows(again)["clean_end_between_events"]["why"] == "as pinned"
    # a team that pinned `raised` (its client used to check for [DONE]) sees the regression
    accepted.write_text(json.dumps({"endings": [{"ending": "clean_end_between_events",
                                                 "grade": "raised"}]}))
    _, regressed, _ = probe(tmp_path, "--endings", "clean_end_between_events", "--expect",
                            str(accepted), *client, expect_exit=1)
    assert rows(regressed)["clean_end_between_events"]["why"] == "pinned raised, got SILENT"
    # a pinned ending the run did not grade is said, not dropped
    accepted.write_text(json.dumps({"endings": [{"ending": "http_500", "grade": "raised"}]}))
    _, missing, _ = probe(tmp_path, "--endings", "clean_end_between_events", "--expect",
                          str(accepted), *client, expect_exit=1)
    assert missing["missing_pins"] == ["http_500"]


@pytest.mark.e2e
def test_the_openai_python_sdk_retries_a_500_and_waits_out_a_429(tmp_path):
    client = ["--", sys.executable, str(EXAMPLES / "probe_openai_client.py")]
    _, data, _ = probe(tmp_path, "--timeout", "20", "--endings",
                       "http_500,http_429_retry_after,clean_end_between_events,stall_mid_stream,"
                       "provider_error_event", *client)
    got = rows(data)
    # the SDK retries a 500 twice, then raises: three requests
    assert (got["http_500"]["grade"], got["http_500"]["requests"]) == ("raised", 3)
    assert got["http_500"]["error_line"].startswith("openai.InternalServerError: Error code: 500")
    # ... and a 429 with retry-after: 1 after a second each time
    assert (got["http_429_retry_after"]["requests"], got["http_429_retry_after"]["meets"]) == (
        3, True)
    assert got["clean_end_between_events"]["grade"] == "SILENT"
    assert got["provider_error_event"]["error_line"] == (
        "openai.APIError: streamtap injected error")
    # its 2 s timeout fires on a stalled body
    assert got["stall_mid_stream"]["grade"] == "raised"
    assert got["stall_mid_stream"]["error_line"] == "openai.APITimeoutError: Request timed out."
    # --once: the retry after the first 500 gets a complete stream
    _, once, _ = probe(tmp_path, "--once", "--endings", "http_500", *client, expect_exit=0)
    assert (rows(once)["http_500"]["grade"], rows(once)["http_500"]["requests"]) == (
        "recovered", 2)


@pytest.fixture(scope="module")
def openai_npm(node) -> Path:
    """A folder with the official `openai` npm package installed (from the registry, once per
    machine) and the example client copied beside it, so its `import "openai"` resolves."""
    npm = found_or_skip(shutil.which("npm"), "npm", "npm", "the openai npm SDK probe test")
    if not (NPM_CACHE / "node_modules" / "openai").is_dir():
        NPM_CACHE.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "openai"],
                              cwd=NPM_CACHE, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            reason = f"`npm install openai` failed (no registry?): {done.stderr.strip()[-300:]}"
            pytest.fail(reason) if in_ci() else pytest.skip(reason)
    shutil.copy(EXAMPLES / "probe-openai-npm.mjs", NPM_CACHE)
    return NPM_CACHE / "probe-openai-npm.mjs"


def test_the_openai_npm_sdk_retries_a_500_and_waits_on_a_stalled_body(tmp_path, node,
                                                                      openai_npm):
    _, data, _ = probe(tmp_path, "--timeout", "6", "--endings",
                       "http_500,reset_mid_text,clean_end_between_events,stall_mid_stream",
                       "--", node, str(openai_npm), expect_exit=1)
    got = rows(data)
    assert (got["http_500"]["grade"], got["http_500"]["requests"]) == ("raised", 3)
    assert got["http_500"]["error_line"].startswith("InternalServerError: 500")
    assert (got["reset_mid_text"]["grade"], got["reset_mid_text"]["error_line"]) == (
        "raised", "TypeError: terminated")
    assert got["clean_end_between_events"]["grade"] == "SILENT"
    # its 2 s timeout does not cover a body that stalls: killed at the probe's limit
    stall = got["stall_mid_stream"]
    assert (stall["grade"], stall["exit_status"]) == ("HUNG", None)
    assert 6 <= stall["seconds"] < 15


HTTPX_ANTHROPIC = '''
import os, sys, httpx
base = sys.argv[1] if len(sys.argv) > 1 else os.environ["STREAMTAP_BASE_URL"]
with httpx.stream("POST", base + "/v1/messages", timeout=float(os.environ.get("WAIT", 2)),
                  json={"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
                        "messages": [{"role": "user", "content": "hi"}]}) as response:
    response.raise_for_status()
    for line in response.iter_lines():
        pass
'''


@pytest.mark.e2e
def test_base_url_in_the_arguments_fits_the_dialect_and_its_own_endings_run(tmp_path):
    script = tmp_path / "client.py"
    script.write_text(HTTPX_ANTHROPIC)
    _, data, _ = probe(tmp_path, "--dialect", "anthropic-messages", "--endings",
                       "anthropic_529,reset_mid_text", "--", sys.executable, str(script),
                       "{base_url}")
    got = rows(data)
    assert data["dialect"] == "anthropic-messages"
    assert (got["anthropic_529"]["grade"], got["anthropic_529"]["skipped"]) == ("raised", None)
    assert got["anthropic_529"]["error_line"].startswith("httpx.HTTPStatusError")
    assert got["reset_mid_text"]["error_line"].startswith("httpx.ReadError")
    # STREAMTAP_BASE_URL is the same URL, for a client that reads it from the environment
    _, data, _ = probe(tmp_path, "--dialect", "anthropic-messages", "--endings", "http_500",
                       "--", sys.executable, str(script), expect_exit=0)
    assert rows(data)["http_500"]["error_line"].startswith("httpx.HTTPStatusError")


@pytest.mark.e2e
def test_a_client_still_running_at_the_limit_is_killed_and_graded_hung(tmp_path, monkeypatch):
    script = tmp_path / "client.py"
    script.write_text(HTTPX_ANTHROPIC)
    monkeypatch.setenv("WAIT", "600")  # no timeout of its own to speak of
    _, data, _ = probe(tmp_path, "--timeout", "3", "--dialect", "anthropic-messages",
                       "--endings", "stall_mid_stream", "--", sys.executable, str(script),
                       expect_exit=1)
    stall = rows(data)["stall_mid_stream"]
    assert (stall["grade"], stall["exit_status"], stall["meets"]) == ("HUNG", None, False)
    assert 3 <= stall["seconds"] < 8
    assert stall["why"] == "breaks: must end within the client's own timeout"


@pytest.mark.parametrize("client, args, says", [
    ([sys.executable, "-c", "pass"], [], "the client made no request to streamtap"),
    ([sys.executable, "-c", "import os, urllib.request; urllib.request.urlopen("
      "os.environ['OPENAI_BASE_URL'] + '/chat/completions', data=b'{}').read(); "
      "raise SystemExit('my client gave up')"], [],
     "the client fails on its own, on a complete stream (exit status 1): my client gave up"),
    ([sys.executable, "-c", "import os, urllib.request; urllib.request.urlopen("
      "os.environ['OPENAI_BASE_URL'] + '/chat/completions', data=b'{}').read()"],
     ["--dialect", "anthropic-messages"],
     "the dialect is wrong: anthropic-messages was named, the client speaks openai-chat"),
    (["no-such-client-command"], [], "cannot run `no-such-client-command`"),
])
@pytest.mark.e2e
def test_the_first_run_must_succeed_or_the_probe_says_why(tmp_path, client, args, says):
    code, data, stderr = probe(tmp_path, *args, "--", *client)
    assert (code, data) == (2, {})
    assert says in stderr


@pytest.mark.e2e
def test_the_client_gets_placeholder_keys_even_where_real_ones_are_set(tmp_path):
    real = "sk-proj-" + "Zq8RtW3yUe6IoP1aSd4FgH7jKl0ZxC2v"
    client = ("import os, urllib.request; key = os.environ['OPENAI_API_KEY']; "
              "assert key == 'sk-streamtap-fake', 'the client got the real key'; "
              "urllib.request.urlopen(os.environ['OPENAI_BASE_URL'] + '/chat/completions', "
              "data=b'{}').read()")
    _, data, _ = probe(tmp_path, "--endings", "http_500", "--", sys.executable, "-c", client,
                       env={"OPENAI_API_KEY": real}, expect_exit=0)
    assert rows(data)["http_500"]["error_line"] == (
        "urllib.error.HTTPError: HTTP Error 500: Internal Server Error")
    assert real not in (tmp_path / "traces").joinpath(data["probe"], "probe.jsonl").read_text()


@pytest.mark.e2e
def test_the_fake_answers_text_or_a_tool_call_as_told_whatever_the_request_asks():
    import httpx

    from streamtap import FakeProvider

    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}}}}]
    asks = {"plain": {"model": "m", "stream": True, "messages": []},
            "tools": {"model": "m", "stream": True, "messages": [], "tools": tools}}
    with FakeProvider() as fake:
        def answer(body: dict) -> str:
            return httpx.post(fake.url + "/v1/chat/completions", json=body, timeout=10).text

        assert "tool_calls" not in answer(asks["plain"]) and "lookup" in answer(asks["tools"])
        fake.answer_with("tool_call")  # a stand-in tool when the request defines none
        assert '"get_weather"' in answer(asks["plain"]) and "lookup" in answer(asks["tools"])
        fake.answer_with("text")
        assert "tool_calls" not in answer(asks["tools"])
        fake.answer_with(None)
        assert "lookup" in answer(asks["tools"])
        with pytest.raises(ValueError, match="answer_with takes 'text', 'tool_call' or None"):
            fake.answer_with("tools")
