"""The proxy's own decisions: shutting down with streams in flight, refusing an oversized body,
watchdogs, the one log line per request, the warnings at start and capture mode."""

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest

from streamtap.proxy.config import Config
from streamtap.proxy.serve.run import banner
from tests.clients import BackgroundRead, keepalive_stream, log_events, wait_for
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import CANARY_OUTPUT, chat_text_stream

# Every test here starts a process or a server (tests/README.md).
pytestmark = pytest.mark.e2e

READ_ERRORS = (httpx.RemoteProtocolError, httpx.ReadError)


def read_lines(stream, until: str, timeout: float = 10.0) -> str:
    """Lines from a subprocess pipe until one contains `until` (or EOF), on a thread, bounded."""
    lines: list[str] = []

    def run() -> None:
        for raw in iter(stream.readline, b""):
            lines.append(raw.decode(errors="replace"))
            if until in lines[-1]:
                return

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    reader.join(timeout)
    return "".join(lines)


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "streamtap", "serve", "--log-format", "json", *args]


SERVE_ENV = {**os.environ}


# -- shutdown -----------------------------------------------------------------------------------
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_during_a_stream_finishes_and_records_it(fake, tmp_path, blackhole, signum):
    prefix = fake.add(Scenario(chat_text_stream(3, done=False)[:3], ending="stall", stall_s=20))
    proxy = ProxyProcess(tmp_path, {"fake": fake.url, "hole": blackhole})
    try:
        streaming = BackgroundRead(proxy.url("fake") + prefix + "/v1/chat/completions",
                                   {"x-streamtap-session": "shutdown"})
        waiting = BackgroundRead(proxy.url("hole") + "/v1/chat/completions",
                                 {"x-streamtap-session": "shutdown-waiting"})
        assert streaming.started.wait(10) and streaming.received > 0
        assert wait_for(lambda: httpx.get(proxy.url("_streamtap/health"), timeout=5)
                        .json()["inflight"] == 2, timeout=5)
        sent_at = time.monotonic()
        proxy.process.send_signal(signum)
        assert proxy.process.wait(timeout=10) == 0
        assert time.monotonic() - sent_at < 5
        received, error = streaming.join(10)
        assert error in READ_ERRORS  # an error, never a clean but short end
        assert received == sum(map(len, chat_text_stream(3, done=False)[:3]))
        _, waiting_error = waiting.join(10)
        assert waiting_error is None and waiting.status == 503  # answered, before any byte
    finally:
        proxy.stop()
    record = proxy.record("shutdown")
    assert record["outcome"]["boundary"] == "proxy"
    assert "proxy_shutdown" in record["outcome"]["evidence"]
    assert record["outcome"]["phase"] == "text"
    assert record["downstream"]["ended"] == "aborted"
    assert record["response"]["status"] == 200
    assert fake.last(prefix).client_left.wait(5)  # the upstream request was closed too
    before = proxy.record("shutdown-waiting")
    assert before["outcome"]["boundary"] == "proxy"
    assert before["outcome"]["phase"] == "before_response"
    assert "proxy_shutdown" in before["outcome"]["evidence"]
    assert before["downstream"]["status"] == 503
    assert log_events(proxy.log(), "shutting_down")[0]["inflight"] == 2


