"""OTLP export: records become spans at a real OTLP/HTTP receiver, off the proxy's path; a backend
that is down or hangs never slows forwarding, drops are counted, and export resumes."""

from __future__ import annotations

import socket
import sys
import time

import httpx
import openai
import pytest
import structlog

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.proxy.config import OtlpExport
from streamtap.proxy.export import otlp
from streamtap.proxy.export.otlp import ExportUnavailable, OtlpExporter, make_exporter
from tests.clients import all_files, wait_for
from tests.fakeprovider import Scenario
from tests.otlpsink import OtlpSink
from tests.test_lifecycle import read_lines
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import CANARY_ARG, CANARY_OUTPUT, chat_text_stream, chat_tool_stream
from tests.unit.test_spans import complete, http_error, reset_mid_tool_call, wrapped_error

HEADER_KEY = "Bearer CANARY-OTLP-KEY-4e2a"
LOG = structlog.get_logger("test")


@pytest.fixture
def sink():
    receiver = OtlpSink().start()
    yield receiver
    receiver.stop()


def settings(endpoint: str, **changes) -> OtlpExport:
    return OtlpExport(endpoint=endpoint, **{"timeout_ms": 2000, **changes})


@pytest.mark.e2e
def test_records_arrive_as_spans_with_resource_and_headers(sink):
    exporter = OtlpExporter(settings(sink.endpoint, project="team-a",
                                     headers=(("authorization", HEADER_KEY),)),
                            LOG, {"openai": "https://api.openai.com"})
    for record in (complete(), reset_mid_tool_call(), wrapped_error(), http_error()):
        exporter.offer(record_from_dict(record))
    assert exporter.flush(10)
    exporter.close()
    spans = sink.wait_spans(4)
    by_status = {span["attrs"]["streamtap.boundary"]: span for span in spans}
    assert set(by_status) == {"none", "transport", "provider_error"}
    assert all(span["name"] == "chat m" and span["kind"] == "SPAN_KIND_CLIENT" for span in spans)
    reset = by_status["transport"]
    assert reset["status"] == {"code": "STATUS_CODE_ERROR", "message":
                               reset["attrs"]["streamtap.summary"]}
    assert reset["attrs"]["gen_ai.response.finish_reasons"] == ["error"]
    assert reset["attrs"]["server.address"] == "api.openai.com"
    assert reset["traceId"] and int(reset["startTimeUnixNano"]) < int(reset["endTimeUnixNano"])
    assert "status" not in by_status["none"] or by_status["none"]["status"] == {}
    assert len([e for e in by_status["none"]["events"] if e["name"] == "streamtap.frame"]) == 7
    resource = spans[0]["resource"]
    assert resource["service.name"] == "streamtap"
    assert resource["openinference.project.name"] == "team-a"
    assert sink.headers[0]["authorization"] == HEADER_KEY  # sent to the backend ...
    assert exporter.health() == {"state": "ok", "queued": 0, "exported": 4, "dropped": 0,
                                 "unmappable": 0, "failed_batches": 0, "last_error": None}


@pytest.mark.e2e
def test_a_full_queue_drops_and_counts_and_a_returning_backend_resumes():
    port_holder = socket.socket()
    port_holder.bind(("127.0.0.1", 0))
    port = port_holder.getsockname()[1]
    port_holder.close()  # nothing listens: connection refused, the backend is down
    exporter = OtlpExporter(settings(f"http://127.0.0.1:{port}", queue_limit=5, batch_size=2,
                                     timeout_ms=300), LOG)
    record = record_from_dict(complete())
    started = time.monotonic()
    for _ in range(50):
        exporter.offer(record)
    assert time.monotonic() - started < 0.5  # offer never waits for the backend
    assert exporter.flush(20)
    health = exporter.health()
    assert health["dropped"] == 50 and health["exported"] == 0 and health["state"] == "failing"
    assert health["failed_batches"] >= 1 and "did not answer" in health["last_error"]
    sink = OtlpSink(port).start()  # the backend comes back on the same address
    try:
        exporter.offer(record_from_dict(wrapped_error()))
        assert exporter.flush(10)
        assert sink.wait_spans(1)[0]["attrs"]["streamtap.boundary"] == "provider_error"
        health = exporter.health()
        assert (health["state"], health["exported"], health["dropped"]) == ("ok", 1, 50)
    finally:
        exporter.close()
        sink.stop()


@pytest.mark.e2e
def test_a_record_that_cannot_be_a_span_is_counted_not_fatal(sink):
    exporter = OtlpExporter(settings(sink.endpoint), LOG)
    exporter.offer(record_from_dict({**complete(), "started_at": "yesterday"}))
    exporter.offer(record_from_dict(complete()))
    assert exporter.flush(10)
    exporter.close()
    assert len(sink.wait_spans(1)) == 1
    assert exporter.health()["unmappable"] == 1 and exporter.health()["exported"] == 1


