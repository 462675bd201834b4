"""What the client will see (issue 23 item 6), end to end: a real client meets a stream cut short
without its terminal event through streamtap, raises nothing, and the record, the summary,
`show`, `ls --failed` and the report all say that the answer was cut short silently."""

import json
import subprocess
import sys

import openai

from streamtap.diagnostics.verdict import finish_reasons
from streamtap.diagnostics.verdict.client_sees import SENTENCES, VALUES
from streamtap.proxy.readout import commands
from tests.fakeprovider import Scenario
from tests.proxyproc import new_session
from tests.readme import section
from tests.streams import chat_text_stream
from tests.test_endings import node_read


def streamtap(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "streamtap", *args], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_openai_sdk_meets_a_clean_close_without_done_and_the_record_says_it(fake, proxy, tmp_path):
    prefix = fake.add(Scenario(chat_text_stream(3, done=False)[:-1]))  # no finish, no [DONE]
    session = new_session()
    client = openai.OpenAI(base_url=proxy.url("fake") + prefix + "/v1", api_key="sk-test",
                           default_headers={"x-streamtap-session": session}, max_retries=0,
                           timeout=10)
    chunks = list(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
    # The SDK raised nothing and never saw a finish reason: the silence the record must name.
    assert chunks and all(chunk.choices[0].finish_reason is None for chunk in chunks)
    record = proxy.record(session)
    outcome = record["outcome"]
    assert record["response"]["status"] == 200 and record["downstream"]["ended"] == "complete"
    assert outcome["client_sees"] == "silent_truncation"
    assert outcome["normalized_finish_reason"] == "interrupted"
    assert record["stream"]["finish_reason"] is None  # the provider's own: none was sent
    assert outcome["summary"].endswith(" Most clients end this stream without an error: the "
                                       "answer is cut short silently.")
    trace_dir = str(proxy.trace_dir)
    listed = streamtap("ls", "--failed", "--session", session, "--trace-dir", trace_dir)
    assert record["trace_id"][:8] in listed
    assert "client sees silent_truncation" in listed
    shown = streamtap("show", record["trace_id"], "--trace-dir", trace_dir)
    assert "client sees: silent_truncation  finish reason: interrupted (provider: -)" in shown
    report = tmp_path / "report.html"
    streamtap("report", "--session", session, "--trace-dir", trace_dir, "--out", str(report))
    assert 'data-client-sees="silent_truncation"' in report.read_text()


def test_node_fetch_meets_an_error_event_it_does_not_parse(fake, proxy, node):
    """An error event inside a 200 stream: fetch reads it as bytes and ends without an error."""
    error = json.dumps({"error": {"message": "overloaded", "type": "server_error"}})
    stream = chat_text_stream(2, done=False)[:2] + [f"data: {error}\n\n".encode()]
    prefix = fake.add(Scenario(stream))
    session = new_session()
    proxied = node_read(node, proxy.url("fake") + prefix + "/v1/chat/completions",
                        {"x-streamtap-session": session})
    assert proxied["error"] is None and proxied["status"] == 200
    outcome = proxy.record(session)["outcome"]
    assert (outcome["boundary"], outcome["client_sees"]) == ("provider_error", "in_band_error")
    assert outcome["normalized_finish_reason"] == "error"
    assert outcome["summary"].endswith(" " + SENTENCES["in_band_error"])


def test_ls_failed_lists_a_quiet_failure_even_when_the_verdict_is_ok(tmp_path, capsys):
    """A complete stream whose client was left waiting (`hang`) or a truncation the verdict
    missed still lists under --failed; an ok line that told the client everything does not."""
    folder = tmp_path / "s1"
    folder.mkdir()
    lines = [{"trace_id": f"{n}" * 16, "started_at": f"2026-11-25T12:0{n}:00.000Z",
              "session_id": "s1", "route": "openai", "ok": True, "boundary": "none",
              "phase": "complete", "client_sees": sees}
             for n, sees in ((1, "success"), (2, "hang"), (3, "silent_truncation"), (4, None))]
    (folder / "index.jsonl").write_text(
        "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    assert commands.failed_trace_ids(tmp_path) == ["3" * 16, "2" * 16]
    assert commands.ls(tmp_path, failed=True) == 0
    out = capsys.readouterr().out
    assert "ok, client sees silent_truncation" in out and "ok, client sees hang" in out
    assert "1111111" not in out and "4444444" not in out


def test_readme_record_table_names_every_value():
    table = section("What a trace record holds")
    row = next(line for line in table.splitlines() if line.startswith("| `outcome` |"))
    for word in ("client_sees", "normalized_finish_reason", *VALUES, *finish_reasons.VALUES):
        assert f"`{word}`" in row, word
