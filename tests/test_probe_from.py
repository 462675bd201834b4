"""`streamtap probe --from DIR` end to end: a real failure recorded through streamtap with Node's
fetch (the upstream resets mid-text), made a folder with `streamtap repro`, then probed with the
same client. It is graded `raised` with the original's error, and the probe session's record breaks
where the original did (a real upstream failure replays with the same boundary; tests/test_repro.py
shows the replayed record equals the original's). Folders that cannot be probed are refused with
exit 2, and the fake provider serves a sample as told."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.diagnostics.probe.errorline import last_error_line
from streamtap.diagnostics.samples.repro import break_point, build_repro
from streamtap.proxy.testing.records import read_records
from tests.clients import env_without_providers
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import anthropic_text_stream, chat_text_stream
from tests.support import record_stream
from tests.test_probe_e2e import EXAMPLES, probe, rows

pytestmark = pytest.mark.e2e  # every test starts a fake provider, and most a proxy

FETCH_CLIENT = str(EXAMPLES / "probe-fetch-client.mjs")
STREAMTAP = Path(sys.executable).parent / "streamtap"


@pytest.fixture(scope="module")
def recorded(fake, node, tmp_path_factory) -> dict:
    """The fetch client meets an upstream reset after four text deltas, through streamtap; the
    record, the client's error line and the repro folder of it."""
    work = tmp_path_factory.mktemp("probe-from")
    session = new_session()
    proxy = ProxyProcess(work, {"fake": fake.url}, "--session", session)
    try:
        prefix = fake.add(Scenario(list(chat_text_stream(6, done=False)[:5]), ending="reset",
                                   delay_s=0.02))
        client = subprocess.run([node, FETCH_CLIENT], capture_output=True, text=True, timeout=60,
                                env={**env_without_providers(), "OPENAI_API_KEY": "sk-test",
                                     "OPENAI_BASE_URL": proxy.url("fake") + prefix + "/v1"})
        original = proxy.record(session)
    finally:
        proxy.stop()
    folder = work / "repro-reset"
    made = subprocess.run([str(STREAMTAP), "repro", original["trace_id"][:10], "--trace-dir",
                           str(proxy.trace_dir), "--out", str(folder)], capture_output=True,
                          text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert client.returncode != 0, client.stderr  # the original failure: the client said so
    return {"record": original, "error": last_error_line(client.stderr), "folder": folder}


def test_the_client_meets_the_recorded_failure_as_it_did_the_original(recorded, tmp_path, node):
    original = recorded["record"]
    assert (original["outcome"]["boundary"], original["outcome"]["phase"]) == (
        "transport", "text")
    assert recorded["error"] == "TypeError: terminated"  # undici's words for a reset body
    code, data, stderr = probe(tmp_path, "--timeout", "10", "--from", str(recorded["folder"]),
                               "--", node, FETCH_CLIENT)
    assert code == 0, stderr  # the grade meets the expectation
    assert data["dialect"] == "openai-chat"  # the repro's dialect, not named on the line
    name = "repro:" + original["trace_id"][:12]
    assert list(rows(data)) == [name]  # the repro instead of the catalog
    row = rows(data)[name]
    assert (row["grade"], row["meets"], row["requests"], row["error_line"]) == (
        "raised", True, 1, recorded["error"])
    assert row["why"] == "a recorded failure must neither be silent nor hang"

    # the session: the first run on a complete stream, then the repro's request, which breaks
    # where the original did, from the upstream (no fault rule was armed)
    first, probed = read_records(tmp_path / "traces", data["probe"])
    assert first["outcome"]["phase"] == "complete"
    assert probed["trace_id"] == row["traces"][0] and not probed.get("fault")
    probed = probed.as_dict()
    for key in ("boundary", "phase"):
        assert probed["outcome"][key] == original["outcome"][key], key
    assert break_point(record_from_dict(probed)) == break_point(record_from_dict(original))  # frame index and byte offset
    for key in ("frame_count", "event_counts", "terminal"):
        assert probed["stream"][key] == original["stream"][key], key


def test_a_client_that_swallows_the_failure_is_graded_silent(recorded, tmp_path):
    """A client that reads the reset body and exits 0 anyway breaks the expectation (exit 1),
    and --list shows the row the folder makes."""
    swallow = ("import os, urllib.request\ntry:\n    urllib.request.urlopen(os.environ["
               "'OPENAI_BASE_URL'] + '/chat/completions', data=b'{\"stream\": true}').read()\n"
               "except Exception:\n    pass\n")
    script = tmp_path / "swallow.py"
    script.write_text(swallow)
    name = "repro:" + recorded["record"]["trace_id"][:12]
    code, data, _ = probe(tmp_path, "--from", str(recorded["folder"]), "--",
                          sys.executable, str(script))
    assert code == 1
    row = rows(data)[name]
    assert (row["grade"], row["meets"]) == ("SILENT", False)
    listing = subprocess.run([str(STREAMTAP), "probe", "--list", "--from",
                              str(recorded["folder"])], capture_output=True, text=True,
                             timeout=60)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.split()[:3] == [name, "openai-chat", "the"]
    assert "the recorded sample, ending `reset`" in listing.stdout
    assert "expect: a recorded failure must neither be silent nor hang" in listing.stdout


def test_a_client_of_another_dialect_is_told_the_folders_set_it(recorded, tmp_path):
    claude = ("import os, urllib.request; urllib.request.urlopen(os.environ['ANTHROPIC_BASE_URL']"
              " + '/v1/messages', data=b'{\"stream\": true}').read()")
    code, data, stderr = probe(tmp_path, "--from", str(recorded["folder"]), "--",
                               sys.executable, "-c", claude)
    assert (code, data) == (2, {})
    assert ("the dialect is wrong: openai-chat was named by the repro folders, the client "
            "speaks anthropic-messages") in stderr


def _write_repro(folder: Path, record: dict, trace_id: str, **sample_changes) -> Path:
    """A repro folder of a pure record, as `streamtap repro` lays it out."""
    sample, manifest = build_repro(record_from_dict(record))
    manifest["trace_id"] = trace_id
    sample.update(sample_changes)
    folder.mkdir()
    (folder / "repro.json").write_text(json.dumps(manifest))
    (folder / manifest["sample"]).write_text(json.dumps(sample))
    return folder


def test_folders_that_cannot_be_probed_are_refused_with_what_to_do(recorded, tmp_path, capsys):
    from streamtap.proxy.cli import main

    client = ["--", "node", FETCH_CLIENT]
    assert main(["probe", "--from", str(tmp_path), *client]) == 2
    assert (f"{tmp_path} is not a repro folder (no repro.json); make one with `streamtap repro "
            "TRACE_ID --out DIR`") in capsys.readouterr().err
    claude = _write_repro(tmp_path / "claude", record_stream(
        b"".join(anthropic_text_stream(3)[:4]), path="/v1/messages", upstream="reset",
        downstream="aborted", provider="anthropic"), "b2" * 16)
    chat = str(recorded["folder"])
    assert main(["probe", "--from", chat, "--from", str(claude), *client]) == 2
    assert (f"the repro folders are of different dialects (openai-chat: {chat}; "
            f"anthropic-messages: {claude}); a probe runs one client in one dialect") in \
        capsys.readouterr().err
    assert main(["probe", "--dialect", "anthropic-messages", "--from", chat, *client]) == 2
    assert "--dialect anthropic-messages, but the repro folders are openai-chat" in \
        capsys.readouterr().err
    broken = _write_repro(tmp_path / "broken", record_stream(
        b"".join(chat_text_stream(3)), path="/v1/chat/completions"), "c3" * 16,
        frames=[["not", "a frame"]])
    assert main(["probe", "--from", str(broken), *client]) == 2
    assert f"{broken}/repro.sample.json: the sample's frames or shapes are malformed" in \
        capsys.readouterr().err


def test_the_fake_serves_a_sample_every_time_or_the_next_times_it_is_told():
    from streamtap import FakeProvider

    data = b"".join(chat_text_stream(4, done=False)[:4])
    sample, _ = build_repro(record_from_dict(record_stream(data, path="/v1/chat/completions",
                                          upstream="reset", downstream="aborted")))
    body = {"model": "m", "stream": True, "messages": []}

    def read(fake) -> str:
        try:
            return httpx.post(fake.url + "/v1/chat/completions", json=body, timeout=10).text
        except httpx.TransportError as exc:  # the served reset
            return type(exc).__name__

    with FakeProvider() as fake:
        fake.serve_sample(sample, name="cut", times=1)
        assert [read(fake), read(fake)][1].endswith("data: [DONE]\n\n")  # then the default
        fake.serve_sample(sample, name="every")
        for _ in range(2):
            read(fake)
        fake.serve_sample(None)
        assert "[DONE]" in read(fake)
        assert [(one.name, one.ending) for one in fake.served] == [
            ("cut", "reset"), ("default-text-answer", "terminal"), ("every", "reset"),
            ("every", "reset"), ("default-text-answer", "terminal")]
        with pytest.raises(ValueError, match="not a usable sample: not a streamtap sample"):
            fake.serve_sample({"ending": "reset"})
        with pytest.raises(ValueError, match="times must be 1 or more"):
            fake.serve_sample(sample, times=0)
