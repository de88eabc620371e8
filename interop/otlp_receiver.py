#!/usr/bin/env python3
"""A small OTLP/HTTP receiver for the interop suite (started by interop/otlp.sh).

    otlp_receiver.py --port PORT --dump FILE

Listens on 127.0.0.1:PORT. POST /v1/traces and /v1/metrics take protobuf bodies
(application/x-protobuf, optionally gzip), decode them with the official
`opentelemetry-proto` package, append one JSON line per span and per metric point to
FILE, and answer an empty Export*ServiceResponse. GET /health answers 200.

A span line: {"signal": "span", "service", "scope", "name", "kind" (SPAN_KIND_*),
"trace_id", "span_id", "parent_span_id" (hex, "" for a root), "attributes", "links":
[{"trace_id", "span_id", "attributes"}], "events": [{"name", "attributes"}], "status":
{"code", "message"}}. Attributes keep their OTLP type: {"key": {"string": "v"}},
{"int": 3}, {"double": 0.5}, {"bool": true}, {"array": [...]}, {"kvlist": {...}},
{"bytes": "hex"}.

A metric line: {"signal": "metric", "service", "scope", "name", "unit", "description",
"type" (histogram, sum, gauge, exponential_histogram), "attributes", and for a
histogram "count", "sum", "bounds", "bucket_counts"; for a sum or gauge "value" (an
int or a double, as sent) and, for a sum, "monotonic"}.
"""

import argparse
import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

MAX_BODY = 16 * 1024 * 1024


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "string_value":
        return {"string": any_value.string_value}
    if kind == "int_value":
        return {"int": any_value.int_value}
    if kind == "double_value":
        return {"double": any_value.double_value}
    if kind == "bool_value":
        return {"bool": any_value.bool_value}
    if kind == "array_value":
        return {"array": [value(v) for v in any_value.array_value.values]}
    if kind == "kvlist_value":
        return {"kvlist": attributes(any_value.kvlist_value.values)}
    if kind == "bytes_value":
        return {"bytes": any_value.bytes_value.hex()}
    return {"empty": None}


def attributes(key_values):
    return {kv.key: value(kv.value) for kv in key_values}


def service(resource):
    for kv in resource.attributes:
        if kv.key == "service.name":
            return kv.value.string_value
    return ""


def spans(request):
    for resource_spans in request.resource_spans:
        name = service(resource_spans.resource)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "signal": "span",
                    "service": name,
                    "scope": scope_spans.scope.name,
                    "name": span.name,
                    "kind": Span.SpanKind.Name(span.kind),
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "start_unix_nano": span.start_time_unix_nano,
                    "end_unix_nano": span.end_time_unix_nano,
                    "attributes": attributes(span.attributes),
                    "links": [
                        {
                            "trace_id": link.trace_id.hex(),
                            "span_id": link.span_id.hex(),
                            "attributes": attributes(link.attributes),
                        }
                        for link in span.links
                    ],
                    "events": [
                        {"name": event.name, "attributes": attributes(event.attributes)}
                        for event in span.events
                    ],
                    "status": {"code": span.status.code, "message": span.status.message},
                }


def number(point):
    if point.WhichOneof("value") == "as_int":
        return point.as_int
    return point.as_double


def metric_points(request):
    for resource_metrics in request.resource_metrics:
        name = service(resource_metrics.resource)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                base = {
                    "signal": "metric",
                    "service": name,
                    "scope": scope_metrics.scope.name,
                    "name": metric.name,
                    "unit": metric.unit,
                    "description": metric.description,
                }
                kind = metric.WhichOneof("data")
                if kind == "histogram":
                    for p in metric.histogram.data_points:
                        yield dict(
                            base,
                            type="histogram",
                            attributes=attributes(p.attributes),
                            count=p.count,
                            sum=p.sum,
                            bounds=list(p.explicit_bounds),
                            bucket_counts=list(p.bucket_counts),
                        )
                elif kind in ("sum", "gauge"):
                    data = getattr(metric, kind)
                    for p in data.data_points:
                        line = dict(
                            base,
                            type=kind,
                            attributes=attributes(p.attributes),
                            value=number(p),
                        )
                        if kind == "sum":
                            line["monotonic"] = data.is_monotonic
                        yield line
                else:
                    yield dict(base, type=kind or "none")


class Receiver(BaseHTTPRequestHandler):
    server_version = "phaseo-otlp-receiver"
    dump = None
    lock = threading.Lock()

    def log_message(self, fmt, *args):
        sys.stderr.write("[otlp] %s %s\n" % (self.address_string(), fmt % args))

    def answer(self, status, body=b"", content_type="application/x-protobuf"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self.answer(200, b"ok\n", "text/plain")
        else:
            self.answer(404, b"not found\n", "text/plain")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.answer(413, b"too large\n", "text/plain")
            return
        body = self.rfile.read(length)
        if self.headers.get("Content-Encoding", "") == "gzip":
            body = gzip.decompress(body)
        try:
            if self.path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                lines = list(spans(request))
                response = ExportTraceServiceResponse()
            elif self.path == "/v1/metrics":
                request = ExportMetricsServiceRequest.FromString(body)
                lines = list(metric_points(request))
                response = ExportMetricsServiceResponse()
            else:
                self.answer(404, b"not found\n", "text/plain")
                return
        except Exception as error:  # a body that is not the message: 400, as OTLP says
            self.answer(400, ("cannot decode: %s\n" % error).encode(), "text/plain")
            return
        with Receiver.lock, open(Receiver.dump, "a", encoding="utf-8") as dump:
            for line in lines:
                dump.write(json.dumps(line, sort_keys=True) + "\n")
        self.answer(200, response.SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dump", required=True)
    args = parser.parse_args()
    Receiver.dump = args.dump
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Receiver)
    sys.stderr.write("[otlp] listening on 127.0.0.1:%d, dump %s\n" % (args.port, args.dump))
    sys.stderr.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
