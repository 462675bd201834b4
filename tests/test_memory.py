"""Memory is bounded per stream, whatever the upstream sends: the proxy subprocess's peak RSS
(VmHWM) grows by less than 32 MiB for a 200 MB hostile stream (one event that never ends, one huge
line), with and without a fault rule armed, and for big request bodies; the bytes reach the client
as they come, and the record says what happened (a protocol error, a fault that fell back)."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.proxyproc import ProxyProcess, new_session

# Every test here starts a process or a server (tests/README.md).
pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
MiB = 1024 * 1024
HOSTILE_BYTES = 200 * 1000 * 1000
BUDGET = 32 * MiB
# Frame-cutting rules that never fire on these streams: they would hold bytes back if they could.
FAULTS = [None, "reset; at=event:text_delta:1000000", "truncate; at=events:100000"]


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.fixture(scope="module")
def hostile():
    process = subprocess.Popen([sys.executable, str(REPO / "bench" / "hostile.py")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = process.stdout.readline().decode()
    assert line.startswith("port "), line
    yield f"http://127.0.0.1:{int(line.split()[1])}"
    process.stdin.close()
    process.wait(10)


@pytest.fixture(scope="module")
def proxy(hostile, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("memory")
    process = ProxyProcess(workdir, {"h": hostile})
    yield process
    process.stop()


def peak_growth(proxy: ProxyProcess, work) -> tuple[int, object]:
    """Run `work()` and return how far the proxy's peak RSS rose above its current RSS."""
    pid = proxy.process.pid
    # Warm up first (imports, pools), so that only the stream's own cost is measured.
    httpx.post(proxy.url("h/v1/chat/completions?kind=chat"), json={"model": "m"}, timeout=10)
    # Writing 5 to clear_refs resets the peak (VmHWM) to the current RSS (Linux 4.0+).
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = status_kib(pid, "VmHWM")
    assert before <= status_kib(pid, "VmRSS") + 1024, "VmHWM was not reset"
    result = work()
    return (status_kib(pid, "VmHWM") - before) * 1024, result


def stream_through(proxy: ProxyProcess, kind: str, session: str, fault: str | None) -> dict:
    headers = {"x-streamtap-session": session}
    if fault:
        headers["x-streamtap-fault"] = fault
    received, first_ms = 0, None
    started = time.monotonic()
    with httpx.stream("POST", proxy.url(f"h/v1/chat/completions?kind={kind}&bytes="
                                        f"{HOSTILE_BYTES}"), json={"model": "m", "stream": True},
                      headers=headers, timeout=60) as response:
        for piece in response.iter_raw(1 << 20):
            if first_ms is None:
                first_ms = (time.monotonic() - started) * 1000
            received += len(piece)
    return {"received": received, "first_ms": first_ms,
            "total_ms": (time.monotonic() - started) * 1000}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("kind", ["endless", "huge_line"])
def test_a_200_mb_hostile_stream_costs_under_32_mib(proxy, kind, fault):
    session = new_session()
    growth, seen = peak_growth(proxy, lambda: stream_through(proxy, kind, session, fault))
    record = proxy.record(session)
    assert seen["received"] >= HOSTILE_BYTES, seen
    assert record["stream"]["bytes"] == seen["received"]
    print(f"\n{kind} fault={fault}: +{growth / MiB:.1f} MiB in {seen['total_ms']:.0f} ms")
    assert growth < BUDGET, f"peak RSS grew by {growth / MiB:.1f} MiB for {kind} (fault {fault})"
    # Bytes flow as they come: the first arrives long before the stream's end.
    assert seen["first_ms"] < seen["total_ms"] / 4, seen
    errors = record["stream"]["protocol_errors"]
    assert errors.get("event_too_long" if kind == "endless" else "line_too_long") == 1, errors
    if fault:
        assert record["fault"]["fired"] is False
        assert record["fault"]["fallback"] == "frame_too_large_forwarded_unbuffered"
        assert ("but a frame grew past what streamtap holds back (max_line_bytes), so it "
                "forwarded the rest unbuffered and did not fire.") in record["outcome"]["summary"]


def test_big_request_bodies_stream_upstream_and_cost_under_32_mib(proxy):
    body = b'{"model":"big-model","stream":false,"messages":[{"role":"user","content":"' + \
        b"y" * (60 * MiB) + b'"}]}'
    sessions = [new_session() for _ in range(4)]

    def send(session: str) -> int:
        response = httpx.post(proxy.url("h/v1/chat/completions?kind=sink"), content=body,
                              headers={"x-streamtap-session": session,
                                       "content-type": "application/json"}, timeout=60)
        return response.json()["received"]

    def work():
        with ThreadPoolExecutor(4) as pool:
            return list(pool.map(send, sessions))

    growth, received = peak_growth(proxy, work)
    assert received == [len(body)] * 4
    print(f"\n4 x 60 MiB bodies: +{growth / MiB:.1f} MiB")
    assert growth < BUDGET, f"peak RSS grew by {growth / MiB:.1f} MiB for 4 x 60 MiB bodies"
    request = proxy.record(sessions[0])["request"]
    assert request["body_bytes"] == len(body)
    assert request["model"] == "big-model" and request["stream"] is False
    # Counts need the whole body: the record says the summary was cut short instead of guessing.
    assert request["summary_truncated"] is True and request["message_count"] is None


def test_a_streamed_body_names_the_model_an_sdk_writes_after_the_messages(proxy):
    # The Anthropic SDK writes `model` after `messages`: the summary reads the body's last bytes.
    body = (b'{"max_tokens":5,"messages":[{"role":"user","content":"' + b"q" * (8 * MiB)
            + b' \\"model\\": \\"not-this\\""}],"model":"tail-model","stream":true}')
    session = new_session()
    response = httpx.post(proxy.url("h/v1/messages?kind=sink"), content=body, timeout=60,
                          headers={"x-streamtap-session": session})
    assert response.json()["received"] == len(body)
    request = proxy.record(session)["request"]
    assert (request["model"], request["stream"], request["body_bytes"]) == (
        "tail-model", True, len(body))
    assert request["summary_truncated"] is True


def test_a_chunked_body_past_the_limit_gets_a_413(hostile, tmp_path):
    config = tmp_path / "small.toml"
    config.write_text(f"max_request_body_bytes = {4 * MiB}\n")
    small = ProxyProcess(tmp_path, {"h": hostile}, "--config", str(config))
    try:
        session = new_session()

        def chunks():
            for _ in range(8):
                yield b"z" * MiB

        response = httpx.post(small.url("h/v1/chat/completions?kind=sink"), content=chunks(),
                              headers={"x-streamtap-session": session}, timeout=30)
        assert response.status_code == 413
        error = response.json()["error"]
        assert error["type"] == "streamtap_request_too_large"
        assert "Its first bytes had already been streamed upstream" in error["message"]
        outcome = small.record(session)["outcome"]
        assert outcome["ok"] is False and outcome["boundary"] == "proxy"
        assert outcome["evidence"][0] == "request_too_large_partly_sent"
        assert outcome["summary"] == (
            "The request body outgrew streamtap's limit while it was being streamed upstream, "
            "so streamtap stopped sending it and answered 413; the upstream saw an incomplete "
            "request.")
    finally:
        small.stop()
