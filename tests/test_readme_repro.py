"""docs/clients.md's `streamtap repro` section, run verbatim in a fresh folder: the demo records
failures, `repro --last --failed` writes the newest as a folder, its pytest and node:test files
pass, `streamtap probe --from` grades the fetch example SILENT on it, and `streamtap replay` on the
folder serves the case (a clean close without the terminal event) on the port it names."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai

from streamtap.proxy.replay.repro import load_repro
from tests.readme import shell_blocks
from tests.support import port_free
from tests.test_readme_fake import _wait_listening

REPO = Path(__file__).resolve().parent.parent
TITLE = "One recorded failure as a repeatable test"


def test_repro_commands_run_verbatim(tmp_path, node):
    commands = shell_blocks(TITLE)
    assert [" ".join(command.split()[:2]) for command in commands] == [
        "streamtap demo", "streamtap repro", "python -m", "node --test", "streamtap probe",
        "streamtap replay"]
    *once, replay = commands
    (tmp_path / "examples").symlink_to(REPO / "examples")  # README's paths, from a fresh folder
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for command in once:
        result = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=180)
        probing = command.startswith("streamtap probe")
        # the probe exits 1: plain fetch is SILENT on the clean close, as README says
        assert result.returncode == (1 if probing else 0), \
            f"{command}:\n{result.stdout}\n{result.stderr}"
        if command.startswith("python"):
            assert "1 passed" in result.stdout
        if command.startswith("node"):
            assert "# pass 1" in result.stdout
        if probing:
            probed = result.stdout
    case = load_repro(tmp_path / "repro-cut")
    name = f"repro:{case.trace_id[:12]}"
    assert re.search(rf"^{name}\s+SILENT\s", probed, re.M), probed
    assert "1 ending(s) of openai-chat run, 1 broke the expectation" in probed
    assert (case.dialect, case.ending, case.verdict["boundary"]) == (
        "openai-chat", "clean_close", "provider_close")
    deadline = time.monotonic() + 60  # README names the port: wait for another run to free it
    while not port_free(8788):
        assert time.monotonic() < deadline, "port 8788 stays taken; free it to run this"
        time.sleep(0.5)
    log = tmp_path / "replay.log"
    process = subprocess.Popen(replay, shell=True, cwd=tmp_path, env=env, stdout=log.open("wb"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_listening(8788, process, log)
        client = openai.OpenAI(base_url="http://127.0.0.1:8788/v1", api_key="sk-test",
                               max_retries=0, timeout=10)
        chunks = list(client.chat.completions.create(model="gpt-4o-mini", messages=[],
                                                     stream=True))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)
    assert len(chunks) == case.point.frames  # every frame, and no error: the SDK accepts it
    assert all(choice.finish_reason is None for chunk in chunks for choice in chunk.choices)
