"""A second SIGTERM during shutdown means "exit now", never death by the signal: streamtap keeps
its handlers until the process is gone, ends the streams still in flight at once and still writes
their records; a third exits at once and says how many records it dropped."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.diagnostics.samples.format import sample_ending
from tests.clients import BackgroundRead, RawClient, log_events, wait_for
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream

RUNS = 10  # starting a proxy is most of the cost; before the fix, most runs died


def test_a_second_sigterm_20_to_40_ms_into_shutdown_never_kills_with_the_signal(fake, tmp_path):
    prefix = fake.add(Scenario(chat_text_stream(3), ending="stall", stall_s=30))
    clean = fake.add(Scenario(chat_text_stream(3)))
    statuses, missing = [], []

    def start(run: int) -> ProxyProcess:
        workdir = tmp_path / f"run{run}"
        workdir.mkdir()
        return ProxyProcess(workdir, {"fake": fake.url})

    with ThreadPoolExecutor(8) as pool:  # starting is most of the time: start them together
        proxies = list(pool.map(start, range(RUNS)))
    for run, proxy in enumerate(proxies):
        session = new_session()
        done = httpx.post(proxy.url("fake") + clean + "/v1/chat/completions",
                          json={"stream": True}, timeout=10,
                          headers={"x-streamtap-session": session})
        assert done.status_code == 200
        # One stream in flight when the signals come: it stalls after its first frames.
        started = threading.Event()

        def stream() -> None:
            try:
                with httpx.stream("POST", proxy.url("fake") + prefix + "/v1/chat/completions",
                                  json={"stream": True}, timeout=10,
                                  headers={"x-streamtap-session": session}) as response:
                    for _ in response.iter_raw():
                        started.set()
            except httpx.HTTPError:
                pass

        reader = threading.Thread(target=stream)
        reader.start()
        assert started.wait(10)
        proxy.process.send_signal(signal.SIGTERM)
        time.sleep(0.020 + 0.020 * run / (RUNS - 1))
        if proxy.process.poll() is None:
            proxy.process.send_signal(signal.SIGTERM)
        statuses.append(proxy.stop())
        reader.join(10)
        index = proxy.trace_dir / session / "index.jsonl"
        lines = index.read_text().splitlines() if index.exists() else []
        # The finished exchange is always written; the one in flight too, unless the second
        # signal came before its cancellation finished (then it is said in the log).
        if not lines or json.loads(lines[0])["trace_id"] is None:
            missing.append(run)
    assert -signal.SIGTERM not in statuses, statuses
    assert set(statuses) == {0}, statuses
    assert missing == [], f"runs without the finished exchange's record: {missing}"


# -- a second signal ends the streams in flight and still writes their records ---------------------
READ_ERRORS = (httpx.RemoteProtocolError, httpx.ReadError)
BIG_FRAMES = chat_text_stream(3, done=False)[:2] + [b": " + b"x" * 60_000 + b"\n\n"] * 40


def inflight(proxy: ProxyProcess) -> int:
    return httpx.get(proxy.url("_streamtap/health"), timeout=5).json()["inflight"]


def open_streams(proxy: ProxyProcess, path: str, session: str, count: int,
                 not_reading: int = 0, stuck_path: str | None = None,
                 ) -> tuple[list[BackgroundRead], list[RawClient]]:
    """`count` streams through the proxy: httpx clients reading `path`, and `not_reading` raw
    clients that sent their request (for `stuck_path`, else `path`) and never read (a small
    receive buffer: backpressure at once)."""
    headers = {"x-streamtap-session": session}
    readers = [BackgroundRead(proxy.url("fake") + path, headers, timeout=30)
               for _ in range(count - not_reading)]
    stuck = []
    for _ in range(not_reading):
        stuck.append(RawClient(proxy.port, rcvbuf=4096))
        stuck[-1].request(f"/fake{stuck_path or path}", session)
    assert all(reader.started.wait(20) and reader.received for reader in readers)
    assert wait_for(lambda: inflight(proxy) == count, timeout=20), inflight(proxy)
    return readers, stuck


def queue_two_signals(process, first: int, second: int) -> float:
    """Both signals reach the proxy before its loop runs again, so the second finds every stream
    still in flight: what a fast double Ctrl-C does to a busy proxy, made certain. (Two SIGTERMs
    would merge into one while pending, hence two different signals.) Returns when they were
    released."""
    process.send_signal(signal.SIGSTOP)
    assert wait_for(lambda: Path(f"/proc/{process.pid}/stat").read_text()
                    .rsplit(")", 1)[1].split()[0] == "T", timeout=5)
    process.send_signal(first)
    time.sleep(0.003)
    process.send_signal(second)
    released = time.monotonic()
    process.send_signal(signal.SIGCONT)
    return released


def assert_forced(record: dict, frames_at_least: int) -> None:
    outcome = record["outcome"]
    assert (outcome["boundary"], outcome["evidence"][0], outcome["phase"]) == (
        "proxy", "shutdown_forced", "text"), outcome
    assert record["stream"]["frame_count"] >= frames_at_least and record["frames"]
    assert record["downstream"]["ended"] == "aborted" and record["response"]["status"] == 200
    assert sample_ending(record_from_dict(record)) == "reset"


@pytest.mark.parametrize("signals", [(signal.SIGTERM, signal.SIGINT),
                                     (signal.SIGINT, signal.SIGTERM)],
                         ids=["TERM-then-INT", "INT-then-TERM"])
def test_a_second_signal_ends_20_streams_at_once_and_writes_every_record(fake, tmp_path, signals):
    stream = chat_text_stream(3, done=False)[:3]
    prefix = fake.add(Scenario(stream, ending="stall", stall_s=30))
    proxy = ProxyProcess(tmp_path, {"fake": fake.url})
    session = new_session()
    try:
        readers, _ = open_streams(proxy, prefix + "/v1/chat/completions", session, 20)
        released = queue_two_signals(proxy.process, *signals)
        assert proxy.process.wait(timeout=10) == 0
        took = time.monotonic() - released
    finally:
        proxy.stop()
    assert took < 1.0, f"exited {took:.2f} s after the second signal"
    records = proxy.records(session, 20, timeout=1)
    assert len(records) == 20
    for record in records:  # the three frames the provider sent before it stalled, no more
        assert_forced(record, 3)
        assert record["stream"]["frame_count"] == 3
        assert record["outcome"]["evidence"] == ["shutdown_forced"]
    for reader in readers:  # an error, never a clean but short end; every byte sent got there
        received, error = reader.join(10)
        assert error in READ_ERRORS and received == sum(map(len, stream))
    for seen in fake.seen[prefix.rsplit("/", 1)[-1]]:
        assert seen.client_left.wait(5)  # every upstream request was closed
    assert log_events(proxy.log(), "exiting_now")[0]["inflight"] == 20


def test_a_second_signal_records_a_request_still_waiting_for_its_response(fake, tmp_path,
                                                                          blackhole):
    prefix = fake.add(Scenario(chat_text_stream(3, done=False)[:3], ending="stall", stall_s=30))
    proxy = ProxyProcess(tmp_path, {"fake": fake.url, "hole": blackhole})
    session = new_session()
    try:
        open_streams(proxy, prefix + "/v1/chat/completions", session, 1)
        waiting = BackgroundRead(proxy.url("hole") + "/v1/chat/completions",
                                 {"x-streamtap-session": session})
        assert wait_for(lambda: inflight(proxy) == 2, timeout=10)
        queue_two_signals(proxy.process, signal.SIGTERM, signal.SIGINT)
        assert proxy.process.wait(timeout=10) == 0
    finally:
        proxy.stop()
    _, error = waiting.join(10)
    assert error in READ_ERRORS and waiting.status is None  # no answer: the connection is reset
    [record] = [record for record in proxy.records(session, 2, timeout=1)
                if record["route"] == "hole"]
    outcome = record["outcome"]
    assert (outcome["boundary"], outcome["phase"], outcome["evidence"]) == (
        "proxy", "before_response", ["shutdown_forced"])
    assert record["response"] is None
    assert (record["downstream"]["ended"], record["downstream"]["status"]) == ("aborted", None)


def test_two_sigterms_a_few_ms_apart_write_20_records_and_exit_0(fake, tmp_path):
    """The issue's figure, as a user sends it: wherever the second SIGTERM lands in the
    shutdown, each stream is recorded once, by the graceful path or the forced one."""
    prefix = fake.add(Scenario(BIG_FRAMES, ending="stall", stall_s=30))
    proxy = ProxyProcess(tmp_path, {"fake": fake.url})
    session = new_session()
    stuck: list[RawClient] = []
    try:
        _, stuck = open_streams(proxy, prefix + "/v1/chat/completions", session, 20,
                                not_reading=10)
        proxy.process.send_signal(signal.SIGTERM)
        time.sleep(0.003)
        proxy.process.send_signal(signal.SIGTERM)
        assert proxy.process.wait(timeout=10) == 0
    finally:
        proxy.stop()
        for client in stuck:
            client.close()
    records = proxy.records(session, 20, timeout=1)
    assert len(records) == 20
    evidence = [record["outcome"]["evidence"] for record in records]
    assert all(codes in (["proxy_shutdown"], ["shutdown_forced"]) for codes in evidence), evidence
    forced = log_events(proxy.log(), "exiting_now")
    assert evidence.count(["shutdown_forced"]) == (forced[0]["inflight"] if forced else 0)


def test_clients_that_stopped_reading_do_not_hold_the_second_signal(fake, tmp_path):
    """Half of 100 clients read nothing (their buffers are full, the relay holds their upstream):
    a forced exit neither waits for them to drain nor loses their records."""
    prefix = fake.add(Scenario(BIG_FRAMES, ending="stall", stall_s=30))
    # more than the socket buffers between the provider and a client that reads nothing hold
    bigger = BIG_FRAMES + BIG_FRAMES[2:] * 3
    held = fake.add(Scenario(bigger, ending="stall", stall_s=30))
    proxy = ProxyProcess(tmp_path, {"fake": fake.url})
    session = new_session()
    whole = sum(map(len, BIG_FRAMES))
    stuck: list[RawClient] = []
    try:
        readers, stuck = open_streams(proxy, prefix + "/v1/chat/completions", session, 100,
                                      not_reading=50, stuck_path=held + "/v1/chat/completions")
        for reader in readers:
            assert wait_for(lambda: reader.received == whole, timeout=20)
        released = queue_two_signals(proxy.process, signal.SIGINT, signal.SIGTERM)
        assert proxy.process.wait(timeout=10) == 0
        took = time.monotonic() - released
    finally:
        proxy.stop()
        for client in stuck:
            client.close()
    assert took < 1.0, f"exited {took:.2f} s after the second signal"
    records = proxy.records(session, 100, timeout=1)
    assert len(records) == 100
    # A held stream may stop mid-frame (`unterminated_frame`), and these streams are comment
    # frames after two events: held long enough, only keep-alives came (`heartbeats_only`).
    for record in records:
        assert_forced(record, 2)
        assert set(record["outcome"]["evidence"]) <= {"shutdown_forced", "unterminated_frame",
                                                      "heartbeats_only"}
    # the readers' records hold every frame; the stuck clients' ones what came before the relay
    # stopped reading for them (backpressure), never all of it
    sizes = {path: sorted(record["stream"]["bytes"] for record in records
                          if record["request"]["path"].startswith(path))
             for path in (prefix + "/", held + "/")}
    assert sizes[prefix + "/"] == [whole] * 50
    assert len(sizes[held + "/"]) == 50 and sizes[held + "/"][-1] < sum(map(len, bigger))


def stuck_index(folder: Path) -> int:
    """Make `folder/index.jsonl` a FIFO whose buffer is already full: the store's first append
    to it blocks (a disk that hangs). Returns the descriptor that keeps it full."""
    folder.mkdir(parents=True)
    os.mkfifo(folder / "index.jsonl", 0o600)
    fd = os.open(folder / "index.jsonl", os.O_RDWR | os.O_NONBLOCK)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except BlockingIOError:
        return fd


def assert_a_third_signal_exits_at_once(proxy: ProxyProcess, dropped: int) -> None:
    """The proxy is still writing records (its trace dir hangs): one more SIGTERM ends it at
    once, status 1, with one line that says how many records that dropped."""
    assert proxy.process.poll() is None
    proxy.process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    assert proxy.process.wait(timeout=5) == 1
    took = time.monotonic() - sent
    assert took < 1.0, f"exited {took:.2f} s after the third signal"
    said = log_events(proxy.log(), "exiting_at_once")
    assert [(line["records_dropped"], line["level"]) for line in said] == [(dropped, "error")]


def test_a_third_signal_exits_at_once_and_says_how_many_records_it_dropped(fake, tmp_path):
    stream = chat_text_stream(3, done=False)[:3]
    prefix = fake.add(Scenario(stream, ending="stall", stall_s=30))
    session = new_session()
    hold = stuck_index(tmp_path / "traces" / session)
    proxy = ProxyProcess(tmp_path, {"fake": fake.url})
    try:
        readers, _ = open_streams(proxy, prefix + "/v1/chat/completions", session, 5)
        queue_two_signals(proxy.process, signal.SIGTERM, signal.SIGINT)
        assert wait_for(lambda: log_events(proxy.log(), "exiting_now"), timeout=5)
        # The records cannot be written, yet both sides of every stream are closed already.
        for reader in readers:
            assert reader.join(5)[1] in READ_ERRORS
        for seen in fake.seen[prefix.rsplit("/", 1)[-1]]:
            assert seen.client_left.wait(5)
        assert_a_third_signal_exits_at_once(proxy, dropped=5)
    finally:
        proxy.stop()
        os.close(hold)


def test_a_third_signal_also_exits_at_once_while_a_graceful_stop_writes_its_records(fake,
                                                                                    tmp_path):
    """One signal, and the records wait for a disk that hangs: the second changes nothing (they
    are being written, as it would have them), the third exits at once and says what it cost."""
    prefix = fake.add(Scenario(chat_text_stream(3, done=False)[:3], ending="stall", stall_s=30))
    session = new_session()
    hold = stuck_index(tmp_path / "traces" / session)
    proxy = ProxyProcess(tmp_path, {"fake": fake.url})
    try:
        readers, _ = open_streams(proxy, prefix + "/v1/chat/completions", session, 5)
        proxy.process.send_signal(signal.SIGTERM)
        for reader in readers:  # the graceful stop ended them; their records are queued
            assert reader.join(5)[1] in READ_ERRORS
        time.sleep(0.5)  # by now the stop is writing; if not, the second signal forces it to
        proxy.process.send_signal(signal.SIGTERM)
        assert wait_for(lambda: log_events(proxy.log(), "still_writing_records")
                        or log_events(proxy.log(), "exiting_now"), timeout=5)
        assert_a_third_signal_exits_at_once(proxy, dropped=5)
    finally:
        proxy.stop()
        os.close(hold)