def test_sigterm_right_after_the_banner_is_a_clean_shutdown(tmp_path):
    """A supervisor may stop the proxy as soon as it says it listens. Here the banner is longer
    than the pipe holds, so the proxy is still printing it when the signal arrives."""
    config = tmp_path / "many-routes.toml"
    config.write_text("[routes]\n" + "".join(f'r{i:04d} = "http://127.0.0.1:9/p{i}"\n'
                                             for i in range(3000)))
    process = subprocess.Popen(serve_command("--config", str(config), "--port", "0",
                                             "--trace-dir", str(tmp_path / "traces")),
                               cwd=tmp_path, env=SERVE_ENV, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    try:
        first = read_lines(process.stdout, "listening on", timeout=20)
        assert "listening on http://127.0.0.1:" in first
        process.send_signal(signal.SIGTERM)
        drain = threading.Thread(target=process.stdout.read, daemon=True)
        drain.start()  # let a correct proxy finish its banner and shut down
        code = process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0


# -- oversized bodies ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_proxy(fake, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("small")
    config = workdir / "small.toml"
    config.write_text("max_request_body_bytes = 1000\n")
    process = ProxyProcess(workdir, {"fake": fake.url}, "--config", str(config))
    yield process
    process.stop()


@pytest.mark.parametrize("chunked", [False, True])
def test_oversized_body_gets_413_and_a_record_and_nothing_upstream(fake, small_proxy, chunked):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    session = new_session()
    body = b'{"stream": true, "pad": "' + b"x" * 4000 + b'"}'
    content = iter([body[:1500], body[1500:]]) if chunked else body
    resp = httpx.post(small_proxy.url("fake") + prefix + "/v1/chat/completions", content=content,
                      timeout=10, headers={"x-streamtap-session": session,
                                           "content-type": "application/json"})
    assert resp.status_code == 413
    assert resp.headers["x-streamtap-error"] == "streamtap_request_too_large"
    assert resp.headers["content-type"] == "application/json"
    error = resp.json()["error"]
    assert error["type"] == "streamtap_request_too_large"
    assert "1000" in error["message"] and "max_request_body_bytes" in error["message"]
    record = small_proxy.record(session)
    assert record["downstream"]["status"] == 413
    assert record["response"] is None  # the upstream never answered: it was never asked
    assert record["outcome"]["boundary"] == "proxy"
    assert "request_too_large" in record["outcome"]["evidence"]
    assert record["outcome"]["retryable"] is False
    time.sleep(0.2)
    assert fake.seen[prefix.rsplit("/", 1)[-1]] == []


def test_body_at_the_limit_is_forwarded_and_the_sdk_reads_a_413(fake, small_proxy):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    body = b'{"pad": "' + b"y" * (1000 - 11) + b'"}'
    assert len(body) == 1000
    resp = httpx.post(small_proxy.url("fake") + prefix + "/v1/chat/completions", content=body,
                      timeout=10)
    assert resp.status_code == 200
    assert fake.last(prefix).body == body
    client = openai.OpenAI(base_url=small_proxy.url("fake") + prefix + "/v1", api_key="sk-x",
                           max_retries=0, timeout=10)
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="m", stream=True,
                                       messages=[{"role": "user", "content": "z" * 2000}])
    assert raised.value.status_code == 413
    assert "max_request_body_bytes" in str(raised.value)
    assert len(fake.seen[prefix.rsplit("/", 1)[-1]]) == 1


# -- watchdogs ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def idle_proxy(fake, tmp_path_factory, blackhole):
    process = ProxyProcess(tmp_path_factory.mktemp("idle"), {"fake": fake.url, "hole": blackhole},
                           "--idle-timeout-ms", "300")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def progress_proxy(fake, tmp_path_factory):
    process = ProxyProcess(tmp_path_factory.mktemp("progress"), {"fake": fake.url},
                           "--progress-timeout-ms", "300")
    yield process
    process.stop()


def test_idle_watchdog_aborts_a_stalled_stream(fake, idle_proxy):
    prefix = fake.add(Scenario(chat_text_stream(2, done=False)[:2], ending="stall", stall_s=20))
    session = new_session()
    started = time.monotonic()
    reader = BackgroundRead(idle_proxy.url("fake") + prefix + "/v1/chat/completions",
                            {"x-streamtap-session": session})
    received, error = reader.join(10)
    elapsed = time.monotonic() - started
    assert error in READ_ERRORS and received > 0
    assert 0.3 <= elapsed < 3
    record = idle_proxy.record(session)
    assert record["watchdog"]["idle_timeout_ms"] == 300
    assert record["watchdog"]["progress_timeout_ms"] == 0
    assert record["watchdog"]["fired"] == "idle"
    assert record["outcome"]["boundary"] == "watchdog"
    assert "watchdog_idle" in record["outcome"]["evidence"]
    assert record["downstream"]["ended"] == "aborted"
    assert record["timeline"]["duration_ms"] >= 300
    assert fake.last(prefix).client_left.wait(5)


def test_idle_watchdog_before_response_headers_is_a_504(idle_proxy):
    session = new_session()
    resp = httpx.post(idle_proxy.url("hole") + "/v1/chat/completions", json={"stream": True},
                      headers={"x-streamtap-session": session}, timeout=10)
    assert resp.status_code == 504
    assert resp.headers["x-streamtap-error"] == "streamtap_watchdog_idle"
    record = idle_proxy.record(session)
    assert record["watchdog"]["fired"] == "idle"
    assert record["outcome"]["boundary"] == "watchdog"
    assert record["outcome"]["phase"] == "before_response"
    assert record["downstream"]["status"] == 504


