"""The OpenTelemetry GenAI conventions as they move: v1.41.0's names by default, the
semantic-conventions-genai repository's under OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental,
for span attributes and metrics alike; the same metrics as GET /_streamtap/metrics over OTLP; and
`error.type` a documented low-cardinality value, never free text."""

from __future__ import annotations

import msgspec
import openai
import pytest

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.diagnostics.trace_record import Outcome
from streamtap.diagnostics.views import genai_conventions as sc
from streamtap.diagnostics.views.spans import error_type, record_to_span
from streamtap.proxy.config import ConfigError, from_mapping, otlp_from_env
from streamtap.proxy.export.otlp import OtlpExporter
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream
from tests.test_otlp_export import LOG, settings, sink  # noqa: F401 - the sink fixture
from tests.unit.test_otlp_config import serve_config
from tests.unit.test_spans import complete, http_error, reset_mid_tool_call, wrapped_error

OPT_IN = "OTEL_SEMCONV_STABILITY_OPT_IN"
OLD_METRICS = ("gen_ai.client.operation.duration", "gen_ai.client.operation.time_to_first_chunk",
               "gen_ai.client.operation.time_per_output_chunk")
NEW_METRICS = ("gen_ai.client.inference.duration", "gen_ai.client.inference.time_to_first_chunk",
               "gen_ai.client.inference.time_per_output_chunk")


def with_cache_write(record: dict) -> dict:
    stream = record["stream"]
    return {**record, "stream": {**stream, "usage": {**stream["usage"], "cache_write": 7}}}


@pytest.mark.parametrize("value, wanted", [
    (None, sc.V1_41), ("", sc.V1_41), ("http", sc.V1_41),
    ("gen_ai_latest_experimental", sc.LATEST),
    ("http/dup, gen_ai_latest_experimental ,database", sc.LATEST),
    ("GEN_AI_LATEST_EXPERIMENTAL", sc.LATEST),
    ("gen_ai_latest_experimental_not", sc.V1_41),
])
def test_the_opt_in_is_read_as_a_comma_separated_list(value, wanted):
    assert sc.vocabulary(value) is wanted
    environ = {OPT_IN: value} if value is not None else {}
    assert otlp_from_env(environ).semconv == wanted.name


def test_span_attributes_take_the_renamed_names_under_the_opt_in_and_keep_the_span_name():
    record = with_cache_write(complete())
    old = record_to_span(record_from_dict(record))
    new = record_to_span(record_from_dict(record), vocabulary=sc.LATEST)
    assert old.attributes["gen_ai.usage.cache_creation.input_tokens"] == 7
    assert "gen_ai.usage.cache_write.input_tokens" not in old.attributes
    assert new.attributes["gen_ai.usage.cache_write.input_tokens"] == 7
    assert "gen_ai.usage.cache_creation.input_tokens" not in new.attributes
    assert old.name == new.name == "chat m"
    # Nothing else differs between the two vocabularies' spans.
    drop = {"gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_write.input_tokens"}
    assert {k: v for k, v in old.attributes.items() if k not in drop} == \
        {k: v for k, v in new.attributes.items() if k not in drop}


def test_both_vocabularies_are_pinned_with_their_source():
    assert (sc.V1_41.metric_duration, sc.V1_41.metric_time_to_first_chunk,
            sc.V1_41.metric_time_per_output_chunk) == OLD_METRICS
    assert (sc.LATEST.metric_duration, sc.LATEST.metric_time_to_first_chunk,
            sc.LATEST.metric_time_per_output_chunk) == NEW_METRICS
    assert "semantic-conventions-genai" in sc.__doc__ and "2026-11-27" in sc.__doc__
    with pytest.raises(ConfigError) as error:
        from_mapping({"export": {"otlp": {"semconv": "v2"}}})
    assert error.value.key == "export.otlp.semconv"


def test_otlp_metrics_need_an_endpoint_and_go_beside_the_spans(monkeypatch, tmp_path):
    with pytest.raises(ConfigError) as error:
        serve_config(monkeypatch, tmp_path, "[export.otlp]\nmetrics = true\n")
    assert error.value.key == "export.otlp.metrics" and "endpoint" in str(error.value)
    flagged = serve_config(monkeypatch, tmp_path, "[export.otlp]\nmetrics = true\n",
                           "--otlp-endpoint", "http://flag:4318")
    assert flagged.metrics_url == "http://flag:4318/v1/metrics"
    with pytest.raises(ConfigError) as error:
        from_mapping({"export": {"otlp": {"metrics": "yes"}}})
    assert "true or false" in str(error.value)
    on = from_mapping({"export": {"otlp": {"metrics": True, "endpoint": "http://h:4318"}}})
    assert on.export.otlp.metrics_url == "http://h:4318/v1/metrics"
    full = from_mapping({"export": {"otlp": {"metrics": True,
                                             "traces_endpoint": "http://h:4318/x/v1/traces"}}})
    assert full.export.otlp.metrics_url == "http://h:4318/x/v1/metrics"


