"""Request counters and timing histograms in the Prometheus text format, one registry per proxy.

Updated once per finished record, on the store's thread (never per frame on the event loop), from
diagnostics.views.measures; read by `GET /_streamtap/metrics` and the opt-in metrics-only
listener. The registry is private: `streamtap.Proxy` may run several proxies in one process, and
the global default registry would mix them.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from streamtap.diagnostics.views.measures import (REQUEST_LABELS, TIMING_LABELS, LabelCap,
                                                  measures)

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Seconds. Headers and first events of LLM APIs take from tens of milliseconds to a minute; whole
# streams up to many minutes; frame gaps from a millisecond to a stall.
LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
GAP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# The per-request timings, for this module and the OTLP one (proxy/export/otlp_metrics.py):
# (name, Measures field, buckets, description). Prometheus calls one `streamtap_<name>_seconds`,
# OTLP `streamtap.<name>` with unit s (which a collector turns into the same Prometheus name).
TIMINGS = (
    ("time_to_headers", "time_to_headers_s", LATENCY_BUCKETS,
     "From the request to the response headers"),
    ("time_to_first_event", "time_to_first_event_s", LATENCY_BUCKETS,
     "From the request to the first stream event"),
    ("duration", "duration_s", DURATION_BUCKETS, "From the request to the end of the exchange"),
    ("longest_silence", "longest_silence_s", GAP_BUCKETS,
     "The longest time without a byte, per request"),
)
FRAME_GAP = ("inter_frame_gap", GAP_BUCKETS, "Time between consecutive frames of a stream")


class BatchHistogram(Collector):
    """A histogram filled a record at a time: one bisect per value and one lock per record.
    `Histogram.observe` takes a lock and walks the buckets per value, which cost 29 ms for the
    gaps of one 10,000-frame record; this costs about 2 ms. Exposed exactly like a Histogram."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...],
                 buckets: tuple[float, ...]):
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.bounds = [float(bound) for bound in buckets]
        self._lock = threading.Lock()
        self._series: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}

    def observe_many(self, labels: dict[str, str], values: Iterable[float]) -> None:
        bounds = self.bounds
        counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        total = 0.0
        for value in values:
            counts[bisect_left(bounds, value)] += 1  # the first bound >= value (`le`)
            total += value
        key = tuple(labels[name] for name in self.labelnames)
        with self._lock:
            kept, kept_sum = self._series.setdefault(key, ([0] * len(counts), [0.0]))
            for index, count in enumerate(counts):
                kept[index] += count
            kept_sum[0] += total

    def describe(self) -> list[HistogramMetricFamily]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[HistogramMetricFamily]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        with self._lock:
            series = [(key, list(counts), sums[0]) for key, (counts, sums) in
                      self._series.items()]
        les = [*(str(bound) for bound in self.bounds), "+Inf"]
        for key, counts, total in series:
            cumulative, buckets = 0, []
            for le, count in zip(les, counts):
                cumulative += count
                buckets.append((le, cumulative))
            family.add_metric(list(key), buckets, total)
        return [family]


class PrometheusMetrics:
    def __init__(self, label_values: int):
        self.registry = CollectorRegistry(auto_describe=True)
        self.cap = LabelCap(label_values)

        self.requests = Counter(
            "streamtap_requests", "Finished requests by route, provider, model and how they "
            "ended (boundary none = completed)", REQUEST_LABELS, registry=self.registry)
        self.timings = [(Histogram(f"streamtap_{name}_seconds", doc, TIMING_LABELS,
                                   buckets=buckets, registry=self.registry), field)
                        for name, field, buckets, doc in TIMINGS]
        self.frame_gap = BatchHistogram(f"streamtap_{FRAME_GAP[0]}_seconds", FRAME_GAP[2],
                                        TIMING_LABELS, FRAME_GAP[1])
        self.registry.register(self.frame_gap)

    def observe(self, record: dict) -> None:
        """Count one finished record. Called on the store's thread."""
        m = measures(record, self.cap)
        self.requests.labels(**m.labels).inc()
        labels = m.timing_labels
        for histogram, field in self.timings:
            value = getattr(m, field)
            if value is not None:
                histogram.labels(**labels).observe(value)
        if m.gaps_s:
            self.frame_gap.observe_many(labels, m.gaps_s)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
