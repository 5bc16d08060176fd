"""Hostile OTLP input (issue 17): lone surrogates, decode limits, slow and oversized requests.

Each case reproduces a finding of the adversarial round and failed before its fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import orjson
import pytest
from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.store import SqliteStore

TRACE_HEX = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_HEX = "00f067aa0ba902b7"
JS = {"Content-Type": "application/json"}
RAW_SURROGATE = b"\xed\xa0\x80"  # U+D800 as (invalid) UTF-8
ESCAPED_SURROGATE = b"\\udc00"


def _span_body(name: str = "NAME", key: str = "KEY", value: str = "VAL") -> bytes:
    span = {
        "traceId": TRACE_HEX,
        "spanId": SPAN_HEX,
        "name": name,
        "attributes": [
            {"key": key, "value": {"stringValue": value}},
            {
                "key": "nested",
                "value": {"kvlistValue": {"values": [{"key": "NK", "value": {"stringValue": "NV"}}]}},
            },
        ],
        "events": [{"name": "EV", "attributes": [{"key": "EK", "value": {"stringValue": "EVV"}}]}],
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "RES"}}]}
    return json.dumps(
        {
            "resourceSpans": [
                {"resource": resource, "scopeSpans": [{"scope": {"name": "SCOPE"}, "spans": [span]}]}
            ]
        }
    ).encode()


def _log_body() -> bytes:
    record = {
        "traceId": TRACE_HEX,
        "spanId": SPAN_HEX,
        "eventName": "EN",
        "body": {"stringValue": "BODY"},
        "attributes": [{"key": "LK", "value": {"stringValue": "LV"}}],
    }
    return json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}).encode()


def _with(body: bytes, token: str, bad: bytes) -> bytes:
    return body.replace(token.encode(), b"x" + bad + b"y", 1)


def _storable(value: object) -> None:
    """Every string can be written as UTF-8 JSON (what SQLite, PostgreSQL and orjson need)."""
    orjson.dumps(value)


SPAN_PLACES = ["NAME", "KEY", "VAL", "NK", "NV", "EV", "EK", "EVV", "RES", "SCOPE"]


@pytest.mark.parametrize("bad", [RAW_SURROGATE, ESCAPED_SURROGATE], ids=["raw", "escaped"])
@pytest.mark.parametrize("place", SPAN_PLACES)
def test_a_lone_surrogate_anywhere_in_a_span_is_replaced_not_a_500(
    receiver: str, store: SqliteStore, place: str, bad: bytes
) -> None:
    with httpx.Client(timeout=30, trust_env=False) as client:
        resp = client.post(f"{receiver}/v1/traces", content=_with(_span_body(), place, bad), headers=JS)
    assert resp.status_code == 200, resp.text
    (span,) = store.get_spans(TRACE_HEX)
    dumped = span.model_dump()
    _storable(dumped)
    assert "x\ufffd" in json.dumps(dumped, ensure_ascii=False)


@pytest.mark.parametrize("bad", [RAW_SURROGATE, ESCAPED_SURROGATE], ids=["raw", "escaped"])
@pytest.mark.parametrize("place", ["EN", "BODY", "LK", "LV"])
def test_a_lone_surrogate_in_a_log_record_is_replaced_not_a_500(
    receiver: str, store: SqliteStore, place: str, bad: bytes
) -> None:
    with httpx.Client(timeout=30, trust_env=False) as client:
        resp = client.post(f"{receiver}/v1/logs", content=_with(_log_body(), place, bad), headers=JS)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {}


def test_a_body_that_is_not_utf8_reads_with_replacement_characters(receiver: str, store: SqliteStore) -> None:
    with httpx.Client(timeout=30, trust_env=False) as client:
        resp = client.post(
            f"{receiver}/v1/traces", content=_with(_span_body(), "VAL", b"\xff\xfe"), headers=JS
        )
    assert resp.status_code == 200, resp.text
    (span,) = store.get_spans(TRACE_HEX)
    assert span.attributes["KEY"] == "x\ufffd\ufffdy"


@pytest.mark.parametrize("name", ["spans.json", "spans.jsonl"])
def test_collect_file_with_lone_surrogates_stores_the_span(
    tmp_path: Path, store_path: Path, store: SqliteStore, name: str
) -> None:
    path = tmp_path / name
    body = _with(_with(_span_body(), "NAME", RAW_SURROGATE), "VAL", ESCAPED_SURROGATE)
    path.write_bytes(body + b"\n" + _with(_log_body(), "BODY", RAW_SURROGATE) + b"\n")
    result = CliRunner().invoke(
        cli, ["--store", f"sqlite:///{store_path}", "collect", "file", str(path), "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["spans"], summary["log_events"], summary["failed"]) == (1, 1, 0)
    (span,) = store.get_spans(TRACE_HEX)
    assert span.name == "x\ufffd\ufffd\ufffdy"
    assert span.attributes["KEY"] == "x\ufffdy"
