"""OTLP/HTTP receiver and OTLP file reader.

``decode_protobuf`` / ``decode_json`` turn an OTLP trace export request into ``RawSpan`` records
(with per-span rejection: OTLP partial success), and ``encode_protobuf`` keeps what it can of a
protobuf request in the spans' own bytes for the store (what the receiver does);
``decode_logs_protobuf`` / ``decode_logs_json`` turn an OTLP log export request into ``LogEvent``
records (log records correlated with a span);
``read_otlp_file`` streams the spans of an OTLP file; ``build_app`` / ``serve`` run the OTLP/HTTP
receiver (``/v1/traces`` and ``/v1/logs``); ``otlp_command`` and ``file_command`` are the
``tracejudge collect`` subcommands (entry points ``tracejudge.collectors``).
"""

from tracejudge_collectors.otel._cli import file_command, otlp_command
from tracejudge_collectors.otel._decode import (
    DecodeResult,
    EncodeResult,
    decode_json,
    decode_protobuf,
    encode_protobuf,
)
from tracejudge_collectors.otel._files import FileImport, ImportSummary, import_files
from tracejudge_collectors.otel._logs import (
    LogDecodeResult,
    decode_logs_json,
    decode_logs_protobuf,
)
from tracejudge_collectors.otel._otlp import (
    DEFAULT_MAX_DECODED_BYTES,
    DEFAULT_MAX_NAME_CHARS,
    DEFAULT_MAX_SPANS,
    DEPTH_MARKER,
    MAX_ATTRIBUTE_DEPTH,
    MAX_VALUE_CHARS,
    TRUNCATED_MARKER,
    DecodeLimits,
    LimitError,
    OtlpDecodeError,
)
from tracejudge_collectors.otel._read import iter_otlp_file, read_otlp_file
from tracejudge_collectors.otel._receiver import (
    DEFAULT_LISTEN,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_READ_TIMEOUT,
    LOG_PATHS,
    TRACE_PATHS,
    build_app,
    check_exposure,
    is_loopback,
    parse_listen,
    serve,
    serve_in_thread,
)

__all__ = [
    "DEFAULT_LISTEN",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_DECODED_BYTES",
    "DEFAULT_MAX_NAME_CHARS",
    "DEFAULT_MAX_SPANS",
    "DEFAULT_READ_TIMEOUT",
    "DEPTH_MARKER",
    "LOG_PATHS",
    "MAX_ATTRIBUTE_DEPTH",
    "MAX_VALUE_CHARS",
    "TRACE_PATHS",
    "TRUNCATED_MARKER",
    "DecodeLimits",
    "DecodeResult",
    "EncodeResult",
    "FileImport",
    "ImportSummary",
    "LimitError",
    "LogDecodeResult",
    "OtlpDecodeError",
    "build_app",
    "check_exposure",
    "decode_json",
    "decode_logs_json",
    "decode_logs_protobuf",
    "decode_protobuf",
    "encode_protobuf",
    "file_command",
    "import_files",
    "is_loopback",
    "iter_otlp_file",
    "otlp_command",
    "parse_listen",
    "read_otlp_file",
    "serve",
    "serve_in_thread",
]
