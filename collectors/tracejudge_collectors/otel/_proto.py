"""The one module that imports the OTLP and google.rpc protobuf classes (opentelemetry-proto)."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
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
    "span_bytes",
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


_SpanBytesRequest: Any = None


def _span_bytes_request() -> Any:
    """``ExportTraceServiceRequest`` as far as its spans, which stay bytes: its wire form, with
    ``ResourceSpans.scope_spans`` and ``ScopeSpans.spans`` declared as they are (fields 1, 2 and 2)
    and everything else left unknown."""
    global _SpanBytesRequest
    if _SpanBytesRequest is None:
        field = descriptor_pb2.FieldDescriptorProto
        proto = descriptor_pb2.FileDescriptorProto(
            name="tracejudge/span_bytes.proto", package="tracejudge.span_bytes", syntax="proto3"
        )
        for name, number, kind, of in (
            ("ScopeSpans", 2, field.TYPE_BYTES, ""),
            ("ResourceSpans", 2, field.TYPE_MESSAGE, ".tracejudge.span_bytes.ScopeSpans"),
            ("Request", 1, field.TYPE_MESSAGE, ".tracejudge.span_bytes.ResourceSpans"),
        ):
            items = proto.message_type.add(name=name).field.add(
                name="items", number=number, label=field.LABEL_REPEATED, type=kind
            )
            if of:
                items.type_name = of
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        _SpanBytesRequest = message_factory.GetMessageClass(
            pool.FindMessageTypeByName("tracejudge.span_bytes.Request")
        )
    return _SpanBytesRequest


def span_bytes(body: bytes) -> list[list[list[bytes]]] | None:
    """Each span of a serialized ``ExportTraceServiceRequest`` in the bytes it arrived in, by resource
    and scope (``[r][s][i]`` is ``resource_spans[r].scope_spans[s].spans[i]`` of the parsed request:
    parsing these bytes as a ``Span`` gives that span). Cutting them out costs a tenth of serializing
    each parsed span again. None when the body does not parse this way (it then does not parse as a
    request either)."""
    try:
        request = _span_bytes_request().FromString(body)
    except ProtobufDecodeError:
        return None
    return [[list(scope.items) for scope in resource.items] for resource in request.items]