def test_idle_watchdog_leaves_a_slow_but_steady_stream_alone(fake, idle_proxy):
    stream = chat_text_stream(6)
    prefix = fake.add(Scenario(stream, delay_s=0.1))  # ~0.8 s in all, never 300 ms silent
    session = new_session()
    received, error = BackgroundRead(idle_proxy.url("fake") + prefix + "/v1/chat/completions",
                                     {"x-streamtap-session": session}).join(10)
    assert (received, error) == (sum(map(len, stream)), None)
    record = idle_proxy.record(session)
    assert record["watchdog"]["fired"] is None
    assert record["outcome"]["boundary"] == "none"
    assert record["timeline"]["duration_ms"] > 600


def test_progress_watchdog_is_not_fooled_by_keepalives(fake, progress_proxy):
    # Keepalive comments every 50 ms for 2 s: bytes keep flowing, the model says nothing.
    prefix = fake.add(Scenario(keepalive_stream(40), delay_s=0.05, ending="stall", stall_s=20))
    session = new_session()
    started = time.monotonic()
    received, error = BackgroundRead(progress_proxy.url("fake") + prefix + "/v1/chat/completions",
                                     {"x-streamtap-session": session}).join(10)
    elapsed = time.monotonic() - started
    assert error in READ_ERRORS and received > 0
    assert 0.3 <= elapsed < 1.8  # fired while the keepalives were still coming
    record = progress_proxy.record(session)
    assert record["watchdog"]["progress_timeout_ms"] == 300
    assert record["watchdog"]["fired"] == "progress"
    assert record["outcome"]["boundary"] == "watchdog"
    assert "watchdog_progress" in record["outcome"]["evidence"]
    assert record["outcome"]["phase"] == "before_progress"
    assert record["frames"] and {frame[2] for frame in record["frames"]} == {"keepalive"}
    assert record["timeline"]["first_progress"] is None
    assert fake.last(prefix).client_left.wait(5)


def test_progress_watchdog_leaves_a_progressing_stream_alone(fake, progress_proxy):
    stream = chat_text_stream(8)
    prefix = fake.add(Scenario(stream, delay_s=0.1))  # a text delta every 100 ms for ~1 s
    session = new_session()
    received, error = BackgroundRead(progress_proxy.url("fake") + prefix + "/v1/chat/completions",
                                     {"x-streamtap-session": session}).join(10)
    assert (received, error) == (sum(map(len, stream)), None)
    record = progress_proxy.record(session)
    assert record["watchdog"]["fired"] is None
    assert record["outcome"]["boundary"] == "none"


