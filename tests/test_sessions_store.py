"""Sessions and trace files: which header names a session, that no id can become a path outside
the trace directory, how records are named and protected, and that a broken trace directory never
affects traffic."""

import json
import os
import re
import stat
import time

import httpx
import pytest

from streamtap.diagnostics.redaction.redact import safe_id
from streamtap.proxy.serve.passthrough import session_id_for
from tests.clients import all_files, find_record, log_events, raw_request, wait_for
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream

SAFE = re.compile(r"[A-Za-z0-9._-]{1,128}")
HASHED = re.compile(r"h-[0-9a-f]{24}")
RECORD_NAME = re.compile(r"(\d{8}T\d{6}\.\d{3})-([0-9a-f]{16})\.json")
CLI_SESSION = "cli-sess"


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """base/work is the proxy's cwd, base/work/traces its trace dir; `../../x` from a session
    folder would land in base itself."""
    base = tmp_path_factory.mktemp("sessions")
    (base / "work").mkdir()
    return base


@pytest.fixture(scope="module")
def sproxy(fake, sandbox):
    process = ProxyProcess(sandbox / "work", {"fake": fake.url}, "--session", CLI_SESSION,
                           trace_dir=sandbox / "work" / "traces")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def stream_prefix(fake):
    return fake.add(Scenario(chat_text_stream(2)))


def post(proxy, prefix: str, headers: dict) -> httpx.Response:
    resp = httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions",
                      json={"model": "m", "stream": True}, headers=headers, timeout=10)
    assert resp.status_code == 200, resp.text
    return resp


def test_malicious_session_ids_stay_inside_the_trace_dir(sproxy, sandbox, stream_prefix):
    abs_target = sandbox / "abs-target"
    cases = [
        ("x-streamtap-session", "../../x"),
        ("x-streamtap-session", "../x"),
        ("x-streamtap-session", "/etc/passwd"),
        ("x-streamtap-session", str(abs_target)),
        ("x-streamtap-session", ".."),
        ("x-streamtap-session", "."),
        ("x-streamtap-session", "a/b"),
        ("x-streamtap-session", "..\\..\\x"),
        ("x-streamtap-session", "x" * 10_000),  # over aiohttp's default 8,190-byte header limit
        ("x-streamtap-session", "a session with spaces"),
        ("x-streamtap-session", "sessión ünicode ☃"),
        ("x-opencode-session", "../../x"),
        ("x-session-id", "/etc/passwd"),
    ]
    expected = {}
    for n, (header, raw) in enumerate(cases):
        folder = safe_id(raw)
        assert HASHED.fullmatch(folder), raw
        message = f"mal-{n}"
        post(sproxy, stream_prefix, {header: raw.encode("utf-8"), "x-streamtap-message": message})
        expected[message] = folder
    # Distinct ids stay distinct (hashed, not truncated); equal ids share a folder.
    assert len(set(expected.values())) == len({raw for _, raw in cases})
    trace_dir = sproxy.trace_dir
    for message, folder in expected.items():
        path, record = find_record(trace_dir, message, folder)
        assert record["session_id"] == folder
        assert path.parent == trace_dir / folder
    assert find_record(trace_dir, "mal-8", safe_id("x" * 10_000))  # the 10 kB id has its record
    # Nothing outside the trace dir but the proxy's own log; one level of safe folder names.
    for path in all_files(sandbox):
        relative = path.relative_to(sandbox)
        if relative.parts[:2] == ("work", "traces"):
            assert len(relative.parts) == 4, relative
            session = relative.parts[2]
            assert SAFE.fullmatch(session) and session not in (".", ".."), relative
        else:
            assert relative.parent.as_posix() == "work" and relative.name.startswith("proxy-"), \
                relative
    for folder, dirs, _files in os.walk(sandbox):
        for name in dirs:
            assert name not in ("x", "abs-target", "passwd", "b"), os.path.join(folder, name)
    assert not abs_target.exists() and not (sandbox / "x").exists()
    assert not os.path.isdir("/etc/passwd")


def test_message_ids_are_sanitized_too(sproxy, stream_prefix):
    session = new_session()
    post(sproxy, stream_prefix, {"x-streamtap-session": session,
                                 "x-streamtap-message": "../../m"})
    record = sproxy.record(session)
    assert record["message_id"] == safe_id("../../m") != "../../m"


