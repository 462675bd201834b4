"""docs/samples.md's commands, run verbatim in a fresh folder: the records of session
`my-debug-run` become content-free samples, the matrix compares them with the starter corpus, and
`streamtap replay` serves them on the port the page names, a reset as a reset."""

import os
import signal
import subprocess
import time

import openai
import pytest

from tests.fakeprovider import Scenario
from tests.proxyproc import REPO, ProxyProcess
from tests.readme import run_verbatim, shell_blocks
from tests.streams import chat_text_stream
from tests.support import port_free
from tests.test_readme_fake import _env, _wait_listening

TITLE = "Samples: real stream shapes"


def record_two_streams(fake, trace_dir) -> None:
    """What `streamtap serve` writes for the session: one complete stream and one the upstream
    reset mid text, both asked for by the openai SDK."""
    workdir = trace_dir.parent / "proxy"
    workdir.mkdir()
    proxy = ProxyProcess(workdir, {"fake": fake.url}, trace_dir=trace_dir)
    try:
        cut_mid_text = chat_text_stream(6, done=False)[:-1]  # no finish chunk, no [DONE]
        for scenario in (Scenario(chat_text_stream(4)), Scenario(cut_mid_text, ending="reset")):
            client = openai.OpenAI(base_url=proxy.url("fake") + fake.add(scenario) + "/v1",
                                   api_key="sk-test", max_retries=0, timeout=10,
                                   default_headers={"x-streamtap-session": "my-debug-run"})
            try:
                list(client.chat.completions.create(model="gpt-test", stream=True,
                                                    messages=[{"role": "user", "content": "hi"}]))
            except openai.APIConnectionError:
                pass  # the reset: the record says so
        proxy.records("my-debug-run", 2)
    finally:
        proxy.stop()


def test_samples_commands_run_verbatim(tmp_path, fake):
    export, matrix, replay = shell_blocks(TITLE)
    assert replay == "streamtap replay ./samples-out --port 8788 --speed 1.0"
    record_two_streams(fake, tmp_path / "streamtap-traces")
    (tmp_path / "samples").symlink_to(REPO / "samples")  # the page's paths, from a fresh folder

    _, table = run_verbatim([export, matrix], tmp_path)
    endings = sorted(path.name.split("__")[2] for path in (tmp_path / "samples-out").iterdir())
    assert endings == ["reset", "terminal"]
    assert "| openai-chat" in table and "anthropic-messages" in table  # ours and the corpus's

    deadline = time.monotonic() + 60  # the page names the port: wait for another run to free it
    while not port_free(8788):
        assert time.monotonic() < deadline, "port 8788 stays taken; free it to run this"
        time.sleep(0.5)
    log = tmp_path / "replay.log"
    process = subprocess.Popen(replay, shell=True, cwd=tmp_path, env=_env(), stdout=log.open("wb"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_listening(8788, process, log)
        client = openai.OpenAI(base_url="http://127.0.0.1:8788/v1", api_key="sk-test",
                               max_retries=0, timeout=10)
        chunks = list(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
        finished = [choice.finish_reason for chunk in chunks for choice in chunk.choices
                    if choice.finish_reason]
        assert finished == ["stop"]  # the complete one, by default
        with pytest.raises(openai.APIConnectionError):  # asked for, the reset is a reset
            list(client.chat.completions.create(
                model="gpt-test", messages=[], stream=True,
                extra_headers={"x-streamtap-sample": "reset"}))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)
