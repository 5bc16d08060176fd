"""Read OTLP files: protobuf export requests (bare or the Collector's length-prefixed frames),
OTLP/JSON (one request, or one per line) and JSON lines, each optionally gzip-compressed; trace and log
requests alike."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

from tracejudge import InputError
from tracejudge.schema import RawSpan, SpanSource
from tracejudge_collectors.otel._decode import (
    DecodeResult,
    EncodeResult,
    decode_json_object,
    decode_protobuf,
    encode_protobuf,
)
from tracejudge_collectors.otel._logs import decode_logs_json_object, decode_logs_protobuf
from tracejudge_collectors.otel._mlflow import mlflow_request
from tracejudge_collectors.otel._otlp import MAX_ERRORS, OtlpDecodeError, get, load_json_body

__all__ = ["decode_json_file_chunk", "iter_otlp_file", "iter_otlp_file_for_store", "read_otlp_file"]

_GZIP_MAGIC = b"\x1f\x8b"

_Traces = TypeVar("_Traces", DecodeResult, EncodeResult)
_TracesPb = Callable[[bytes, SpanSource], _Traces]
"""How a protobuf trace request is read: decoded (:func:`decode_protobuf`) or for the store
(:func:`encode_protobuf`)."""


def decode_json_file_chunk(body: bytes, *, source: SpanSource = "file") -> DecodeResult:
    """An OTLP/JSON request from a file: a trace request, a log request (``log_events``), or both."""
    obj = load_json_body(body, request="ExportTraceServiceRequest or ExportLogsServiceRequest")
    obj = mlflow_request(obj) or obj  # MLflow's own trace export: its spans re-wrapped as a request
    _refuse_other_objects(obj)
    result = decode_json_object(obj, source=source)
    if isinstance(obj, dict) and get(obj, "resourceLogs", "resource_logs") is not None:
        found = decode_logs_json_object(obj)
        result = DecodeResult(
            spans=result.spans,
            rejected=result.rejected + found.rejected,
            errors=[*result.errors, *found.errors][: MAX_ERRORS + 2],
            log_events=found.events,
        )
    return result


_REQUEST_KEYS = ("resourceSpans", "resource_spans", "resourceLogs", "resource_logs")
_WRAP = (
    'wrap the spans as {"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]} with traceId, spanId and '
    "start/end times on each"
)


class ForeignFormatError(OtlpDecodeError):
    """The file holds another tool's trace format: the message names it and what to do instead (the file
    readers keep it rather than their own hint that the file may be truncated)."""


def _refuse_other_objects(obj: object) -> None:
    """A JSON object that holds no request field but others is some other record — one span dumped on its
    own (a test's recorded span, an SDK's console export), or another tool's trace export (Langfuse,
    Phoenix, LangSmith; MLflow's is read, one trace at a time) — not an empty request: read as a request
    (unknown fields ignored) it would import nothing and say nothing. A JSON array is no request either."""
    if isinstance(obj, list):
        raise _foreign_list(obj)
    if not isinstance(obj, dict) or not obj or any(k in obj for k in _REQUEST_KEYS):
        return
    if _console_span(obj):
        raise _console_error()
    named = _foreign_format(obj)
    if named is not None:
        raise ForeignFormatError(named, hint="see the message")
    keys = ", ".join(sorted(map(str, obj))[:6])
    looks = " (it looks like a single span)" if {"name", "attributes"} <= obj.keys() else ""
    raise ForeignFormatError(
        f"the JSON object has no resourceSpans or resourceLogs, only {keys}{looks}: it is not an OTLP/JSON "
        f"export request; export with an OTLP exporter, or {_WRAP}",
        hint="see the message",
    )


def _foreign_format(obj: dict[str, object]) -> str | None:
    """What to say of a JSON object that is another tool's trace record, by the fields that tool writes;
    None when it is none of them."""
    data = obj.get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict):
        # A page of an API's answer (Phoenix's spans, Langfuse's traces or observations).
        return _foreign_format(data[0])
    if isinstance(obj.get("info"), dict) and isinstance(data, dict) and isinstance(data.get("spans"), list):
        # Only in a list: a trace on its own is read (mlflow_request).
        return (
            "it holds MLflow traces (info and data.spans, as Trace.to_json or `mlflow traces get` write"
            " them): give one trace per file, or one per line of a .jsonl file"
        )
    if isinstance(obj.get("observations"), list) or (
        "traceId" in obj and obj.get("type") in ("GENERATION", "SPAN", "EVENT", "RETRIEVER", "TOOL", "AGENT")
    ):
        return (
            "it holds a Langfuse trace or observation as Langfuse's API returns it, not OTLP: pull the"
            " traces from Langfuse with `tracejudge collect langfuse`, which reads them the same way"
        )
    if "span_kind" in obj or "context.span_id" in obj:
        return (
            "it holds a span as Phoenix exports it (span_kind, context.span_id: a spans dataframe or "
            "OpenInference span JSON), not OTLP: pull the project's traces from Phoenix with "
            "`tracejudge collect phoenix`, or send the spans over OTLP to `tracejudge collect otlp`"
        )
    if "run_type" in obj and ("inputs" in obj or "child_runs" in obj):
        return (
            "it holds a LangSmith run (run_type, inputs, outputs), not OTLP: tracejudge reads no LangSmith "
            "runs; trace the application with OpenTelemetry (LangSmith's OpenTelemetry export, or an "
            "OpenInference or OpenLLMetry LangChain instrumentation) and send the spans to "
            "`tracejudge collect otlp`"
        )
    return None


def _foreign_list(items: list[object]) -> ForeignFormatError:
    """A JSON array: named after its first item when that is a record we know, else as a list."""
    first = items[0] if items else None
    if isinstance(first, dict):
        if _console_span(first):
            return _console_error()
        named = _foreign_format(first)
        if named is not None:
            return ForeignFormatError(f"a JSON array of records: {named}", hint="see the message")
        if "traceId" in first or "spanId" in first:
            return ForeignFormatError(
                f"a JSON array of {len(items)} spans is not an OTLP/JSON export request: {_WRAP}",
                hint="see the message",
            )
    return ForeignFormatError(
        f"a JSON array ({len(items)} items) is not an OTLP/JSON export request, which is one object "
        '{"resourceSpans": [...]} (or one per line); export with an OTLP exporter',
        hint="see the message",
    )


def _console_span(obj: object) -> bool:
    """Whether ``obj`` is a span as the OpenTelemetry SDK's ``ConsoleSpanExporter`` prints it
    (``ReadableSpan.to_json()``: ``context.trace_id`` as ``0x…`` hex)."""
    if not isinstance(obj, dict) or "name" not in obj:
        return False
    context = obj.get("context")
    trace_id = context.get("trace_id") if isinstance(context, dict) else None
    return isinstance(trace_id, str) and trace_id.startswith("0x")


def _console_error() -> ForeignFormatError:
    return ForeignFormatError(
        "it holds spans as the OpenTelemetry SDK's ConsoleSpanExporter prints them (span.to_json()), "
        "which is not OTLP: export them with OTLPSpanExporter to `tracejudge collect otlp`, or write "
        "OTLP/JSON files with the OpenTelemetry Collector's file exporter",
        hint="see the message",
    )


def read_otlp_file(path: Path) -> Iterator[RawSpan]:
    """Spans of an OTLP file, streamed: protobuf ``ExportTraceServiceRequest`` (any extension other
    than ``.json``/``.jsonl``; also the OTel Collector's length-prefixed proto files), OTLP/JSON
    (``.json``: one request, or one per line) or JSON lines (``.jsonl``), each optionally gzip-compressed.

    Invalid spans are skipped (see :func:`iter_otlp_file` for counts). Raises :class:`InputError`
    naming the file (and line) when it cannot be read.
    """
    for result in iter_otlp_file(path):
        yield from result.spans


def iter_otlp_file(path: Path, *, source: SpanSource = "file") -> Iterator[DecodeResult]:
    """Like :func:`read_otlp_file`, one :class:`DecodeResult` per request in the file."""
    return _iter_file(path, source, _decoded)


def iter_otlp_file_for_store(
    path: Path, *, source: SpanSource = "file"
) -> Iterator[DecodeResult | EncodeResult]:
    """Like :func:`iter_otlp_file`, with each protobuf trace request read as the OTLP receiver reads
    one (:func:`encode_protobuf`): a span without a note stays in its own OTLP bytes, the others are
    decoded, so a file and the same request sent to the receiver store the same spans."""
    return _iter_file(path, source, _encoded)


def _decoded(data: bytes, source: SpanSource) -> DecodeResult:
    return decode_protobuf(data, source=source)


def _encoded(data: bytes, source: SpanSource) -> EncodeResult:
    return encode_protobuf(data, source=source)


def _iter_file(
    path: Path, source: SpanSource, traces_pb: _TracesPb[_Traces]
) -> Iterator[_Traces | DecodeResult]:
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    try:
        with path.open("rb") as raw:
            gzipped = raw.read(2) == _GZIP_MAGIC
        if name.endswith(".jsonl"):
            yield from _iter_jsonl(path, gzipped, source)
        elif name.endswith(".json"):
            yield from _iter_json(path, _read_all(path, gzipped), source)
        else:
            yield from _iter_proto(path, _read_all(path, gzipped), source, traces_pb)
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror or exc}",
            hint="check that the path exists and is a readable file",
        ) from exc


def _corrupt_gzip(path: Path, exc: Exception) -> InputError:
    return InputError(
        f"{path} is a truncated or corrupt gzip file ({exc})",
        hint="re-copy or re-export the file; `gzip -t FILE` checks it",
    )


def _read_all(path: Path, gzipped: bool) -> bytes:
    if not gzipped:
        return path.read_bytes()
    try:
        with gzip.open(path, "rb") as fh:
            return fh.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise _corrupt_gzip(path, exc) from exc


def _open(path: Path, gzipped: bool) -> BinaryIO:
    if gzipped:
        return gzip.open(path, "rb")  # type: ignore[return-value]  # GzipFile is a binary stream
    return path.open("rb")


def _iter_jsonl(path: Path, gzipped: bool, source: SpanSource) -> Iterator[DecodeResult]:
    with _open(path, gzipped) as fh:
        lineno = 0
        while True:
            try:
                line = fh.readline()
            except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
                raise _corrupt_gzip(path, exc) from exc
            if not line:
                return
            lineno += 1
            if not line.strip():
                continue
            yield _decode_line(path, lineno, line, source)


def _decode_line(path: Path, lineno: int, line: bytes, source: SpanSource) -> DecodeResult:
    try:
        return decode_json_file_chunk(line, source=source)
    except ForeignFormatError as exc:
        raise InputError(f"{path}, line {lineno}: {exc.message}", hint=exc.hint) from exc
    except OtlpDecodeError as exc:
        raise InputError(
            f"{path}, line {lineno}: {exc.message}",
            hint="the file is truncated or that line is not an OTLP/JSON request; fix or delete the line "
            "and run again (spans already read are stored, repeats are ignored)",
        ) from exc


def _iter_json(path: Path, data: bytes, source: SpanSource) -> Iterator[DecodeResult]:
    try:
        yield decode_json_file_chunk(data, source=source)
        return
    except ForeignFormatError as exc:
        raise InputError(f"{path}: {exc.message}", hint=exc.hint) from exc
    except OtlpDecodeError as exc:
        cause = exc.__cause__
        if isinstance(cause, json.JSONDecodeError) and cause.msg == "Extra data" and _console_head(data):
            # Console output is pretty-printed objects one after another: no line of it is JSON.
            raise InputError(f"{path}: {_console_error().message}", hint="see the message") from exc
        # The Collector's file exporter writes one request per line even into a file named .json.
        if not (isinstance(cause, json.JSONDecodeError) and cause.msg == "Extra data"):
            raise InputError(
                f"{path}: {exc.message}",
                hint="the file is truncated or not OTLP/JSON; re-export it "
                "(protobuf files must not be named .json)",
            ) from exc
    for lineno, line in enumerate(data.splitlines(), 1):
        if line.strip():
            yield _decode_line(path, lineno, line, source)


def _console_head(data: bytes) -> bool:
    """Whether the file starts with a span as ``ConsoleSpanExporter`` prints it."""
    try:
        first, _ = json.JSONDecoder().raw_decode(data.decode("utf-8", "replace").lstrip())
    except ValueError:
        return False
    return _console_span(first)


def _iter_proto(
    path: Path, data: bytes, source: SpanSource, traces_pb: _TracesPb[_Traces]
) -> Iterator[_Traces | DecodeResult]:
    def fail(exc: OtlpDecodeError, frame: int | None) -> InputError:
        at = f" (message {frame})" if frame is not None else ""
        return InputError(
            f"{path}{at}: {exc.message}",
            hint="the file is truncated or not an OTLP protobuf ExportTraceServiceRequest or "
            "ExportLogsServiceRequest; OTLP/JSON files must end in .json or .jsonl",
        )

    frames = _length_prefixed(data)
    if frames is None:
        try:
            yield _decode_proto_frame(data, source, traces_pb)
        except OtlpDecodeError as exc:
            raise fail(exc, None) from exc
        return
    for i, frame in enumerate(frames, 1):
        try:
            yield _decode_proto_frame(frame, source, traces_pb)
        except OtlpDecodeError as exc:
            raise fail(exc, i) from exc


def _decode_proto_frame(
    data: bytes, source: SpanSource, traces_pb: _TracesPb[_Traces]
) -> _Traces | DecodeResult:
    """A protobuf trace request, or a log request (``log_events``): the two share their outer field
    numbers, so a log request read as traces fails or yields only rejected spans — then it is read
    as logs, and kept as logs when that finds records with a span context."""
    try:
        traces: _Traces | None = traces_pb(data, source)
    except OtlpDecodeError as exc:
        traces, error = None, exc
    if traces is not None and (traces.spans or not traces.rejected):
        return traces
    try:
        logs = decode_logs_protobuf(data)
    except OtlpDecodeError:
        logs = None
    if logs is not None and logs.events:
        return DecodeResult(spans=[], rejected=logs.rejected, errors=logs.errors, log_events=logs.events)
    if traces is not None:
        return traces
    raise error


def _length_prefixed(data: bytes) -> list[bytes] | None:
    """Split the OTel Collector file exporter's proto format (4-byte big-endian length, message, …).

    A bare request starts with field 1 (byte 0x0a), which as a length prefix would mean a message of
    over 160 MB, so the two layouts do not collide for real files.
    """
    if len(data) < 4 or data[0] == 0x0A:
        return None
    frames: list[bytes] = []
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            return None
        n = int.from_bytes(data[pos : pos + 4], "big")
        pos += 4
        if pos + n > len(data):
            return None
        frames.append(data[pos : pos + n])
        pos += n
    return frames
