"""The metrics of `GET /_streamtap/metrics`, and the GenAI conventions' client metrics, over OTLP.

On with `[export.otlp] metrics = true` (and the `otel` extra). The same Measures feed both, so a
collector sees what a Prometheus scrape sees: `streamtap.requests` becomes
`streamtap_requests_total` there, `streamtap.duration` (unit s) `streamtap_duration_seconds`.
The GenAI metrics go by the vocabulary in force (genai_conventions): v1.41.0's
`gen_ai.client.operation.*` by default, `gen_ai.client.inference.*` under the opt-in. The SDK
aggregates in memory and sends from its own thread every `metrics_interval_ms`; `observe` is
called on the store's thread.
"""

from __future__ import annotations

from streamtap.diagnostics.views import genai_conventions as sc
from streamtap.diagnostics.views.measures import LabelCap, Measures, measures
from streamtap.proxy.config import OtlpExport
from streamtap.proxy.export.prometheus import FRAME_GAP, TIMINGS

# The buckets the GenAI conventions recommend (gen-ai-metrics.md): durations, and chunk intervals.
GEN_AI_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24,
                           20.48, 40.96, 81.92)
GEN_AI_CHUNK_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
INTER_FRAME_GAP = f"streamtap.{FRAME_GAP[0]}"


class OtlpMetrics:
    def __init__(self, settings: OtlpExport, resource, label_values: int,
                 metric_exporter=None):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

        self.vocabulary = sc.VOCABULARIES[settings.semconv]
        self.cap = LabelCap(label_values)
        self.timeout_ms = settings.timeout_ms
        exporter = metric_exporter or OTLPMetricExporter(
            endpoint=settings.metrics_url, headers=dict(settings.headers),
            timeout=settings.timeout_ms / 1000)
        reader = PeriodicExportingMetricReader(exporter,
                                               export_interval_millis=settings.metrics_interval_ms)
        v = self.vocabulary
        buckets = {f"streamtap.{name}": bounds for name, _, bounds, _ in TIMINGS}
        buckets |= {INTER_FRAME_GAP: FRAME_GAP[1], v.metric_duration: GEN_AI_DURATION_BUCKETS,
                    v.metric_time_to_first_chunk: GEN_AI_DURATION_BUCKETS,
                    v.metric_time_per_output_chunk: GEN_AI_CHUNK_BUCKETS}
        views = [View(instrument_name=name,
                      aggregation=ExplicitBucketHistogramAggregation(list(bounds)))
                 for name, bounds in buckets.items()]
        self.provider = MeterProvider(metric_readers=[reader], resource=resource, views=views,
                                      shutdown_on_exit=False)
        meter = self.provider.get_meter("streamtap", schema_url=sc.SCHEMA_URL)
        self.requests = meter.create_counter("streamtap.requests", "{request}",
                                             "Finished requests by how they ended")
        self.histograms = [(meter.create_histogram(f"streamtap.{name}", "s", doc), field)
                           for name, field, _, doc in TIMINGS]
        self.gap = meter.create_histogram(INTER_FRAME_GAP, "s", FRAME_GAP[2])
        self.duration = meter.create_histogram(v.metric_duration, "s", "GenAI operation duration")
        self.first_chunk = meter.create_histogram(v.metric_time_to_first_chunk, "s",
                                                  "Time to receive the first chunk")
        self.per_chunk = meter.create_histogram(v.metric_time_per_output_chunk, "s",
                                                "Time per output chunk after the first")

    def observe(self, record: dict) -> None:
        m = measures(record, self.cap)
        self.requests.add(1, m.labels)
        timing = m.timing_labels
        for histogram, field in self.histograms:
            value = getattr(m, field)
            if value is not None:
                histogram.record(value, timing)
        for gap in m.gaps_s:
            self.gap.record(gap, timing)
        self._gen_ai(m)

    def _gen_ai(self, m: Measures) -> None:
        """The conventions' client metrics, with their attributes (error.type only on failure)."""
        attributes = {sc.GEN_AI_OPERATION_NAME: m.operation,
                      sc.GEN_AI_PROVIDER_NAME: m.provider_name,
                      sc.GEN_AI_REQUEST_MODEL: m.labels["model"]}
        if m.error_type is not None:
            attributes[sc.ERROR_TYPE] = m.error_type
        if m.duration_s is not None:
            self.duration.record(m.duration_s, attributes)
        if m.time_to_first_event_s is not None:
            self.first_chunk.record(m.time_to_first_event_s, attributes)
        for gap in m.gaps_s:
            self.per_chunk.record(gap, attributes)

    def close(self) -> None:
        """Send what was aggregated since the last export, then stop."""
        try:
            self.provider.shutdown(timeout_millis=self.timeout_ms)
        except Exception:  # a dead backend must not hold up or break the proxy's exit
            pass