def test_without_the_otel_extra_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    with pytest.raises(ExportUnavailable, match=r"pip install 'streamtap\[otel\]'"):
        make_exporter(settings("http://127.0.0.1:9"), LOG, {})
    assert make_exporter(OtlpExport(), LOG, {}) is None  # no endpoint: export is off
    assert otlp.INSTALL_HINT in str(ExportUnavailable(otlp.INSTALL_HINT))


# -- the real proxy ------------------------------------------------------------------------------
def health(proxy) -> dict:
    return httpx.get(proxy.url() + "/_streamtap/health", timeout=5).json()


def test_serve_exports_each_record_and_never_sends_a_canary(fake, sink, tmp_path):
    config = tmp_path / "streamtap.toml"
    config.write_text('[export.otlp]\nproject = "agents"\n'
                      f'headers = {{ authorization = "{HEADER_KEY}" }}\n')
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, "--config", str(config),
                         "--otlp-endpoint", sink.endpoint)
    try:
        banner = read_lines(proxy.process.stdout, "otlp:")  # the rest of the banner
        assert f"otlp: every record also goes as a span to {sink.endpoint}/v1/traces" in banner
        session = new_session()
        client = openai.OpenAI(base_url=proxy.url("fake") + fake.add(Scenario(
            chat_tool_stream(5, finish=False), ending="reset")) + "/v1", api_key="sk-CANARY-1",
            max_retries=0, default_headers={"x-streamtap-session": session,
                                            "x-streamtap-message": "turn-1"})
        with pytest.raises(openai.APIError):
            for _ in client.chat.completions.create(model="gpt-test", stream=True, messages=[
                    {"role": "user", "content": "CANARY-PROMPT-otlp"}]):
                pass
        span = sink.wait_spans(1)[0]
        proxy.records(session)
        assert span["name"] == "chat gpt-test"
        attrs = span["attrs"]
        assert (attrs["streamtap.boundary"], attrs["streamtap.phase"]) == ("transport",
                                                                           "tool_input")
        assert (attrs["session.id"], attrs["streamtap.message_id"]) == (session, "turn-1")
        assert (attrs["server.address"], attrs["server.port"]) == ("127.0.0.1", fake.port)
        assert span["resource"]["openinference.project.name"] == "agents"
        wire = b"".join(sink.raw)
        for canary in (b"CANARY-PROMPT", CANARY_ARG.encode(), b"sk-CANARY", b"CANARY-OTLP"):
            assert canary not in wire
        assert sink.headers[0]["authorization"] == HEADER_KEY
        assert wait_for(lambda: health(proxy)["otlp"]["exported"] == 1)
    finally:
        proxy.stop()
    # The backend's key is in none of streamtap's files, nor its log.
    for path in all_files(proxy.trace_dir):
        assert b"CANARY-OTLP" not in path.read_bytes(), path
    assert "CANARY-OTLP" not in proxy.log()


def test_a_hanging_backend_never_slows_forwarding_and_drops_are_counted(fake, blackhole,
                                                                        tmp_path):
    hanging_backend = blackhole  # an OTLP endpoint that never answers: the slowest backend
    config = tmp_path / "streamtap.toml"
    config.write_text("[export.otlp]\nqueue_limit = 2\nbatch_size = 1\n")  # timeout 10 s
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, "--config", str(config),
                         "--otlp-endpoint", hanging_backend)
    try:
        prefix = fake.add(Scenario(chat_text_stream(3)))
        timings = []
        for _ in range(8):
            started = time.monotonic()
            response = httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions",
                                  json={"model": "m", "stream": True}, timeout=10)
            timings.append(time.monotonic() - started)
            assert response.status_code == 200 and CANARY_OUTPUT in response.text
        assert max(timings) < 3.0, timings  # the 10 s export timeout is nowhere in forwarding
        state = wait_for(lambda: (h := health(proxy))["records_written"] == 8 and h)
        otlp_health = state["otlp"]
        # One batch is stuck at the backend, two wait, the rest were dropped on arrival.
        assert otlp_health["exported"] == 0 and otlp_health["dropped"] >= 5, otlp_health
        assert state["records_failed"] == 0
    finally:
        proxy.stop()


@pytest.mark.e2e
def test_export_flags_and_env_are_validated_before_listening(tmp_path):
    import subprocess

    result = subprocess.run([sys.executable, "-m", "streamtap", "serve", "--port", "0",
                             "--otlp-endpoint", "localhost:4318"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=30)
    assert result.returncode == 2
    assert "config error at `--otlp-endpoint`: expected an http(s) URL" in result.stderr
    result = subprocess.run([sys.executable, "-m", "streamtap", "serve", "--port", "0"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=30,
                            env={**__import__("os").environ, "OTEL_EXPORTER_OTLP_ENDPOINT":
                                 "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert result.returncode == 2
    assert "`export.otlp.protocol`: only http/protobuf is supported, got 'grpc'" in result.stderr
