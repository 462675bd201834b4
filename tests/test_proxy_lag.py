"""streamtap's own event-loop lag: a deliberate stall of the proxy's loop during a stream is
recorded (`timeline.proxy_lag_max_ms` and when), `show` and the HTML views warn about it, and a
verdict resting on the silence it fell in is less sure; the monitor itself measures only what
happened while each exchange was open."""

import asyncio
import subprocess
import sys
import time

import httpx
import pytest

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap import FakeProvider, Proxy
from streamtap.diagnostics.views.html import render_trace
from streamtap.diagnostics.verdict.proxylag import PROXY_LAG_WARN_MS, lag_warning
from streamtap.diagnostics.views.model import build_view
from streamtap.proxy.serve.looplag import LoopLag

STALL_S = 0.4
IDLE_MS = 800  # the watchdog ends the silence; the stall is half of it


def stream_through(proxy: Proxy, stall_s: float = 0.0) -> None:
    """One openai-chat stream the fake provider stops sending after its first progress; with
    `stall_s`, the proxy's own event loop is blocked that long once those frames are through,
    the way a long garbage collection or a slow callback would block it."""
    try:
        with httpx.stream("POST", proxy.url("openai") + "/v1/chat/completions",
                          json={"stream": True}, timeout=10) as response:
            chunks = response.iter_raw()
            seen = b""
            while seen.count(b"data:") < 2:  # the role frame, then the first text: all it sends
                seen += next(chunks)
            if stall_s:
                # Runs on the proxy's loop thread and returns when the loop is free again.
                proxy._thread.call(lambda: time.sleep(stall_s))
            for _ in chunks:
                pass
    except httpx.HTTPError:
        pass  # the idle watchdog aborts the stream: expected


@pytest.mark.e2e
def test_a_stall_of_the_proxy_itself_is_recorded_shown_and_lowers_the_verdict(tmp_path):
    stalled = FakeProvider.stream("openai-chat", text="a b c", ending="stalled",
                                  at="first_progress")
    with FakeProvider(stalled, FakeProvider.stream("openai-chat", text="a b c")) as fake, \
            Proxy(routes={"openai": fake}, idle_timeout_ms=IDLE_MS, trace_dir=tmp_path) as proxy:
        stream_through(proxy, STALL_S)
        stream_through(proxy)  # a plain complete stream, after it
        stalled_record, complete_record = proxy.records()

    timeline = stalled_record.timeline
    assert timeline.proxy_lag_max_ms >= STALL_S * 1000 - 50  # a check falls due every 20 ms
    last_frame_ms = stalled_record.frames[-1][0]
    assert last_frame_ms < timeline.proxy_lag_at_ms <= timeline.downstream_end
    outcome = stalled_record.outcome
    assert (outcome.boundary, outcome.confidence) == ("watchdog", "medium")
    assert outcome.evidence == ["watchdog_idle", "proxy_lag"]
    lag = f"{timeline.proxy_lag_max_ms:.0f} ms"
    assert f"streamtap itself stalled for {lag} during that silence" in outcome.summary

    shown = subprocess.run([sys.executable, "-m", "streamtap", "show", stalled_record.trace_id,
                            "--trace-dir", str(tmp_path)], capture_output=True, text=True,
                           timeout=60, check=True).stdout
    warning = f"warning: streamtap itself was {lag} late at "
    assert warning in shown and "confidence: medium" in shown
    html = render_trace(build_view(record_from_dict(stalled_record.as_dict())))  # the live page's and the report's
    assert f'<p class="lag-warning">{warning}' in html

    # Every record carries the field, measured or not (None: no check fell due while it was open).
    assert "proxy_lag_max_ms" in complete_record.timeline
    assert complete_record.outcome.boundary == "none"


def test_a_lag_below_the_threshold_is_not_a_warning():
    assert lag_warning(None, None) is None
    assert lag_warning(PROXY_LAG_WARN_MS - 0.1, 10.0) is None
    assert lag_warning(25.0, 1234.0) == ("streamtap itself was 25 ms late at 1234 ms: gaps "
                                         "shorter than that are not the provider's")


async def test_each_exchange_keeps_the_worst_lag_seen_while_it_was_open():
    lag = LoopLag()
    started = time.perf_counter()
    lag.open("before", started)
    await asyncio.sleep(0.05)
    time.sleep(0.2)  # the loop is blocked: the pending check runs 0.2 s late
    await asyncio.sleep(0.05)
    lag.open("after", time.perf_counter())
    await asyncio.sleep(0.1)
    worst, at = lag.close("before")
    assert worst >= 150 and 200 <= at <= 800  # 50 ms, then the 200 ms block, on a busy machine
    worst_after, _ = lag.close("after")
    assert worst_after < worst
    assert lag._handle is None  # nothing open: no timer wakes the idle loop
    lag.open("short", time.perf_counter())
    assert lag.close("short") == (None, None)  # ended before any check fell due
