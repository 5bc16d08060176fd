"""OTel write-back: real OTLP/HTTP log export to a loopback receiver, parented to the evaluated span."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from tracejudge.write import EVENT_NAME, EvaluationEvent, OtelEvaluationWriter


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).bodies.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    _Receiver.bodies = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1/logs", _Receiver.bodies
    srv.shutdown()


def test_events_are_log_records_with_the_target_span_ids(
    receiver: tuple[str, list[tuple[str, bytes]]],
) -> None:
    url, bodies = receiver
    writer = OtelEvaluationWriter(endpoint=url)
    ev = EvaluationEvent(
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        span_id="00f067aa0ba902b7",
        name="accuracy",
        score_value=8.0,
        score_label="pass",
        explanation="matches the menu",
        attributes={"tracejudge.rubric.version": "3"},
    )
    bad = ev.model_copy(update={"span_id": "not-hex"})
    report = writer.write_events([ev, bad])
    writer.close()
    assert report.written == 1
    assert len(report.failed) == 1
    assert bodies
    path, body = bodies[0]
    assert path == "/v1/logs"
    req = ExportLogsServiceRequest()
    req.ParseFromString(body)
    records = [r for rl in req.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    assert len(records) == 1
    rec = records[0]
    assert rec.event_name == EVENT_NAME
    assert rec.trace_id.hex() == ev.trace_id
    assert rec.span_id.hex() == ev.span_id
    attrs = {kv.key: kv.value for kv in rec.attributes}
    assert attrs["gen_ai.evaluation.name"].string_value == "accuracy"
    assert attrs["gen_ai.evaluation.score.value"].double_value == 8.0
    assert attrs["gen_ai.evaluation.score.label"].string_value == "pass"
    assert attrs["gen_ai.evaluation.explanation"].string_value == "matches the menu"
    assert attrs["tracejudge.rubric.version"].string_value == "3"