# -- the canonical log line ---------------------------------------------------------------------
def test_one_canonical_log_line_per_request(fake, proxy):
    ok = fake.add(Scenario(chat_text_stream(2)))
    failing = fake.add(Scenario([b'{"error": {"message": "boom", "type": "server_error"}}'],
                                status=500, content_type="application/json"))
    cut = fake.add(Scenario(chat_text_stream(2, done=False)[:-1], ending="reset"))
    sessions = {new_session(): (ok, 200, "none", "complete"),
                new_session(): (failing, 500, "provider_error", "before_response"),
                new_session(): (cut, 200, "transport", "text")}
    for session, (prefix, *_rest) in sessions.items():
        try:
            httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions",
                       json={"model": "gpt-test", "stream": True}, timeout=10,
                       headers={"x-streamtap-session": session})
        except httpx.HTTPError:
            pass  # the reset
    # the control API gets no record, so no line either
    quiet = new_session()
    httpx.get(proxy.url("_streamtap/health"), headers={"x-streamtap-session": quiet}, timeout=5)
    # a request streamtap refuses itself (no such route) gets its line like any other
    refused = new_session()
    httpx.get(proxy.url("nowhere") + "/x", headers={"x-streamtap-session": refused}, timeout=5)

    def lines() -> dict[str, list[dict]]:
        found: dict[str, list[dict]] = {}
        for entry in log_events(proxy.log(), "request"):
            found.setdefault(entry.get("session_id"), []).append(entry)
        return found

    assert wait_for(lambda: all(s in lines() for s in sessions)), proxy.log()[-3000:]
    time.sleep(0.3)  # a second line, if there were one, would be there by now
    found = lines()
    assert quiet not in found
    [entry] = found[refused]
    # streamtap answered it: no upstream status, the client's 404 (as the index line says)
    assert (entry["route"], entry["status"], entry["downstream_status"], entry["boundary"]) == (
        "nowhere", None, 404, "proxy")
    for session, (prefix, status, boundary, phase) in sessions.items():
        [entry] = found[session]
        record = proxy.record(session)
        assert entry["trace_id"] == record["trace_id"]
        assert (entry["route"], entry["method"]) == ("fake", "POST")
        assert entry["path"] == prefix + "/v1/chat/completions"
        assert (entry["status"], entry["boundary"], entry["phase"]) == (status, boundary, phase)
        assert entry["downstream_status"] == status
        assert entry["model"] == "gpt-test"
        assert isinstance(entry["duration_ms"], (int, float)) and entry["duration_ms"] >= 0
        assert entry["duration_ms"] == record["timeline"]["duration_ms"]
        assert entry["frames"] == record["stream"]["frame_count"]
        assert entry["bytes"] == record["stream"]["bytes"]
        assert entry["level"] == ("info" if boundary == "none" else "warning")


# -- start-up warnings and capture mode ---------------------------------------------------------
def test_non_loopback_bind_warns_that_keys_are_exposed(tmp_path):
    process = subprocess.Popen(serve_command("--host", "0.0.0.0", "--port", "0",
                                             "--trace-dir", str(tmp_path / "traces")),
                               cwd=tmp_path, env=SERVE_ENV, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    try:
        text = read_lines(process.stdout, "WARNING", timeout=20)
    finally:
        process.kill()  # at once: nothing may stay reachable from outside loopback
        process.wait(10)
    assert "listening on http://0.0.0.0:" in text
    assert "WARNING: bound to 0.0.0.0, not loopback" in text and "API keys" in text
    # and on loopback there is no such warning
    assert "WARNING" not in banner(Config(), 8787)
    assert "WARNING" not in banner(Config(host="localhost"), 8787)
    assert "WARNING" in banner(Config(host="::"), 8787)


def test_capture_mode_writes_raw_bodies_beside_the_record(fake, tmp_path):
    stream = chat_text_stream(3)
    prefix = fake.add(Scenario(stream, headers=[("set-cookie", "sid=capture-secret")]))
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, "--capture-bodies")
    try:
        rest = read_lines(proxy.process.stdout, "--capture-bodies")
        assert "WARNING: --capture-bodies is on" in rest
        body = json.dumps({"model": "m", "stream": True,
                           "messages": [{"role": "user", "content": "captured prompt"}]}).encode()
        resp = httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions", content=body,
                          timeout=10, headers={"x-streamtap-session": "cap",
                                               "authorization": "Bearer capture-key-123"})
        assert resp.status_code == 200 and CANARY_OUTPUT in resp.text
        record = proxy.record("cap")
    finally:
        assert proxy.stop() == 0
    assert record["capture"] is True
    folder = proxy.trace_dir / "cap"
    [record_file] = folder.glob("*.json")
    stem = record_file.name[:-len(".json")]
    request_file = folder / f"{stem}.request.body"
    response_file = folder / f"{stem}.response.body"
    assert request_file.read_bytes() == body
    assert response_file.read_bytes() == b"".join(stream)
    for path in (request_file, response_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # the record itself stays redacted: headers by allowlist, no content
    text = record_file.read_text()
    assert "capture-key-123" not in text and "capture-secret" not in text
    assert "captured prompt" not in text and CANARY_OUTPUT not in text
    assert "authorization" not in record["request"]["headers"]
    assert sorted(os.listdir(folder)) == sorted([record_file.name, request_file.name,
                                                 response_file.name, "index.jsonl"])


def test_no_side_files_without_capture_mode(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    session = new_session()
    httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions", json={"stream": True},
               headers={"x-streamtap-session": session}, timeout=10)
    assert proxy.record(session)["capture"] is False
    assert not list((proxy.trace_dir / session).glob("*.body"))
