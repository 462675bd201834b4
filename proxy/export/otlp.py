"""Every finished trace record as an OpenTelemetry span, sent over OTLP/HTTP by the SDK's exporter.

The proxy hands records over with `offer()`, which never blocks and never raises: a bounded queue,
drained by one background thread that maps records to spans (diagnostics.views.spans) and exports
them in batches. A backend that is down or slow costs that thread its timeout per batch, never the
event loop or the trace store; what does not fit the queue, or fails to export, is counted as
dropped (shown in /_streamtap/health), and the next batch tries again, so export resumes by itself
when the backend is back.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping

from streamtap import __version__
from streamtap.diagnostics.views import genai_conventions as sc
from streamtap.diagnostics.views.spans import SpanData, SpanError, record_to_span
from streamtap.proxy.config import OtlpExport
from streamtap.diagnostics.errors import UserError

INSTALL_HINT = ("OTLP export needs the OpenTelemetry SDK: pip install 'streamtap[otel]' "
                "(or remove the OTLP endpoint from flags, config and OTEL_* variables)")
_STOP = object()


class ExportUnavailable(UserError, RuntimeError):
    """The `otel` extra is not installed."""


def _sdk():
    """Import the SDK only when export is on: it is an optional extra."""
    try:
        from opentelemetry import trace as trace_api
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.sdk.trace.export import SpanExportResult
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace.status import Status, StatusCode
    except ImportError as exc:
        raise ExportUnavailable(f"{INSTALL_HINT} ({exc})") from None
    return (trace_api, OTLPSpanExporter, Resource, Event, ReadableSpan, SpanExportResult,
            InstrumentationScope, Status, StatusCode)


class OtlpExporter:
    """Batches records into spans on a background thread; see the module docstring."""

    def __init__(self, settings: OtlpExport, log, routes: Mapping[str, str] | None = None,
                 span_exporter=None, label_values: int = 100, metric_exporter=None):
        (self._trace, exporter_class, resource_class, self._Event, self._ReadableSpan,
         result, scope_class, self._Status, self._StatusCode) = _sdk()
        self._success = result.SUCCESS
        self.settings = settings
        self.log = log
        self.routes = dict(routes or {})  # route name -> upstream URL, for server.address
        # The exporter logs each failure through stdlib logging; we say it once per outage.
        logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
        self._exporter = span_exporter or exporter_class(
            endpoint=settings.url, headers=dict(settings.headers),
            timeout=settings.timeout_ms / 1000)
        attributes = {sc.SERVICE_NAME: sc.SERVICE_NAME_VALUE, sc.SERVICE_VERSION: __version__}
        if settings.project:
            attributes[settings.project_attribute] = settings.project
        self._resource = resource_class.create(attributes, schema_url=sc.SCHEMA_URL)
        self._scope = scope_class("streamtap", __version__, sc.SCHEMA_URL)
        self.vocabulary = sc.VOCABULARIES[settings.semconv]
        self.metrics = None  # streamtap.proxy.export.otlp_metrics.OtlpMetrics when metrics = true
        if settings.metrics_url:
            from streamtap.proxy.export.otlp_metrics import OtlpMetrics

            self.metrics = OtlpMetrics(settings, self._resource, label_values, metric_exporter)
        self._queue: queue.Queue = queue.Queue(settings.queue_limit)
        self._lock = threading.Condition()  # guards the counters; flush() waits on it
        self._pending = 0  # offered, not yet exported or dropped
        self.exported = 0
        self.dropped = 0  # queue full, or the backend refused or did not answer
        self.unmappable = 0  # records that could not become a span (a bug or a foreign file)
        self.failed_batches = 0
        self.failing = False
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._drain, name="streamtap-otlp", daemon=True)
        self._thread.start()

    # -- the proxy's side ---------------------------------------------------------------------
    def offer(self, record: dict) -> None:
        """Queue a finished record for export; never blocks, never raises."""
        with self._lock:
            try:
                self._queue.put_nowait(record)
                self._pending += 1
            except queue.Full:
                self.dropped += 1
        if self.metrics is not None:
            try:  # aggregated in memory here; the SDK's own thread sends them
                self.metrics.observe(record)
            except Exception as exc:
                self.log.error("otlp_metrics_failed", trace_id=record.trace_id,
                               error=f"{type(exc).__name__}: {exc}")

    def offer_waiting(self, record: dict, timeout: float) -> None:
        """Queue a record, waiting up to `timeout` for room (a backfill, not the proxy)."""
        with self._lock:
            self._pending += 1
        try:
            self._queue.put(record, timeout=timeout)
        except queue.Full:
            with self._lock:
                self._pending -= 1
                self.dropped += 1
                self._lock.notify_all()

    def health(self) -> dict:
        """Counters for /_streamtap/health (no endpoint, no headers: they may hold a key)."""
        return {"state": "failing" if self.failing else "ok", "queued": self._queue.qsize(),
                "exported": self.exported, "dropped": self.dropped,
                "unmappable": self.unmappable, "failed_batches": self.failed_batches,
                "last_error": self.last_error}

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until everything offered so far was exported or dropped."""
        with self._lock:
            return self._lock.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Export what is queued within `timeout` in all (a dead backend must not hold up the
        proxy's exit: what is left is dropped with the process), then stop the exporter."""
        deadline = time.monotonic() + timeout
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            pass
        self._thread.join(max(deadline - time.monotonic(), 0.0))
        if self.metrics is not None:
            self.metrics.close()
        try:
            self._exporter.shutdown()
        except Exception:
            pass

    # -- the background thread ----------------------------------------------------------------
    def _drain(self) -> None:
        stop = False
        while not stop:
            batch = [self._queue.get()]
            while len(batch) < self.settings.batch_size:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if _STOP in batch:
                stop = True
                batch = [item for item in batch if item is not _STOP]
            if batch:
                try:
                    self._export(batch)
                finally:
                    with self._lock:
                        self._pending -= len(batch)
                        self._lock.notify_all()

    def _export(self, records: list[dict]) -> None:
        spans = []
        for record in records:
            try:
                spans.append(self.to_sdk(record_to_span(
                    record, upstream_url=self.routes.get(record.route or ""),
                    frame_events=self.settings.frame_events, vocabulary=self.vocabulary)))
            except (SpanError, KeyError, TypeError, ValueError) as exc:
                with self._lock:
                    self.unmappable += 1
                self.log.error("otlp_unmappable_record", trace_id=record.trace_id,
                               error=str(exc))
        if not spans:
            return
        try:
            ok = self._exporter.export(spans) == self._success
            error = None if ok else "the backend refused the batch or did not answer in time"
        except Exception as exc:  # an exporter bug must not kill the thread
            ok, error = False, f"{type(exc).__name__}: {exc}"
        with self._lock:
            if ok:
                self.exported += len(spans)
            else:
                self.dropped += len(spans)
                self.failed_batches += 1
                self.last_error = error
        if ok and self.failing:
            self.failing = False
            self.log.info("otlp_export_resumed", endpoint_host=self._host())
        elif not ok and not self.failing:
            self.failing = True
            self.log.warning("otlp_export_failing", endpoint_host=self._host(), error=error,
                             hint="spans are dropped and counted in /_streamtap/health until "
                                  "the backend answers; traffic and records are unaffected")

    def _host(self) -> str:
        from urllib.parse import urlsplit

        parts = urlsplit(self.settings.url)
        return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)

    def to_sdk(self, span: SpanData):
        """The SDK's ReadableSpan for one SpanData (what the OTLP exporter encodes)."""
        trace = self._trace
        context = trace.SpanContext(span.trace_id, span.span_id, is_remote=False,
                                    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
        status = (self._Status(self._StatusCode.ERROR, span.status_description)
                  if span.status == "ERROR" else self._Status(self._StatusCode.UNSET))
        events = [self._Event(event.name, event.attributes, event.time_ns)
                  for event in span.events]
        return self._ReadableSpan(
            name=span.name, context=context, resource=self._resource,
            attributes=span.attributes, events=events, kind=trace.SpanKind.CLIENT,
            status=status, start_time=span.start_ns, end_time=span.end_ns,
            instrumentation_scope=self._scope)


def make_exporter(settings: OtlpExport, log, routes: Mapping[str, str],
                  factory: Callable[..., OtlpExporter] = OtlpExporter,
                  label_values: int = 100) -> OtlpExporter | None:
    """An exporter when an endpoint is configured, else None. Raises ExportUnavailable."""
    if not settings.url:
        return None
    return factory(settings, log, routes, label_values=label_values)