def test_error_type_is_boundary_and_evidence_code_from_documented_lists():
    assert error_type(record_from_dict(reset_mid_tool_call()).outcome) == "transport:upstream_reset"
    assert error_type(record_from_dict(wrapped_error()).outcome) == "provider_error:wrapped_chunk"
    assert error_type(record_from_dict(http_error()).outcome) == "provider_error:http_429"
    assert error_type(record_from_dict(complete()).outcome) is None
    for boundary in sc.ERROR_TYPE_BOUNDARIES:
        assert error_type(Outcome(ok=False, boundary=boundary, phase="text")) == boundary


def test_error_type_never_carries_free_text():
    # A record from a foreign or hand-edited file: its first evidence is a provider's sentence.
    message = "Connection reset by peer while talking to 10.1.2.3 for user alice@example.com"
    outcome = {**reset_mid_tool_call()["outcome"], "evidence": [message, "upstream_reset"]}
    assert error_type(msgspec.convert(outcome, Outcome)) == "transport"
    span = record_to_span(record_from_dict({**reset_mid_tool_call(), "outcome": outcome}))
    assert span.attributes[sc.ERROR_TYPE] == "transport"
    odd = {"ok": False, "boundary": "the upstream said: quota exceeded for key sk-1",
           "phase": "before_response", "evidence": ["http_429"]}
    assert error_type(msgspec.convert(odd, Outcome)) == sc.ERROR_TYPE_OTHER


@pytest.mark.parametrize("semconv, names, absent", [("v1.41.0", OLD_METRICS, NEW_METRICS),
                                                    ("gen_ai_latest_experimental", NEW_METRICS,
                                                     OLD_METRICS)])
@pytest.mark.e2e
def test_metrics_go_over_otlp_in_the_vocabulary_in_force(sink, semconv, names, absent):  # noqa: F811
    exporter = OtlpExporter(settings(sink.endpoint, metrics=True, semconv=semconv), LOG,
                            label_values=10)
    for record in (complete(), complete(), reset_mid_tool_call()):
        exporter.offer(record_from_dict(record))
    assert exporter.flush(10)
    exporter.close()  # sends what was aggregated
    metrics = sink.metrics()
    requests = metrics["streamtap.requests"]
    by_boundary = {point["attrs"]["boundary"]: int(point["asDouble"] if "asDouble" in point
                                                   else point["asInt"]) for point in requests}
    assert by_boundary == {"none": 2, "transport": 1}
    for name in ("streamtap.time_to_headers", "streamtap.duration",
                 "streamtap.longest_silence", "streamtap.inter_frame_gap"):
        assert metrics[f"unit:{name}"] == "s" and metrics[name], name
    duration, first_chunk, per_chunk = (metrics[name] for name in names)
    assert not any(name in metrics for name in absent)
    assert sum(int(point["count"]) for point in duration) == 3
    failed = [point for point in duration if "error.type" in point["attrs"]]
    assert [point["attrs"]["error.type"] for point in failed] == ["transport:upstream_reset"]
    assert failed[0]["attrs"]["gen_ai.operation.name"] == "chat"
    assert sum(int(point["count"]) for point in first_chunk) == 3
    assert sum(int(point["count"]) for point in per_chunk) > 3


def test_serve_under_the_opt_in_sends_the_new_metric_names(fake, sink, tmp_path,  # noqa: F811
                                                             monkeypatch):
    monkeypatch.setenv(OPT_IN, "gen_ai_latest_experimental")
    config = tmp_path / "streamtap.toml"
    config.write_text("[export.otlp]\nmetrics = true\nmetrics_interval_ms = 200\n")
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, "--config", str(config),
                         "--otlp-endpoint", sink.endpoint)
    try:
        session = new_session()
        client = openai.OpenAI(base_url=proxy.url("fake") + fake.add(Scenario(
            chat_text_stream(3))) + "/v1", api_key="sk-test", max_retries=0,
            default_headers={"x-streamtap-session": session})
        list(client.chat.completions.create(model="gpt-test", stream=True, messages=[]))
        span = sink.wait_spans(1)[0]
        assert span["name"] == "chat gpt-test"
    finally:
        proxy.stop()  # the exporter sends its last metrics on the way out
    metrics = sink.metrics()
    assert "gen_ai.client.inference.duration" in metrics
    assert "gen_ai.client.operation.duration" not in metrics
    points = metrics["streamtap.requests"]
    assert [(p["attrs"]["route"], p["attrs"]["model"], p["attrs"]["boundary"]) for p in points
            if p["attrs"]["model"] == "gpt-test"][:1] == [("fake", "gpt-test", "none")]
