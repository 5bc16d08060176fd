"""A local OTLP/HTTP metrics endpoint for tests: decodes every ExportMetricsServiceRequest the real
opentelemetry-sdk exporter sends, and reads back the last value of each series."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

Points = dict[tuple[str, tuple[Any, ...]], float]


class MetricsSink:
    """What arrived: decoded requests and their paths."""

    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.paths: list[str] = []
        self.arrived = threading.Condition()

    def points(self) -> Points:
        with self.arrived:
            return last_points(list(self.requests))

    def wait_for(self, predicate: Any, timeout: float = 60) -> Points:
        """The points once ``predicate(points)`` holds (pytest.fail-style AssertionError otherwise)."""
        with self.arrived:
            ok = self.arrived.wait_for(lambda: predicate(last_points(self.requests)), timeout)
            assert ok, f"metrics never matched; last points: {last_points(self.requests)}"
            return last_points(self.requests)


@contextmanager
def metrics_sink() -> Iterator[tuple[str, MetricsSink]]:
    """``(base URL, sink)`` of a metrics endpoint on a free loopback port."""
    seen = MetricsSink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            msg = ExportMetricsServiceRequest()
            msg.ParseFromString(body)
            with seen.arrived:
                seen.requests.append(msg)
                seen.paths.append(self.path)
                seen.arrived.notify_all()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def last_points(requests: list[ExportMetricsServiceRequest]) -> Points:
    """Cumulative sums: the last exported value of each (metric, attributes) series."""
    out: Points = {}
    for req in requests:
        for rm in req.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    points = (
                        metric.sum.data_points if metric.HasField("sum") else metric.histogram.data_points
                    )
                    for p in points:
                        attrs = tuple(sorted((a.key, a.value.string_value) for a in p.attributes))
                        value = p.count if metric.HasField("histogram") else (p.as_int or p.as_double)
                        out[(metric.name, attrs)] = value
    return out


def series(points: Points, name: str) -> dict[tuple[Any, ...], float]:
    """The series of one metric: attributes -> value."""
    return {attrs: v for (n, attrs), v in points.items() if n == name}
