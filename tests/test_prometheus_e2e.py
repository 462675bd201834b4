"""A real Prometheus scrapes a running streamtap: traffic with known endings goes through the
proxy, and PromQL answers over Prometheus's HTTP API match what was sent."""

from __future__ import annotations

import shutil

import pytest

from tests.fakeprovider import Scenario
from tests.programs import found_or_skip
from tests.prometheusproc import PrometheusProcess
from tests.readme import code_blocks
from tests.proxyproc import ProxyProcess
from tests.streams import chat_text_stream
from tests.test_metrics import chat, scrape_until


@pytest.fixture
def prometheus_binary() -> str:
    return found_or_skip(shutil.which("prometheus"), "prometheus", "prometheus",
                         "the metrics end-to-end proof and README's PromQL")


def readme_queries() -> list[str]:
    """The PromQL README's "Metrics" section shows, verbatim."""
    return code_blocks("Metrics", "promql")[0].splitlines()


def by(result: list[dict], label: str) -> dict[str, float]:
    return {item["metric"].get(label, ""): float(item["value"][1]) for item in result}


def test_promql_answers_match_the_traffic_sent(fake, tmp_path, prometheus_binary):
    proxy = ProxyProcess(tmp_path, {"gw-a": fake.url, "gw-b": fake.url})
    prometheus = None
    try:
        prometheus = PrometheusProcess(prometheus_binary, tmp_path, f"127.0.0.1:{proxy.port}",
                                       "/_streamtap/metrics")
        clean = fake.add(Scenario(chat_text_stream(3)))
        no_done = fake.add(Scenario(chat_text_stream(3, done=False)))
        reset = fake.add(Scenario(chat_text_stream(3, done=False)[:2], ending="reset"))
        sent = [("gw-a", clean, None)] * 3 + [("gw-a", no_done, None)] * 2 + [
            ("gw-b", clean, None), ("gw-b", reset, None),
            ("gw-b", clean, "reset; at=first_progress")]
        for route, prefix, fault in sent:
            chat(proxy, prefix, "gpt-e2e", fault, route=route)
        scrape_until(proxy.url("_streamtap/metrics"), "gpt-e2e", len(sent))

        total = prometheus.wait_for("sum(streamtap_requests_total)",
                                    lambda r: r and float(r[0]["value"][1]) == len(sent))
        assert total and float(total[0]["value"][1]) == len(sent), (
            total, prometheus.targets(), prometheus.log()[-2000:])
        by_boundary, close_share, failed = readme_queries()
        assert by(prometheus.query(by_boundary), "boundary") == \
            {"none": 4, "provider_close": 2, "transport": 1, "injected": 1}
        # The share of streams each route's provider closed without the terminal event.
        assert by(prometheus.query(close_share), "route") == {"gw-a": 2 / 5}
        assert by(prometheus.query(failed), "route") == {"gw-a": 2, "gw-b": 2}
        assert by(prometheus.query("sum(streamtap_duration_seconds_count)"), "") == \
            {"": len(sent)}
        slow = prometheus.query(
            "histogram_quantile(0.5, sum by (le) (streamtap_time_to_first_event_seconds_bucket))")
        assert slow and 0 < float(slow[0]["value"][1]) < 1
    finally:
        if prometheus is not None:
            prometheus.stop()
        proxy.stop()
