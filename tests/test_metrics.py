"""Metrics a Prometheus can scrape: `GET /_streamtap/metrics` counts every finished request by how
it ended, with timing histograms; label values are bounded; the opt-in metrics-only listener
serves the metrics and nothing else."""

from __future__ import annotations

import re
import uuid

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamtap.diagnostics.record.schema import RecordVersionError, record_from_dict
from streamtap.diagnostics.record.schema import longest_silence_ms
from streamtap.diagnostics.views.measures import (MAX_LABEL_CHARS, OTHER, LabelCap, frame_gaps,
                                                  measures)
from streamtap.proxy.config import ConfigError, Config, from_mapping
from streamtap.proxy.export.prometheus import PrometheusMetrics
from tests import proxyproc
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream
from tests.test_guard import non_loopback_address
from tests.unit.test_spans import complete, reset_mid_tool_call


def samples(text: str, name: str) -> list:
    """Every sample named `name` in a Prometheus text exposition, parsed by the client's parser."""
    return [sample for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == name]


def requests_by(text: str, model: str) -> dict[tuple[str, str, str], float]:
    """streamtap_requests_total of one model: (boundary, phase, outcome) -> count."""
    return {(s.labels["boundary"], s.labels["phase"], s.labels["outcome"]): s.value
            for s in samples(text, "streamtap_requests_total") if s.labels["model"] == model}


def chat(proxy, prefix: str, model: str, fault: str | None = None, route: str = "fake") -> None:
    """One streamed chat completion through the proxy with the official SDK, drained."""
    headers = {"x-streamtap-session": new_session()}
    if fault:
        headers["x-streamtap-fault"] = fault
    client = openai.OpenAI(base_url=proxy.url(route) + prefix + "/v1", api_key="sk-test",
                           default_headers=headers, max_retries=0, timeout=10)
    try:
        list(client.chat.completions.create(model=model, messages=[], stream=True))
    except openai.APIError:
        pass  # a reset is what the test sends


def scrape_until(url: str, model: str, total: int, timeout: float = 10.0) -> str:
    """The exposition once `total` requests of `model` were counted (records finish on the store's
    thread, after the client saw the end)."""
    deadline = proxyproc.time.monotonic() + timeout
    while True:
        text = httpx.get(url, timeout=5).text
        if sum(requests_by(text, model).values()) >= total or \
                proxyproc.time.monotonic() > deadline:
            return text
        proxyproc.time.sleep(0.05)


def test_the_endpoint_counts_each_ending_with_real_clients(fake, proxy):
    model = f"m-{uuid.uuid4().hex[:8]}"
    clean = fake.add(Scenario(chat_text_stream(4)))
    reset = fake.add(Scenario(chat_text_stream(4, done=False)[:3], ending="reset"))
    no_done = fake.add(Scenario(chat_text_stream(4, done=False)))
    for prefix, fault in ((clean, None), (clean, None), (reset, None), (no_done, None),
                          (clean, "close; at=first_progress")):
        chat(proxy, prefix, model, fault)
    response = httpx.get(proxy.url("_streamtap/metrics"), timeout=5)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    text = scrape_until(proxy.url("_streamtap/metrics"), model, 5)
    assert requests_by(text, model) == {
        ("none", "complete", "ok"): 2,
        ("transport", "text", "failed"): 1,
        ("provider_close", "after_finish", "failed"): 1,
        ("injected", "text", "failed"): 1,
    }
    counts = {s.name: s.value for s in samples(text, "streamtap_duration_seconds_count")
              + samples(text, "streamtap_time_to_first_event_seconds_count")
              if s.labels["model"] == model}
    assert counts == {"streamtap_duration_seconds_count": 5,
                      "streamtap_time_to_first_event_seconds_count": 5}
    gaps = [s for s in samples(text, "streamtap_inter_frame_gap_seconds_count")
            if s.labels["model"] == model]
    assert gaps and gaps[0].value >= 4 * 2  # at least a few gaps from each clean stream


def test_label_values_are_capped_so_a_chatty_client_cannot_grow_memory():
    metrics = PrometheusMetrics(label_values=3)
    record = complete()
    for index in range(500):
        metrics.observe(record_from_dict({**record, "request": {**record["request"], "model": f"model-{index}"}}))
    models = {s.labels["model"] for s in samples(metrics.exposition().decode(),
                                                 "streamtap_requests_total")}
    assert models == {"model-0", "model-1", "model-2", OTHER}
    total = sum(s.value for s in samples(metrics.exposition().decode(),
                                         "streamtap_requests_total"))
    assert total == 500  # nothing is lost, the rest is counted under `other`
    long_name = {**record, "request": {**record["request"], "model": "x" * 10_000}}
    wide = PrometheusMetrics(label_values=5)
    wide.observe(record_from_dict(long_name))
    assert {len(s.labels["model"]) for s in samples(wide.exposition().decode(),
                                                    "streamtap_requests_total")} == \
        {MAX_LABEL_CHARS}


def test_two_proxies_in_one_process_keep_their_own_counts():
    first, second = PrometheusMetrics(10), PrometheusMetrics(10)
    first.observe(record_from_dict(complete()))
    first.observe(record_from_dict(reset_mid_tool_call()))
    assert sum(s.value for s in samples(first.exposition().decode(),
                                        "streamtap_requests_total")) == 2
    assert samples(second.exposition().decode(), "streamtap_requests_total") == []


