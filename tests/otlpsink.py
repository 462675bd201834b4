"""A minimal OTLP/HTTP receiver for the export tests: a real HTTP server on loopback that decodes
what the OpenTelemetry exporters send (protobuf traces and metrics) and keeps it, and can be stopped
and started again on the same port to play a backend that goes down and comes back."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest, ExportMetricsServiceResponse)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

# path -> (request message, reply message, the list of the sink's that keeps what arrived)
SIGNALS = {"/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse, "requests"),
           "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse,
                           "metric_requests")}


class OtlpSink:
    def __init__(self, port: int = 0):
        self.requests: list[dict] = []  # each export request as a dict (protobuf JSON mapping)
        self.metric_requests: list[dict] = []  # the same for metrics
        self.headers: list[dict[str, str]] = []
        self.raw: list[bytes] = []
        self._server: ThreadingHTTPServer | None = None
        self.port = port
        self.received = threading.Condition()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "OtlpSink":
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path not in SIGNALS:
                    self.send_response(404)
                    self.end_headers()
                    return
                request_class, reply_class, kept = SIGNALS[self.path]
                request = request_class()
                request.ParseFromString(body)
                with sink.received:
                    if kept == "requests":
                        sink.raw.append(body)
                        sink.headers.append({k.lower(): v for k, v in self.headers.items()})
                    getattr(sink, kept).append(MessageToDict(request))
                    sink.received.notify_all()
                reply = reply_class().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="otlp-sink", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def spans(self) -> list[dict]:
        """Every span received so far, each with its resource attributes under `resource`."""
        out = []
        with self.received:
            for request in self.requests:
                for resource_spans in request.get("resourceSpans", []):
                    resource = attributes(resource_spans.get("resource", {}))
                    for scope_spans in resource_spans.get("scopeSpans", []):
                        for span in scope_spans.get("spans", []):
                            out.append({**span, "resource": resource,
                                        "attrs": attributes(span)})
        return out

    def wait_spans(self, count: int, timeout: float = 10.0) -> list[dict]:
        with self.received:
            self.received.wait_for(lambda: len(self._count()) >= count, timeout)
        spans = self.spans()
        assert len(spans) >= count, f"expected {count} spans, got {len(spans)}"
        return spans

    def metrics(self) -> dict[str, list[dict]]:
        """Every metric received so far: name -> its data points (each with `attrs`), and the
        unit under the name `unit:NAME`."""
        out: dict[str, list] = {}
        with self.received:
            for request in self.metric_requests:
                for resource_metrics in request.get("resourceMetrics", []):
                    for scope_metrics in resource_metrics.get("scopeMetrics", []):
                        for metric in scope_metrics.get("metrics", []):
                            data = metric.get("sum") or metric.get("histogram") or {}
                            out.setdefault(metric["name"], []).extend(
                                {**point, "attrs": attributes(point)}
                                for point in data.get("dataPoints", []))
                            out[f"unit:{metric['name']}"] = metric.get("unit")
        return out

    def _count(self) -> list:
        return [span for request in self.requests for rs in request.get("resourceSpans", [])
                for ss in rs.get("scopeSpans", []) for span in ss.get("spans", [])]


def attributes(holder: dict) -> dict:
    """OTLP key/value list -> a plain dict (ints come back as strings in the JSON mapping)."""
    out = {}
    for item in holder.get("attributes", []):
        value = item.get("value", {})
        if "arrayValue" in value:
            out[item["key"]] = [next(iter(v.values())) for v in value["arrayValue"].get("values", [])]
        elif "intValue" in value:
            out[item["key"]] = int(value["intValue"])
        else:
            out[item["key"]] = next(iter(value.values()), None)
    return out
