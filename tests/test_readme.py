"""README is a contract: CI runs exactly its test command, and every shell example of the fault
sections (README's first example, then docs/faults.md's) runs as written against a local fake
provider, doing what the section says."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anthropic
import openai
import pytest

from streamtap.diagnostics.dialects.events import EVENT_KINDS
from streamtap.proxy.replay.bundled import bundled_samples_dir
from streamtap.proxy.replay.playable import load_one
from tests.fakeprovider import FakeProvider, Scenario
from tests.proxyproc import ProxyProcess
from tests.readme import code_blocks, section, shell_blocks
from tests.streams import anthropic_text_stream, chat_text_stream, responses_text_stream

REPO = Path(__file__).resolve().parent.parent


def quick_start_commands() -> list[str]:
    return shell_blocks("Quick start", document="README.md")


def test_quick_start_has_a_serve_and_a_test_command():
    serve, test = quick_start_commands()[:2]
    assert "pip install ." in serve and serve.endswith("streamtap serve")
    assert "pip install '.[test]'" in test and "pytest" in test


def test_ci_runs_the_readme_test_command():
    test_command = quick_start_commands()[1]
    assert test_command in (REPO / ".ci" / "run").read_text()


def test_example_config_loads_and_documents_every_option():
    from dataclasses import fields

    from streamtap.proxy.config import Config, Watchdog, load_file

    config = load_file(REPO / "config.example.toml")
    assert config.routes["my-gateway"].dialect == "openai-chat"
    text = (REPO / "config.example.toml").read_text()
    for option in [f.name for f in fields(Config)] + [f.name for f in fields(Watchdog)]:
        # `#[[faults]]`: the example rule is commented out, so it arms nothing
        documented = re.search(rf"^#?\[{{0,2}}{option}\]{{0,2}}( =|$)", text, re.M)
        assert documented, f"{option} is not documented"


def test_example_config_documents_every_fault_key():
    from streamtap.diagnostics.faults.rules import _RULE_KEYS

    text = (REPO / "config.example.toml").read_text()
    for key in _RULE_KEYS:
        assert re.search(rf"^#{key} =", text, re.M), f"fault key {key} is not documented"


def test_example_fault_rule_arms_once_uncommented(tmp_path):
    from streamtap.proxy.config import load_file

    text = (REPO / "config.example.toml").read_text()
    assert load_file(REPO / "config.example.toml").faults == ()
    uncommented = tmp_path / "armed.toml"
    uncommented.write_text(re.sub(r"^#(\[\[faults\]\]|\w+ =)", r"\1", text, flags=re.M))
    [rule] = load_file(uncommented).faults
    assert (rule.name, rule.action, rule.at) == ("reset-mid-tool-call", "reset",
                                                 "event:tool_input_delta:5")


# -- "Reproducing a gateway disconnect" and the fault rules: every shell example, as written -----
FAULTS = "Reproducing a gateway disconnect"  # README: the first example
FAULT_RULES = "Fault rules: actions, triggers, examples"  # docs/faults.md: the rest


# What `streamtap replay` answers a chat request that defines tools: a call in 12 argument
# pieces, so the 5th tool_input_delta is in the middle of its arguments.
TOOL_SAMPLE = "openai__openai-chat__terminal__2"


def bundled_tool_call() -> list[bytes]:
    sample = load_one(bundled_samples_dir() / f"{TOOL_SAMPLE}.sample.json")
    return [data for _, data in sample.writes]


class ReadmeUpstream(FakeProvider):
    """One upstream for the `openai` and `anthropic` routes: the stream a path asks for."""

    async def _handle(self, request):
        body = await request.read()
        if request.path.endswith("/responses"):
            chunks = responses_text_stream(5)
        elif request.path.endswith("/messages"):
            chunks = anthropic_text_stream(12)
        else:
            chunks = bundled_tool_call() if b'"tools"' in body else chat_text_stream(5)
        self.scenarios[request.match_info["name"]] = Scenario(chunks)
        return await super()._handle(request)


@pytest.fixture(scope="module")
def readme_proxy(tmp_path_factory):
    upstream = ReadmeUpstream().start()
    base = upstream.url + "/s/readme"
    upstream.seen["readme"] = []
    proxy = ProxyProcess(tmp_path_factory.mktemp("readme"), {"openai": base, "anthropic": base})
    yield proxy
    proxy.stop()
    upstream.stop()


class Shell:
    """Runs a README command exactly as written, from the repository root. Only where it goes
    differs: `127.0.0.1:8787` reaches the test's proxy (curl's --connect-to, the CLI's
    --proxy), because a test cannot own port 8787 on a shared machine."""

    def __init__(self, port: int):
        self.prelude = (
            f'curl() {{ command curl -sS --max-time 20 '
            f'--connect-to 127.0.0.1:8787:127.0.0.1:{port} "$@"; }}\n'
            f'streamtap() {{ "{sys.executable}" -m streamtap "$@" '
            f'--proxy http://127.0.0.1:{port}; }}\n')

    def run(self, command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", self.prelude + command], cwd=REPO,
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "OPENAI_API_KEY": "sk-test",
                                   "ANTHROPIC_API_KEY": "sk-ant-test"})


def test_the_fault_rules_list_every_event_kind_and_document_name():
    text = " ".join(section(FAULT_RULES).split())
    for kind in EVENT_KINDS:
        assert f"`{kind}`" in text
    assert "`--name`" in text and "`--replace`" in text


@pytest.mark.e2e
def test_every_fault_example_runs_as_written_and_does_what_readme_says(readme_proxy):
    proxy = readme_proxy
    shell = Shell(proxy.port)
    commands = iter(shell_blocks(FAULTS, document="README.md") + shell_blocks(FAULT_RULES))

    def next_command(starts: str) -> subprocess.CompletedProcess:
        command = next(commands)
        assert command.startswith(starts), command
        result = shell.run(command)
        return result

    def armed(result: subprocess.CompletedProcess) -> dict:
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["faults"][0]

    # 1. curl with the shipped body: the reset lands after the 5th tool_input_delta
    result = next_command("curl -N http://127.0.0.1:8787/openai/v1/chat/completions")
    assert result.returncode == 56 and "Connection reset by peer" in result.stderr
    record = proxy.record("default")
    assert record["request"]["tool_names"] == ["apply_patch"]
    assert (record["outcome"]["boundary"], record["outcome"]["phase"]) == ("injected",
                                                                           "tool_input")
    assert "after the 5th tool_input_delta" in record["outcome"]["summary"]
    # the cut lands after 5 of the call's 12 argument pieces: the client held half an object
    assert "while the model was still writing the arguments of tool call `apply_patch` (5 " \
        "chunks)" in record["outcome"]["summary"]
    [call] = record["stream"]["tool_calls"]
    assert (call["arg_chunks"], call["arg_parsed"], call["completed"]) == (5, False, False)

    def openai_client(session: str, **options) -> openai.OpenAI:
        return openai.OpenAI(base_url=proxy.url("openai") + "/v1", api_key="sk-test",
                             default_headers={"x-streamtap-session": session},
                             **{"max_retries": 0, "timeout": 10, **options})

    # 2. close before response.completed, for the session named: the SDK ends silently
    assert armed(next_command("streamtap fault add --action close"))["name"] == "close"
    events = list(openai_client("my-debug-run").responses.create(
        model="gpt-test", input="hi", stream=True))
    types = [event.type for event in events]
    assert types.count("response.output_text.delta") == 3 and "response.completed" not in types
    record = proxy.record("my-debug-run")
    assert record["outcome"]["boundary"] == "injected" and record["fault"]["action"] == "close"

    # 3. the wrapped error chunk in a Responses stream
    assert armed(next_command("streamtap fault add --action error_chunk --set style=wrapped"))
    with pytest.raises(openai.APIError):
        list(openai_client("readme-wrapped").responses.create(model="gpt-test", input="hi",
                                                              stream=True))
    record = proxy.record("readme-wrapped")
    assert "injected_error_chunk" in record["outcome"]["evidence"]

    # 3b. an error body in no documented shape: the SDK raises nothing, the record names it
    assert armed(next_command("streamtap fault add --name peer-closed"))["name"] == "peer-closed"
    events = list(openai_client("readme-body").responses.create(model="gpt-test", input="hi",
                                                                stream=True))
    assert "response.completed" not in [event.type for event in events]
    record = proxy.record("readme-body")
    assert [(e["shape"], e["code"]) for e in record["stream"]["errors"]] == [
        ("error_frame_unknown_shape", "InternalError")]

    # 4. Anthropic: the error event mid-answer, then three 529s the SDK retries through
    first = armed(next_command("streamtap fault add --action error_chunk --at event:text_delta:10"))
    second = armed(next_command("streamtap fault add --action http_error --set status=529"))
    assert (first["name"], second["name"]) == ("error_chunk-2", "http_error")
    client = anthropic.Anthropic(base_url=proxy.url("anthropic"), api_key="sk-ant-test",
                                 default_headers={"x-streamtap-session": "readme-anthropic"})
    for _ in range(2):
        with pytest.raises(anthropic.APIError):
            with client.messages.stream(model="claude-test", max_tokens=64,
                                        messages=[{"role": "user", "content": "hi"}]) as stream:
                list(stream)
    records = proxy.records("readme-anthropic", 4)
    assert records[0]["fault"]["action"] == "error_chunk"
    assert "after the 10th text_delta" in records[0]["outcome"]["summary"]
    assert [r["downstream"]["status"] for r in records[1:]] == [529, 529, 529]
    assert [r["request"]["headers"].get("x-stainless-retry-count") for r in records[1:]] == [
        "0", "1", "2"]

    # 5. the stall: kept open until the client gives up, and recorded as such
    assert armed(next_command("streamtap fault add --action stall"))["name"] == "stall"
    with pytest.raises(openai.APITimeoutError):
        list(openai_client("readme-stall", timeout=1.5).chat.completions.create(
            model="gpt-test", messages=[], stream=True))
    record = proxy.record("readme-stall")
    assert record["outcome"]["boundary"] == "injected" and "client_gave_up" in record[
        "outcome"]["evidence"]

    # 6. list (fired, remaining, spent), remove one, clear the rest
    listed = {rule["name"]: rule for rule in armed_list(next_command("streamtap fault list"))}
    assert (listed["http_error"]["fired"], listed["http_error"]["remaining"],
            listed["http_error"]["spent"]) == (3, 0, True)
    assert (listed["stall"]["fired"], listed["stall"]["spent"]) == (1, True)
    assert next_command("streamtap fault remove stall").returncode == 0
    assert next_command("streamtap fault clear").returncode == 0
    assert armed_list(shell.run("streamtap fault list")) == []
    assert next(commands, None) is None, "a documented command this test does not check"


@pytest.mark.e2e
def test_the_curl_example_of_pointing_clients_runs_as_written(readme_proxy):
    """The whole block as a shell runs it (its JSON body spans two lines): an Anthropic stream
    through the proxy, recorded under the session its header names, the key not recorded."""
    proxy = readme_proxy
    (block,) = code_blocks("Pointing clients at it", "sh")
    before = len(list((proxy.trace_dir / "my-debug-run").glob("*.json")))
    result = Shell(proxy.port).run(block)
    assert result.returncode == 0, result.stderr
    assert "event: message_stop" in result.stdout
    record = proxy.records("my-debug-run", before + 1)[-1]
    assert (record["route"], record["request"]["model"], record["outcome"]["boundary"]) == (
        "anthropic", "claude-sonnet-4-5", "none")
    assert "x-api-key" not in record["request"]["headers"]


def armed_list(result: subprocess.CompletedProcess) -> list[dict]:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["faults"]


def test_readme_says_what_a_route_url_is_and_shows_the_banner_as_printed():
    from streamtap.proxy.config import Config
    from streamtap.proxy.serve.run import banner

    text = " ".join(section("Pointing clients at it").split())
    assert "A route URL is the upstream base that streamtap puts in front of" in text
    quick = section("Quick start")
    printed = banner(Config(), 8787).splitlines()
    for line in quick.splitlines():
        if line.startswith(("routes:", "  route ", "  openai ", "  anthropic ", "  gemini ")):
            assert line in printed, line
