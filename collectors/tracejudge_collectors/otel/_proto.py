"""The one module that imports the OTLP and google.rpc protobuf classes (opentelemetry-proto)."""

from __future__ import annotations

import json

from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = [
    "ExportLogsServiceRequest",
    "ExportLogsServiceResponse",
    "ExportTraceServiceRequest",
    "ExportTraceServiceResponse",
    "ProtobufDecodeError",
    "Status",
    "export_logs_response_body",
    "export_response_body",
    "status_body",
]


def export_response_body(rejected: int, message: str, *, as_json: bool) -> bytes:
    """An ``ExportTraceServiceResponse``; ``partial_success`` is set only when there is something to say."""
    if as_json:
        if not rejected and not message:
            return b"{}"
        partial: dict[str, object] = {"rejectedSpans": str(rejected)} if rejected else {}
        if message:
            partial["errorMessage"] = message
        return json.dumps({"partialSuccess": partial}).encode()
    resp = ExportTraceServiceResponse()
    if rejected or message:
        resp.partial_success.rejected_spans = rejected
        resp.partial_success.error_message = message
    return resp.SerializeToString()


def export_logs_response_body(rejected: int, message: str, *, as_json: bool) -> bytes:
    """An ``ExportLogsServiceResponse``; ``partial_success`` is set only when there is something to say."""
    if as_json:
        if not rejected and not message:
            return b"{}"
        partial: dict[str, object] = {"rejectedLogRecords": str(rejected)} if rejected else {}
        if message:
            partial["errorMessage"] = message
        return json.dumps({"partialSuccess": partial}).encode()
    resp = ExportLogsServiceResponse()
    if rejected or message:
        resp.partial_success.rejected_log_records = rejected
        resp.partial_success.error_message = message
    data: bytes = resp.SerializeToString()
    return data


def status_body(code: int, message: str, *, as_json: bool) -> bytes:
    """A ``google.rpc.Status`` carrying a gRPC status code and a message for the sender."""
    if as_json:
        return json.dumps({"code": code, "message": message}).encode()
    data: bytes = Status(code=code, message=message).SerializeToString()
    return data