def test_frame_gaps_leave_out_the_hole_between_head_and_tail():
    record = {"schema_version": 2, "trace_id": "t", "session_id": "s", "started_at": "x",
              "frames": [[0.0, 1, "e", None], [10.0, 1, "e", None], [5000.0, 1, "e", None],
                         [5020.0, 1, "e", None]], "frames_dropped": 300}
    assert frame_gaps(record_from_dict(record)) == (0.01, 0.02)  # not the 4.99 s across the dropped frames
    assert frame_gaps(record_from_dict({**record, "frames_dropped": 0})) == (0.01, 4.99, 0.02)
    with pytest.raises(RecordVersionError, match="frames"):  # a bad frame is refused on reading
        record_from_dict({**record, "frames": [["bad"], [3.0, 1, "e", None]]})


def test_the_longest_silence_is_the_one_show_and_stats_name():
    # A stall after the last frame, until the client gave up: the silence that matters is not
    # between two frames, and the histogram must say the same as `show` and `stats`.
    record = {"schema_version": 2, "trace_id": "t", "session_id": "s", "started_at": "x",
              "dialect": "openai-chat", "request": {}, "route": "r",
              "timeline": {"max_gap_ms": 20.0, "duration_ms": 2100.0, "downstream_end": 2100.0},
              "frames": [[0.0, 1, "e", None], [20.0, 1, "e", None], [40.0, 1, "e", None]]}
    silence = measures(record_from_dict(record), LabelCap(10)).longest_silence_s
    typed = record_from_dict(record)
    assert silence == longest_silence_ms(typed.timeline, typed.frames) / 1000
    assert silence > 2.0


def test_metrics_listen_is_checked_and_defaults_to_off():
    assert Config().metrics_listen == "" and Config().metrics_label_values == 100
    assert from_mapping({"metrics_listen": "[::1]:9464"}).metrics_listen == "[::1]:9464"
    for bad in ("9464", "host:", "host:99999", ":9464"):
        with pytest.raises(ConfigError) as error:
            from_mapping({"metrics_listen": bad})
        assert error.value.key == "metrics_listen" and "HOST:PORT" in str(error.value)
    with pytest.raises(ConfigError) as error:
        from_mapping({"metrics_label_values": 0})
    assert error.value.key == "metrics_label_values"


def test_the_metrics_only_listener_serves_a_remote_scraper_and_nothing_else(fake, tmp_path,
                                                                             monkeypatch):
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")
    exposed = ProxyProcess(tmp_path, {"fake": fake.url}, "--metrics-listen", "0.0.0.0:0",
                           ready="metrics:")
    try:
        match = re.search(r"metrics: http://0\.0\.0\.0:(\d+)/metrics serves the metrics and "
                          r"nothing else; anyone who can reach it", exposed.banner)
        assert match, exposed.banner
        listener = f"http://{address}:{match.group(1)}"
        prefix = fake.add(Scenario(chat_text_stream(3)))
        model = f"m-{uuid.uuid4().hex[:8]}"
        chat(exposed, prefix, model)
        text = scrape_until(listener + "/metrics", model, 1)
        assert requests_by(text, model) == {("none", "complete", "ok"): 1}
        for path in ("/_streamtap/metrics", "/_streamtap/health", "/_streamtap/faults",
                     f"/fake{prefix}/v1/chat/completions"):
            assert httpx.get(listener + path, timeout=5).status_code == 404, path
        assert httpx.post(listener + "/metrics", timeout=5).status_code == 405
        # The proxy itself still listens on loopback only: a remote peer cannot even connect.
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://{address}:{exposed.port}/_streamtap/metrics", timeout=5)
    finally:
        exposed.stop()


def test_the_batched_gap_histogram_writes_what_a_histogram_writes():
    from prometheus_client import CollectorRegistry, Histogram

    from streamtap.proxy.export.prometheus import GAP_BUCKETS, BatchHistogram

    values = [0.0, 0.001, 0.0015, 0.01, 0.3, 2.5, 2.6, 59.0, 61.0, 1e9]
    plain_registry, batch_registry = CollectorRegistry(), CollectorRegistry()
    plain = Histogram("gap_seconds", "doc", ("route",), buckets=GAP_BUCKETS,
                      registry=plain_registry)
    batch = BatchHistogram("gap_seconds", "doc", ("route",), GAP_BUCKETS)
    batch_registry.register(batch)
    for route, chunk in (("a", values[:4]), ("a", values[4:]), ("b", values[2:5])):
        for value in chunk:
            plain.labels(route=route).observe(value)
        batch.observe_many({"route": route}, chunk)

    def kept(registry) -> list:
        from prometheus_client.exposition import generate_latest

        return sorted((s.name, tuple(sorted(s.labels.items())), s.value) for s in samples(
            generate_latest(registry).decode(), "gap_seconds_bucket")
            + samples(generate_latest(registry).decode(), "gap_seconds_count")
            + samples(generate_latest(registry).decode(), "gap_seconds_sum"))

    assert kept(batch_registry) == kept(plain_registry)
    assert len(kept(batch_registry)) == 2 * (len(GAP_BUCKETS) + 1 + 2)


def test_a_trace_dir_that_cannot_be_written_still_counts_every_request(fake, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the trace dir should be")
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, trace_dir=blocker)
    try:
        model = f"m-{uuid.uuid4().hex[:8]}"
        prefix = fake.add(Scenario(chat_text_stream(3)))
        chat(proxy, prefix, model)
        chat(proxy, prefix, model)
        text = scrape_until(proxy.url("_streamtap/metrics"), model, 2)
        assert requests_by(text, model) == {("none", "complete", "ok"): 2}
        health = httpx.get(proxy.url("_streamtap/health"), timeout=5).json()
        assert health["status"] == "degraded" and health["records_written"] == 0
    finally:
        proxy.stop()
