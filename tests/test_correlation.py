"""From a request to its record: the trace-id header (opt-in), the index line, the log line that
ends with the summary and the record's path, `upstream_url` without the query, and `outcome` right
after the identity fields."""

import json
import subprocess
import sys

import httpx
import pytest

from tests.clients import log_events, wait_for
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream

IDENTITY = ["schema_version", "trace_id", "session_id", "message_id", "started_at", "route",
            "provider", "dialect", "dialect_source", "upstream_url"]
INDEX_FIELDS = {"trace_id", "started_at", "session_id", "message_id", "route", "provider",
                "model", "status", "dialect", "ttfb_ms", "duration_ms", "frames", "ok",
                "boundary", "phase", "fault", "file", "summary"}


@pytest.fixture(scope="module")
def tproxy(fake, tmp_path_factory):
    process = ProxyProcess(tmp_path_factory.mktemp("corr"), {"fake": fake.url}, "--trace-header")
    yield process
    process.stop()


def test_trace_header_names_the_record_and_the_index_and_log_point_at_it(tproxy, fake):
    prefix = fake.add(Scenario(chat_text_stream(3), ending="reset"))
    session = new_session()
    with pytest.raises(httpx.HTTPError):
        with httpx.stream("POST", tproxy.url("fake") + prefix + "/v1/chat/completions?key=QUERYCANARY",
                          json={"model": "gpt-x", "stream": True},
                          headers={"x-streamtap-session": session,
                                   "x-streamtap-message": "msg-1"}, timeout=10) as resp:
            trace_id = resp.headers["x-streamtap-trace-id"]
            for _ in resp.iter_bytes():
                pass
    record = tproxy.record(session)
    assert record["trace_id"] == trace_id
    assert list(record)[:len(IDENTITY) + 1] == IDENTITY + ["outcome"]
    assert record["upstream_url"] == f"http://127.0.0.1:{fake.port}{prefix}/v1/chat/completions"
    assert "QUERYCANARY" not in json.dumps(record)

    lines = (tproxy.trace_dir / session / "index.jsonl").read_text().splitlines()
    line = json.loads(lines[-1])
    assert INDEX_FIELDS <= set(line)
    assert (line["trace_id"], line["session_id"], line["message_id"], line["model"]) == \
        (trace_id, session, "msg-1", "gpt-x")
    assert line["ok"] is False and line["boundary"] == "transport"
    assert (tproxy.trace_dir / session / line["file"]).is_file()
    assert line["summary"] == record["outcome"]["summary"]

    event = wait_for(lambda: [e for e in log_events(tproxy.log(), "request")
                              if e.get("trace_id") == trace_id])[-1]
    assert event["summary"] == record["outcome"]["summary"]
    assert event["record"].endswith(line["file"])


def test_answers_streamtap_gives_itself_carry_the_header_too(tproxy):
    resp = httpx.post(tproxy.url("fake") + "/v1/chat/completions", json={},
                      headers={"x-streamtap-fault": "nonsense"}, timeout=10)
    assert resp.status_code == 400 and len(resp.headers["x-streamtap-trace-id"]) == 16


def test_trace_header_is_off_by_default(proxy, fake):
    prefix = fake.add(Scenario(chat_text_stream(2)))
    resp = httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions",
                      json={"model": "m", "stream": True}, timeout=10)
    assert resp.status_code == 200
    assert not [name for name in resp.headers if name.lower().startswith("x-streamtap")]


@pytest.mark.e2e
def test_console_log_line_ends_with_summary_and_record_path(tmp_path):
    code = """
import io, sys
from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.proxy.logs import configure_logging, canonical_fields
stream = io.StringIO()
log = configure_logging("console", stream)
record = record_from_dict({"schema_version": 2, "trace_id": "abc", "session_id": "s",
                           "started_at": "x", "route": "r",
                           "outcome": {"ok": True, "boundary": "none", "phase": "complete",
                                       "summary": "SUMMARY."}})
log.warning("request", **canonical_fields(record, "/traces/s/x-abc.json"))
sys.stdout.write(stream.getvalue())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out.endswith("summary=SUMMARY. record=/traces/s/x-abc.json"), out


def test_upstream_url_has_scheme_host_port_and_path_never_the_query():
    from streamtap.proxy.serve.passthrough import upstream_url_for

    assert upstream_url_for("https://api.openai.com", "/v1/chat/completions?key=sk-abc") == \
        "https://api.openai.com:443/v1/chat/completions"
    assert upstream_url_for("http://[::1]:11434/base", "/api/chat") == "http://[::1]:11434/base/api/chat"
    assert upstream_url_for(
        "https://aiplatform.googleapis.com",
        "/v1/projects/my-project-123/locations/x/models/g:streamGenerateContent?alt=sse") == \
        "https://aiplatform.googleapis.com:443/v1/projects/*/locations/x/models/g:streamGenerateContent"


def test_trace_header_from_the_config_file_or_the_flag(tmp_path):
    from streamtap.proxy.cli import build_parser, config_from_args
    from streamtap.proxy.config import Config, load_file

    assert Config().trace_header is False
    path = tmp_path / "c.toml"
    path.write_text("trace_header = true\n")
    assert load_file(path).trace_header is True
    args = build_parser().parse_args(["serve", "--trace-header"])
    assert config_from_args(args).trace_header is True
    assert config_from_args(build_parser().parse_args(["serve"])).trace_header is False