def test_nul_is_never_part_of_a_path():
    for raw in ("a\x00b", "\x00", "..\x00", "../\x00../x", "ok\x00.json"):
        assert HASHED.fullmatch(safe_id(raw)), repr(raw)
    assert safe_id("a\x00b") != safe_id("a\x00c") != safe_id("ab")
    assert safe_id("") is None and safe_id(None) is None
    assert safe_id("plain-id_1.2") == "plain-id_1.2"


def nul_request(prefix: str, header: bytes) -> bytes:
    return (b"POST /fake" + prefix.encode() + b"/v1/chat/completions HTTP/1.1\r\n"
            b"Host: 127.0.0.1\r\n" + header + b"\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")


def test_nul_in_a_session_header_is_answered_and_writes_nothing(fake, sproxy, sandbox):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    trace_dir = sproxy.trace_dir

    def state() -> tuple[set, set]:
        outside = {p for p in all_files(sandbox) if trace_dir not in p.parents}
        return {p.name for p in trace_dir.iterdir()}, outside | set(trace_dir.glob("*/*.json"))

    before = state()
    for value in (b"a\x00b", b"../\x00../nul-escape", b"\x00"):
        reply = raw_request(sproxy.port, nul_request(prefix, b"x-streamtap-session: " + value))
        # aiohttp's parser rejects the header line before any handler runs: a 400, nothing
        # forwarded; the id never reached streamtap, so it cannot become a path: the refusal is
        # recorded in the proxy's default session (`--session`).
        assert re.match(rb"HTTP/1\.[01] 400 ", reply), reply[:100]
    assert fake.seen[prefix.rsplit("/", 1)[-1]] == []
    time.sleep(0.2)
    folders, files = state()
    assert folders - before[0] <= {CLI_SESSION}  # no new session folder but the default one
    new = files - before[1]
    assert new and all(path.parent == trace_dir / CLI_SESSION for path in new)
    for path in new:
        assert json.loads(path.read_text())["outcome"]["evidence"] == ["malformed_request"]
    assert not any("nul-escape" in str(p) for p in all_files(sandbox.parent))
    assert httpx.get(sproxy.url("_streamtap/health"), timeout=5).json()["status"] == "ok"


def test_a_rejected_header_line_does_not_put_a_key_in_the_log(fake, sproxy):
    key = "sk-proj-nulleak0123456789abcdef"
    prefix = fake.add(Scenario(chat_text_stream(1)))
    reply = raw_request(sproxy.port, nul_request(prefix, b"Authorization: Bearer " + key.encode()
                                                 + b"\x00"))
    assert re.match(rb"HTTP/1\.[01] 400 ", reply)
    time.sleep(0.3)  # aiohttp logs the error as the 400 goes out
    assert key not in sproxy.log()
    assert "nulleak" not in sproxy.log()


def test_session_header_precedence(fake, sproxy):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    full = {"x-streamtap-session": "st-1", "x-session-affinity": "aff-1",
            "x-opencode-session": "oc-1", "x-session-id": "sid-1"}
    cases = [
        (full, "st-1"),
        ({k: v for k, v in full.items() if k != "x-streamtap-session"}, "aff-1"),
        ({"x-opencode-session": "oc-1", "x-session-id": "sid-1"}, "oc-1"),
        ({"x-session-id": "sid-1"}, "sid-1"),
        ({"x-streamtap-session": "", "x-session-id": "sid-1"}, "sid-1"),  # empty = absent
        ({}, CLI_SESSION),  # --session
    ]
    for n, (headers, session) in enumerate(cases):
        message = f"prec-{n}-{new_session()}"
        post(sproxy, prefix, {**headers, "x-streamtap-message": message})
        _, record = find_record(sproxy.trace_dir, message, session)
        assert record["session_id"] == session, (headers, session)


