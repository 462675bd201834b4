"""Following a running proxy: `GET /_streamtap/events` publishes one summary per finished request
(loopback only), and `streamtap tail` prints one readable row for each as it ends."""

import json
import queue
import subprocess
import sys
import threading
import time

import httpx
import pytest
from aiohttp.test_utils import make_mocked_request

from streamtap.proxy.serve.guard import guarded
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream, chat_tool_stream


@pytest.fixture(scope="module")
def eproxy(fake, tmp_path_factory):
    process = ProxyProcess(tmp_path_factory.mktemp("events"), {"fake": fake.url})
    yield process
    process.stop()


class LineReader:
    """A subprocess's stdout lines, readable with a timeout."""

    def __init__(self, process: subprocess.Popen):
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process) -> None:
        for line in process.stdout:
            self.lines.put(line.decode())

    def next(self, timeout: float = 15.0) -> str:
        return self.lines.get(timeout=timeout)


def send(proxy, prefix: str, session: str, ok: bool = True) -> None:
    try:
        with httpx.stream("POST", proxy.url("fake") + prefix + "/v1/chat/completions",
                          json={"model": "gpt-tail", "stream": True},
                          headers={"x-streamtap-session": session}, timeout=10) as resp:
            for _ in resp.iter_bytes():
                pass
    except httpx.HTTPError:
        assert not ok


def test_tail_prints_a_row_per_finished_request(eproxy, fake):
    good = fake.add(Scenario(chat_text_stream(2)))
    broken = fake.add(Scenario(chat_tool_stream(4, finish=False), ending="reset"))
    session = new_session()
    tail = subprocess.Popen([sys.executable, "-m", "streamtap", "tail", "--proxy", eproxy.url()],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        reader = LineReader(tail)
        time.sleep(1.0)  # tail subscribes before the requests finish
        send(eproxy, good, session)
        first = reader.next()
        send(eproxy, broken, session, ok=False)
        second = reader.next()
    finally:
        tail.terminate()
        tail.wait(10)
    assert session[:12] in first and "gpt-tail" in first and "  ok  " in first
    assert "The openai stream completed" not in first  # route `fake` is the provider here
    assert "completed normally" in first
    assert "FAIL transport/tool_input" in second and "tool call #0 (4 chunks)" in second


def test_tail_failed_skips_requests_that_ended_well(eproxy, fake):
    good = fake.add(Scenario(chat_text_stream(2)))
    cut = fake.add(Scenario(chat_text_stream(4, done=False)[:-1]))
    session = new_session()
    tail = subprocess.Popen([sys.executable, "-m", "streamtap", "tail", "--failed", "--proxy",
                             eproxy.url()], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        reader = LineReader(tail)
        time.sleep(1.0)
        send(eproxy, good, session)
        send(eproxy, cut, session)
        row = reader.next()
    finally:
        tail.terminate()
        tail.wait(10)
    assert "FAIL provider_close/text" in row


def test_events_stream_carries_the_index_line_and_ends_at_shutdown(fake, tmp_path):
    proxy = ProxyProcess(tmp_path, {"fake": fake.url})
    prefix = fake.add(Scenario(chat_text_stream(2)))
    session = new_session()
    events: queue.Queue = queue.Queue()

    def follow() -> None:
        with httpx.stream("GET", proxy.url() + "/_streamtap/events", timeout=30) as resp:
            events.put(resp.headers["content-type"])
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    events.put(json.loads(line[6:]))
        events.put("closed")

    threading.Thread(target=follow, daemon=True).start()
    assert events.get(timeout=10) == "text/event-stream"
    send(proxy, prefix, session)
    summary = events.get(timeout=10)
    assert summary["session_id"] == session and summary["ok"] is True
    assert summary["file"].endswith(summary["trace_id"] + ".json")
    assert summary["cells"][-1] == "ok"
    started = time.monotonic()
    assert proxy.stop() == 0
    assert events.get(timeout=10) == "closed"
    assert time.monotonic() - started < 4, "an open event stream held up shutdown"


async def test_read_out_routes_sit_behind_the_control_guard():
    async def handler(request):
        return None  # reached: the guard let the request in

    readout_guard = guarded(handler)

    def request_from(address: str, host: str = "127.0.0.1:8787"):
        extra = {"peername": (address, 50000), "sockname": ("127.0.0.1", 8787)}
        transport = type("T", (), {"get_extra_info": lambda self, name, default=None:
                                   extra.get(name, default)})()
        return make_mocked_request("GET", "/_streamtap/events", headers={"Host": host},
                                   transport=transport)

    assert await readout_guard(request_from("127.0.0.1")) is None
    assert await readout_guard(request_from("127.0.0.1", host="localhost:8787")) is None
    for refused in (request_from("192.168.1.20"),                    # not loopback
                    request_from("127.0.0.1", host="evil.example")):  # DNS rebinding
        answer = await readout_guard(refused)
        assert answer is not None and answer.status == 403


async def test_a_slow_follower_loses_events_not_the_proxys_memory():
    import asyncio

    from streamtap.proxy.readout.feed import SUBSCRIBER_QUEUE, Feed

    feed = Feed()
    feed.bind(asyncio.get_running_loop())
    slow = feed.subscribe()
    for n in range(SUBSCRIBER_QUEUE + 50):
        feed.publish({"trace_id": f"{n}"})  # as the store's thread does
    await asyncio.sleep(0.05)
    assert slow.queue.qsize() == SUBSCRIBER_QUEUE and slow.dropped == 50
    assert (await slow.next(1))["trace_id"] == "0"
    feed.close()
    with pytest.raises(EOFError):
        for _ in range(SUBSCRIBER_QUEUE + 1):
            await slow.next(1)
