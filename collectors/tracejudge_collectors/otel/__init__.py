"""OTLP/HTTP receiver and OTLP file reader."""

import click

from tracejudge_collectors.otel._decode import (
    DEPTH_MARKER,
    MAX_ATTRIBUTE_DEPTH,
    MAX_VALUE_CHARS,
    TRUNCATED_MARKER,
    DecodeResult,
    OtlpDecodeError,
    decode_json,
    decode_protobuf,
    iter_otlp_file,
    read_otlp_file,
)

__all__ = [
    "DEPTH_MARKER",
    "MAX_ATTRIBUTE_DEPTH",
    "MAX_VALUE_CHARS",
    "TRUNCATED_MARKER",
    "DecodeResult",
    "OtlpDecodeError",
    "decode_json",
    "decode_protobuf",
    "file_command",
    "iter_otlp_file",
    "otlp_command",
    "read_otlp_file",
]


@click.command("otlp")
def otlp_command() -> None:
    """Placeholder."""


@click.command("file")
def file_command() -> None:
    """Placeholder."""