def test_default_session_without_header_or_flag(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    message = f"dflt-{new_session()}"
    post(proxy, prefix, {"x-streamtap-message": message})
    _, record = find_record(proxy.trace_dir, message, "default")
    assert record["session_id"] == "default"


def test_session_headers_are_configurable_and_the_flag_default_is_sanitized():
    headers = {"x-my-session": "mine", "x-session-affinity": "aff"}
    assert session_id_for(headers, ("x-my-session",), "default") == "mine"
    assert session_id_for(headers, ("x-session-id",), "default") == "default"
    assert session_id_for({"x-streamtap-session": "st"}, (), "d") == "st"
    assert session_id_for({}, (), "../../escape") == safe_id("../../escape")


def test_streamtap_headers_are_not_forwarded_and_message_ids_are_read(fake, sproxy):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    session = new_session()
    post(sproxy, prefix, {"x-streamtap-session": session, "x-streamtap-message": "stm-1",
                          "x-opencode-request": "ocr-1", "x-streamtap-anything": "1",
                          "X-StreamTap-Mixed-Case": "1", "x-opencode-session": "oc-9",
                          "x-session-affinity": "aff-9"})
    sent = fake.last(prefix).headers
    names = [name.lower() for name, _ in sent]
    assert not [name for name in names if name.startswith("x-streamtap-")]
    # the client's own session headers are the provider's business: forwarded untouched
    assert ("x-opencode-session", "oc-9") in sent and ("x-session-affinity", "aff-9") in sent
    assert ("x-opencode-request", "ocr-1") in sent
    assert sproxy.record(session)["message_id"] == "stm-1"  # x-streamtap-message wins

    cases = [({"x-opencode-request": "ocr-2"}, "ocr-2"), ({}, None)]
    for headers, message_id in cases:
        session = new_session()
        post(sproxy, prefix, {"x-streamtap-session": session, **headers})
        assert sproxy.record(session)["message_id"] == message_id


def test_record_files_names_modes_and_index(fake, sproxy):
    prefix = fake.add(Scenario(chat_text_stream(2)))
    session = new_session()
    for _ in range(3):
        post(sproxy, prefix, {"x-streamtap-session": session})
    # the control namespace gets no record; an unknown route gets one (in its own session here)
    refused = new_session()
    assert httpx.get(sproxy.url("nowhere") + "/v1", timeout=5,
                     headers={"x-streamtap-session": refused}).status_code == 404
    assert sproxy.record(refused)["outcome"]["evidence"] == ["unknown_route"]
    assert httpx.get(sproxy.url("_streamtap/health"), timeout=5,
                     headers={"x-streamtap-session": session}).status_code == 200
    records = sproxy.records(session, 3)
    folder = sproxy.trace_dir / session
    time.sleep(0.3)  # a fourth record, if one were wrongly written, would be there by now
    files = sorted(os.listdir(folder))
    json_files = [name for name in files if name.endswith(".json")]
    assert sorted(files) == sorted(json_files + ["index.jsonl"])  # no temp files left behind
    assert len(json_files) == 3
    by_id = {record["trace_id"]: record for record in records}
    for name in json_files:
        match = RECORD_NAME.fullmatch(name)
        assert match, name
        stamp, trace_id = match.groups()
        record = by_id[trace_id]
        started = record["started_at"]  # e.g. 2026-01-02T03:04:05.678Z, UTC
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", started), started
        assert stamp == started[:-1].replace("-", "").replace(":", "")
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    assert stat.S_IMODE((folder / "index.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(sproxy.trace_dir.stat().st_mode) == 0o700
    lines = (folder / "index.jsonl").read_text().splitlines()
    assert len(lines) == 3
    entries = [json.loads(line) for line in lines]
    assert {entry["trace_id"] for entry in entries} == set(by_id)
    for entry in entries:
        record = by_id[entry["trace_id"]]
        assert entry["started_at"] == record["started_at"]
        assert entry["status"] == 200 and entry["boundary"] == "none"
        assert entry["summary"] == record["outcome"]["summary"]


def test_unwritable_trace_dir_does_not_affect_traffic(fake, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("a regular file where a directory should be\n")
    prefix = fake.add(Scenario(chat_text_stream(5), delay_s=0.002))
    direct = httpx.post(fake.url + prefix + "/v1/chat/completions", json={"stream": True},
                        timeout=10).content
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, trace_dir=blocker / "traces")
    try:
        for _ in range(2):
            resp = httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions",
                              json={"stream": True}, timeout=10,
                              headers={"x-streamtap-session": "unwritable"})
            assert resp.status_code == 200
            assert resp.content == direct
        assert log_events(proxy.log(), "trace_dir_unusable"), proxy.log()
        assert wait_for(lambda: len(log_events(proxy.log(), "request")) == 2), proxy.log()
        # One line for the kind of failure, not one per record; health counts them.
        assert len(log_events(proxy.log(), "trace_write_failed")) == 1, proxy.log()
        health = httpx.get(proxy.url("_streamtap/health"), timeout=5).json()
        assert health["status"] == "degraded"
        assert health["records_written"] == 0
        assert health["records_failed"] == 2
    finally:
        assert proxy.stop() == 0
    assert blocker.is_file() and blocker.read_text().startswith("a regular file")
