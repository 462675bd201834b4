"""README's sections on the fake provider, the pytest plugin, the Python API and Node, run as
written: shell commands verbatim (on the ports README names), code blocks as they are."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import port_free
from tests.readme import code_blocks, shell_blocks

# Every test here starts a process or a server (tests/README.md).
pytestmark = pytest.mark.e2e

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
BIN = str(Path(sys.executable).parent)  # where `streamtap` is installed
NO_KEY = "No API key? Use a local fake provider"
TESTING = "Testing your client: the pytest plugin and the Python API"
NODE = "Node and other languages"


def _env() -> dict:
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    return env




def _wait_listening(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the command exited: {log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}: {log.read_text()}")


def test_no_api_key_section_runs_as_written(tmp_path):
    replay, serve, curl = shell_blocks(NO_KEY)
    assert replay == "streamtap replay --port 8788"
    assert serve.startswith("streamtap serve --route openai=http://127.0.0.1:8788")
    # README names fixed ports: wait (bounded) for another run on this machine to let them go
    deadline = time.monotonic() + 60
    while not (port_free(8787) and port_free(8788)):
        assert time.monotonic() < deadline, "ports 8787/8788 stay taken; free them to run this"
        time.sleep(0.5)
    processes = []
    try:
        for command, port in ((replay, 8788), (serve, 8787)):
            log = tmp_path / f"{port}.log"
            process = subprocess.Popen(command, shell=True, cwd=tmp_path, env=_env(),
                                       stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                       start_new_session=True)
            processes.append(process)
            _wait_listening(port, process, log)
        openai_snippet, anthropic_snippet = code_blocks(NO_KEY, "python")
        said = [subprocess.run([sys.executable, "-W", "ignore", "-c", code], cwd=tmp_path,
                               env=_env(), capture_output=True, text=True, timeout=60)
                for code in (openai_snippet, anthropic_snippet)]
        assert said[0].returncode == 0, said[0].stderr
        assert said[0].stdout.startswith("lorem ipsum")  # the replayed text, made of filler
        assert said[1].returncode == 0, said[1].stderr
        assert said[1].stdout == "end_turn\n"  # a complete answer, not a break
        asked = subprocess.run(curl, shell=True, cwd=tmp_path, env=_env(), capture_output=True,
                               timeout=60)
        assert asked.returncode in (18, 56), asked  # partial transfer / connection reset
        records = sorted((tmp_path / "streamtap-traces" / "default").glob("*.json"))
        deadline = time.monotonic() + 10
        while len(records) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
            records = sorted((tmp_path / "streamtap-traces" / "default").glob("*.json"))
        outcomes = [json.loads(path.read_text())["outcome"] for path in records]
        assert [o["boundary"] for o in outcomes] == ["none", "none", "transport"]
        assert "upstream_reset" in outcomes[2]["evidence"]
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(15)


MY_AGENT = '''
import json

import openai


def ask_for_tool_call(client, attempts=RETRIES):
    for attempt in range(attempts):
        try:
            name, arguments = None, ""
            for chunk in client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "weather?"}],
                    tools=[{"type": "function", "function": {"name": "get_weather"}}],
                    stream=True):
                for choice in chunk.choices:
                    for call in choice.delta.tool_calls or []:
                        name = call.function.name or name
                        arguments += call.function.arguments or ""
            return {"name": name, "arguments": json.loads(arguments)}
        except openai.APIConnectionError:
            if attempt == attempts - 1:
                raise
'''


@pytest.mark.parametrize("retries, outcome", [(2, {"passed": 1}), (1, {"failed": 1})])
def test_the_pytest_example_passes_with_a_retry_and_fails_without(pytester, monkeypatch,
                                                                 retries, outcome):
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    example, _ = code_blocks(TESTING, "python")
    pytester.makepyfile(my_agent=MY_AGENT.replace("RETRIES", str(retries)),
                        test_my_agent=example)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(**outcome)
    if "failed" in outcome:
        result.stdout.fnmatch_lines(["*APIConnectionError*"])


def test_the_python_api_example_prints_what_readme_says():
    _, example = code_blocks(TESTING, "python")
    said = subprocess.run([sys.executable, "-c", example], env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert said.returncode == 0, said.stderr
    assert said.stdout == "client saw: APIConnectionError\ntransport tool_input 5\n"


def test_the_node_example_is_the_file_and_runs(node):
    (shown,) = code_blocks(NODE, "js")
    assert shown + "\n" == (REPO / "examples" / "node-fault.test.mjs").read_text()
    (command,) = shell_blocks(NODE)
    assert command == "node --test examples/node-fault.test.mjs"
    result = subprocess.run(command, shell=True, cwd=REPO, env=_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# pass 1" in result.stdout and "# fail 0" in result.stdout
