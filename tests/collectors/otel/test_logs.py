"""``POST /v1/logs``: GenAI message content sent as OTLP log records is attached to its span.

End to end with the real ``opentelemetry-instrumentation-openai-v2``, the real SDK span and log
exporters and the real ``openai`` client against the scripted server, then ``traces show`` and
``triage``; plus bad input, duplicates and records that arrive before their span.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from click.testing import CliRunner
from google.protobuf.json_format import MessageToDict
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.instrumentation.openai_v2.instruments import Instruments
from opentelemetry.instrumentation.openai_v2.patch import chat_completions_create_v_old
from opentelemetry.instrumentation.utils import unwrap
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider, LogRecordLimits
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from wrapt import wrap_function_wrapper

from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge_collectors.otel import (
    MAX_VALUE_CHARS,
    TRUNCATED_MARKER,
    decode_logs_json,
    decode_logs_protobuf,
    serve_in_thread,
)

from .conftest import TRACE_ID, any_value, build_request

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}
TRACE_HEX = TRACE_ID.hex()
SPAN = (7).to_bytes(8, "big")
T0 = 1_700_000_000_000_000_000
CLAUSE = "Prepayment shall not exceed 30,000 RMB per order."
TICKET = """\
ticket: EXP-311
feedback: "the agent allowed a 50,000 RMB prepayment"
required:
  - doc_id: C-17/attachment
    version: v2
    clause: "Prepayment shall not exceed 30,000 RMB"
    facts: {prepayment_cap_rmb: 30000}
superseded:
  - doc_id: C-17/attachment
    version: v1
    facts: {prepayment_cap_rmb: 50000}
"""
MANIFEST = (
    '{"doc_id": "C-17/attachment", "version": "v2", "effective_from": "2020-03-01T00:00:00Z", '
    '"indexed_at": "2020-03-02T03:00:00Z"}\n'
)


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30, trust_env=False) as c:
        yield c


# ---------------------------------------------------------------- end to end


def run_agent(
    url: str, answer: str, *, mode: str, send_logs: bool = True, limits: LogRecordLimits | None = None
) -> str:
    """One agent turn (retrieval span, then a chat call instrumented by openai-v2, its log records under
    ``limits``); returns the trace id."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
    logger_provider = LoggerProvider(log_record_limits=limits)
    if send_logs:
        logger_provider.add_log_record_processor(
            SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{url}/v1/logs"))
        )
    if mode == "legacy":
        # The package's own v1.30 path (gen_ai.user.message … events with a body), which its
        # instrumentor picks when opentelemetry-util-genai predates 1.0.
        wrap_function_wrapper(
            "openai.resources.chat.completions",
            "Completions.create",
            chat_completions_create_v_old(
                tracer_provider.get_tracer("openai-v2"),
                logger_provider.get_logger("openai-v2"),
                Instruments(NoOpMeterProvider().get_meter("openai-v2")),
                True,
            ),
        )
        instrumentor = None
    else:
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    tracer = tracer_provider.get_tracer("agent")
    try:
        with ScriptedOpenAIServer([Rule(reply=answer)]) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
            with tracer.start_as_current_span("invoke_agent procurement") as root:
                root.set_attribute("gen_ai.operation.name", "invoke_agent")
                with tracer.start_as_current_span("retrieval contracts") as span:
                    span.set_attribute("gen_ai.operation.name", "retrieval")
                    span.set_attribute("gen_ai.retrieval.query.text", "prepayment cap C-17")
                    span.set_attribute(
                        "gen_ai.retrieval.documents",
                        json.dumps(
                            [
                                {
                                    "id": "c17-att-v2",
                                    "score": 0.93,
                                    "content": CLAUSE,
                                    "metadata": {"doc_id": "C-17/attachment", "version": "v2"},
                                }
                            ]
                        ),
                    )
                client.chat.completions.create(
                    model="gpt-4.1-mini",
                    messages=[
                        {"role": "system", "content": f"Answer from the context.\n\nContext: {CLAUSE}"},
                        {"role": "user", "content": "What is the prepayment cap for order C-17?"},
                    ],
                )
                trace_id = format(root.get_span_context().trace_id, "032x")
    finally:
        if instrumentor is not None:
            instrumentor.uninstrument()
        else:
            unwrap(openai.resources.chat.completions.Completions, "create")
        tracer_provider.shutdown()
        logger_provider.shutdown()
    return trace_id


def cli_json(store_path: Path, *args: str) -> Any:
    res = CliRunner().invoke(cli, ["--store", str(store_path), *args, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def triage(store_path: Path, tmp_path: Path, trace_id: str) -> Any:
    ticket = tmp_path / "EXP-311.yaml"
    ticket.write_text(TICKET, encoding="utf-8")
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(MANIFEST, encoding="utf-8")
    return cli_json(store_path, "triage", trace_id, "--ticket", str(ticket), "--manifest", str(manifest))


@pytest.fixture
def content_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVENT_ONLY")


@pytest.mark.usefixtures("content_on")
@pytest.mark.parametrize(
    ("mode", "event_names"),
    [
        ("event_only", ["gen_ai.client.inference.operation.details"]),
        ("legacy", ["gen_ai.system.message", "gen_ai.user.message", "gen_ai.choice"]),
    ],
)
def test_openai_v2_log_events_give_the_model_input_and_triage_decides(
    receiver: str, store: SqliteStore, store_path: Path, tmp_path: Path, mode: str, event_names: list[str]
) -> None:
    wrong = "Up to 50,000 RMB may be prepaid."
    trace_id = run_agent(receiver, wrong, mode=mode)
    chat = next(s for s in store.get_spans(trace_id) if s.name.startswith("chat"))
    assert [e.name for e in chat.events] == event_names
    assert "test-key" not in json.dumps([s.model_dump() for s in store.get_spans(trace_id)])

    shown = cli_json(store_path, "traces", "show", trace_id)
    (call,) = shown["model_calls"]
    assert call["input_recorded"] is True
    assert [m["role"] for m in call["input_messages"]] == ["system", "user"]
    assert CLAUSE in call["input_messages"][0]["content"]
    assert call["output_text"] == wrong
    assert shown["final_answer"] == wrong

    result = triage(store_path, tmp_path, trace_id)
    assert result["verdict"] == "ignored_by_model", result["summary"]
    assert [s["status"] for s in result["stages"]][:3] == ["pass", "pass", "pass"]


@pytest.mark.usefixtures("content_on")
def test_right_answer_is_no_fault_and_without_the_logs_it_stays_unconfirmed(
    receiver: str, store_path: Path, tmp_path: Path
) -> None:
    right = "The cap is 30,000 RMB per order."
    assert (
        triage(store_path, tmp_path, run_agent(receiver, right, mode="event_only"))["verdict"] == "no_fault"
    )
    # The same turn with the content not exported: the receiver cannot know, and says so.
    silent = run_agent(receiver, right, mode="event_only", send_logs=False)
    (call,) = cli_json(store_path, "traces", "show", silent)["model_calls"]
    assert call["input_recorded"] is False
    assert triage(store_path, tmp_path, silent)["verdict"] == "unconfirmed"


@pytest.mark.usefixtures("content_on")
@pytest.mark.filterwarnings("ignore::opentelemetry.sdk._logs.LogRecordDroppedAttributesWarning")
def test_a_log_record_that_dropped_attributes_is_not_read_as_all_it_held(
    receiver: str, store: SqliteStore, store_path: Path, tmp_path: Path
) -> None:
    """The SDK keeps at most 128 attributes a log record (LogRecordLimits) and says only how many it dropped
    (OTLP LogRecord.dropped_attributes_count): the operation-details record's messages may be among them,
    so its span's input and output are not read as whole — as a span's or a span event's are not."""
    wrong = "Up to 50,000 RMB may be prepaid."
    # 10 attributes, the messages last: a limit of 8 drops the 2 oldest and keeps the messages.
    trace_id = run_agent(
        receiver, wrong, mode="event_only", limits=LogRecordLimits(max_log_record_attributes=8)
    )
    chat = next(s for s in store.get_spans(trace_id) if s.name.startswith("chat"))
    (event,) = chat.events
    assert event.name == "gen_ai.client.inference.operation.details"
    assert (event.dropped_attributes_count, event.log_record) == (2, True)
    shown = cli_json(store_path, "traces", "show", trace_id)
    gaps = {g["kind"]: g for g in shown["gaps"]}
    assert (
        gaps["model_output_truncated"]["switch"]
        == "raise OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT (128 by default)"
    )
    assert "2 log record attributes" in gaps["model_input_truncated"]["detail"]
    # Read as whole, the answer states only v1's cap: ignored_by_model (as without the limit).
    result = triage(store_path, tmp_path, trace_id)
    assert result["verdict"] == "unconfirmed", result["summary"]
    used = result["stages"][3]
    assert used["status"] == "unconfirmed"
    assert "the whole answer (raise OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT (128 by default))" in used["missing"]


def test_a_log_records_dropped_count_is_decoded_and_kept() -> None:
    record = {
        "traceId": TRACE_HEX,
        "spanId": SPAN.hex(),
        "eventName": "gen_ai.choice",
        "body": {"stringValue": "x"},
    }
    body = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{**record, "droppedAttributesCount": "3"}]}]}]}
    (event,) = decode_logs_json(json.dumps(body)).events
    assert event.dropped_attributes_count == 3
    assert event.to_span_event().dropped_attributes_count == 3
    # Stored before the count was kept: read as none dropped, with the same id.
    stored = event.model_dump(mode="json")
    del stored["dropped_attributes_count"]
    old = type(event).model_validate(stored)
    assert (old.dropped_attributes_count, old.event_id) == (0, event.event_id)
    req = ExportLogsServiceRequest()
    lr = req.resource_logs.add().scope_logs.add().log_records.add()
    lr.trace_id, lr.span_id, lr.event_name, lr.dropped_attributes_count = TRACE_ID, SPAN, "gen_ai.choice", 5
    (event,) = decode_logs_protobuf(req.SerializeToString()).events
    assert event.dropped_attributes_count == 5


# ---------------------------------------------------------------- requests by hand


def log_request(*records: dict[str, Any]) -> ExportLogsServiceRequest:
    """An ExportLogsServiceRequest with one resource and scope; each record is a dict of LogRecord fields
    (``attributes`` as a plain dict, ``body`` as a Python value)."""
    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    rl.resource.attributes.add(key="service.name", value=any_value("agent"))
    sl = rl.scope_logs.add()
    sl.scope.name = "tests"
    for fields in records:
        lr = sl.log_records.add()
        for k, x in fields.get("attributes", {}).items():
            lr.attributes.add(key=k, value=any_value(x))
        if "body" in fields:
            lr.body.CopyFrom(any_value(fields["body"]))
        for name, x in fields.items():
            if name not in ("attributes", "body"):
                setattr(lr, name, x)
    return req


def user_record(content: str, at: int = T0 + 10, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "trace_id": TRACE_ID,
        "span_id": SPAN,
        "event_name": "gen_ai.user.message",
        "time_unix_nano": at,
        "body": {"content": content},
        "attributes": {"gen_ai.system": "openai"},
    }
    record.update(extra)
    return record


def chat_span() -> bytes:
    span = {
        "trace_id": TRACE_ID,
        "span_id": SPAN,
        "name": "chat gpt-4.1-mini",
        "start_time_unix_nano": T0,
        "end_time_unix_nano": T0 + 1000,
        "attributes": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1-mini"},
    }
    return build_request([span]).SerializeToString()


def partial(resp: httpx.Response) -> tuple[int, str]:
    out = ExportLogsServiceResponse()
    out.ParseFromString(resp.content)
    return out.partial_success.rejected_log_records, out.partial_success.error_message


def status(resp: httpx.Response) -> str:
    s = Status()
    s.ParseFromString(resp.content)
    return str(s.message)


def test_records_before_their_span_are_stored_once_and_merged(
    receiver: str, client: httpx.Client, store: SqliteStore
) -> None:
    body = log_request(
        user_record("What is the cap?"),
        {
            "trace_id": TRACE_ID,
            "span_id": SPAN,
            "event_name": "gen_ai.choice",
            "observed_time_unix_nano": T0 + 900,  # SDKs may leave the record time unset
            "body": {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "30,000"},
            },
        },
    ).SerializeToString()
    for path in ("/v1/logs", "/api/public/otel/v1/logs", "/v1/logs"):
        resp = client.post(receiver + path, content=body, headers=PB)
        assert resp.status_code == 200
        assert resp.headers["content-type"] == "application/x-protobuf"
        assert resp.content == b""  # full success: partial_success unset
    assert store.get_spans(TRACE_HEX) == []
    assert client.post(receiver + "/v1/traces", content=chat_span(), headers=PB).status_code == 200
    (span,) = store.get_spans(TRACE_HEX)
    assert [(e.name, e.time_unix_nano) for e in span.events] == [
        ("gen_ai.user.message", T0 + 10),
        ("gen_ai.choice", T0 + 900),
    ]
    assert span.events[0].attributes == {"gen_ai.system": "openai", "content": "What is the cap?"}
    assert span.events[1].attributes["message"] == {"role": "assistant", "content": "30,000"}


def test_records_without_span_context_or_with_bad_ids_are_rejected_the_rest_kept(
    receiver: str, client: httpx.Client, store: SqliteStore
) -> None:
    req = log_request(
        user_record("kept"),
        {"event_name": "app.started", "body": "no span here", "time_unix_nano": T0},
        user_record("short trace id", trace_id=b"\x01" * 5),
        user_record("zero span id", span_id=bytes(8)),
    )
    resp = client.post(receiver + "/v1/logs", content=req.SerializeToString(), headers=PB)
    assert resp.status_code == 200
    rejected, message = partial(resp)
    assert rejected == 3
    assert "no trace id and span id" in message
    assert "trace id must be 16 bytes" in message
    assert "span id must be 8 bytes" in message
    client.post(receiver + "/v1/traces", content=chat_span(), headers=PB)
    (span,) = store.get_spans(TRACE_HEX)
    assert [e.attributes["content"] for e in span.events] == ["kept"]


def test_otlp_json_gzip_legacy_event_name_and_plain_bodies(
    receiver: str, client: httpx.Client, store: SqliteStore
) -> None:
    payload = {
        "resourceLogs": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
                "scopeLogs": [
                    {
                        "scope": {"name": "old-sdk"},
                        "logRecords": [
                            {
                                "timeUnixNano": str(T0 + 5),
                                "severityNumber": "SEVERITY_NUMBER_INFO",
                                "traceId": TRACE_HEX.upper(),
                                "spanId": SPAN.hex(),
                                "attributes": [
                                    {"key": "event.name", "value": {"stringValue": "gen_ai.system.message"}}
                                ],
                                "body": {
                                    "kvlistValue": {
                                        "values": [{"key": "content", "value": {"stringValue": "Be brief."}}]
                                    }
                                },
                            },
                            {
                                "timeUnixNano": str(T0 + 6),
                                "traceId": TRACE_HEX,
                                "spanId": SPAN.hex(),
                                "body": {"stringValue": "retrying the call"},
                                "unknownField": 1,
                            },
                            {"timeUnixNano": str(T0 + 7), "traceId": "", "spanId": ""},
                        ],
                    }
                ],
            }
        ]
    }
    resp = client.post(
        receiver + "/v1/logs",
        content=gzip.compress(json.dumps(payload).encode()),
        headers={**JS, "Content-Encoding": "gzip"},
    )
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    assert resp.json()["partialSuccess"]["rejectedLogRecords"] == "1"
    client.post(receiver + "/v1/traces", content=chat_span(), headers=PB)
    (span,) = store.get_spans(TRACE_HEX)
    assert [(e.name, e.attributes.get("content"), e.attributes.get("body")) for e in span.events] == [
        ("gen_ai.system.message", "Be brief.", None),
        ("log", None, "retrying the call"),
    ]
    direct = decode_logs_json(json.dumps(payload))
    assert direct.events[0].severity_number == 9
    assert direct.rejected == 1


@pytest.mark.parametrize(
    ("body", "headers", "code", "text"),
    [
        (b"\xff\xff\xff not protobuf", PB, 400, "not a valid OTLP ExportLogsServiceRequest"),
        (b'{"resourceLogs": [', JS, 400, "not valid JSON"),
        (b'{"resourceLogs": {"a": 1}}', JS, 400, "resourceLogs in the request must be a list"),
        (b"[1, 2]", JS, 400, "must be a JSON object"),
        (b"{}", {"Content-Type": "text/plain"}, 415, "unsupported Content-Type"),
        (b"{}", {**JS, "Content-Encoding": "br"}, 415, "unsupported Content-Encoding"),
        (b"not gzip", {**JS, "Content-Encoding": "gzip"}, 400, "not valid gzip"),
    ],
)
def test_bad_requests_get_a_4xx_and_the_receiver_keeps_serving(
    receiver: str,
    client: httpx.Client,
    store: SqliteStore,
    body: bytes,
    headers: dict[str, str],
    code: int,
    text: str,
) -> None:
    resp = client.post(receiver + "/v1/logs", content=body, headers=headers)
    assert resp.status_code == code
    message = resp.json()["message"] if "json" in resp.headers["content-type"] else status(resp)
    assert text in message
    good = client.post(
        receiver + "/v1/logs", content=log_request(user_record("ok")).SerializeToString(), headers=PB
    )
    assert good.status_code == 200
    client.post(receiver + "/v1/traces", content=chat_span(), headers=PB)
    assert [e.attributes["content"] for e in store.get_spans(TRACE_HEX)[0].events] == ["ok"]


def test_body_limit_and_bearer_token_apply_to_logs(store: SqliteStore, client: httpx.Client) -> None:
    big = log_request(user_record("x" * 5000)).SerializeToString()
    with serve_in_thread(store, max_body_bytes=2000, token="s3cret-token") as url:
        denied = client.post(url + "/v1/logs", content=big, headers=PB)
        assert denied.status_code == 401
        assert "s3cret-token" not in denied.text
        auth = {**PB, "Authorization": "Bearer s3cret-token"}
        too_big = client.post(url + "/v1/logs", content=big, headers=auth)
        assert too_big.status_code == 413
        assert "larger than 2000 bytes" in status(too_big)
        bomb = client.post(
            url + "/v1/logs", content=gzip.compress(big), headers={**auth, "Content-Encoding": "gzip"}
        )
        assert bomb.status_code == 413
        small = log_request(user_record("fits")).SerializeToString()
        assert client.post(url + "/v1/logs", content=small, headers=auth).status_code == 200
    client_span = build_request(
        [{"trace_id": TRACE_ID, "span_id": SPAN, "name": "chat", "start_time_unix_nano": T0}]
    )
    with serve_in_thread(store) as url:
        client.post(url + "/v1/traces", content=client_span.SerializeToString(), headers=PB)
    assert [e.attributes["content"] for e in store.get_spans(TRACE_HEX)[0].events] == ["fits"]


def test_oversized_body_values_are_truncated_with_a_warning() -> None:
    huge = log_request(user_record("", body="z" * (MAX_VALUE_CHARS + 10))).SerializeToString()
    result = decode_logs_protobuf(huge)
    (event,) = result.events
    assert event.body.endswith(TRUNCATED_MARKER)
    assert result.rejected == 0
    assert "truncated" in result.message


def otlp_json(message: Any) -> str:
    """A protobuf request as OTLP/JSON (MessageToDict writes base64 ids; OTLP/JSON carries hex)."""
    d = MessageToDict(message)
    for resource in d.get("resourceLogs", []) + d.get("resourceSpans", []):
        for scope in resource.get("scopeLogs", []) + resource.get("scopeSpans", []):
            for item in scope.get("logRecords", []) + scope.get("spans", []):
                for key in ("traceId", "spanId"):
                    if key in item:
                        item[key] = base64.b64decode(item[key]).hex()
    return json.dumps(d)


def test_collect_file_reads_otlp_json_log_requests(tmp_path: Path, store_path: Path) -> None:
    logs = otlp_json(log_request(user_record("from a file"), {"event_name": "no.span"}))
    spans = otlp_json(ExportTraceServiceRequest.FromString(chat_span()))
    (tmp_path / "logs.json").write_text(logs, encoding="utf-8")
    (tmp_path / "mixed.jsonl").write_text(f"{spans}\n{logs}\n", encoding="utf-8")
    summary = cli_json(
        store_path, "collect", "file", str(tmp_path / "logs.json"), str(tmp_path / "mixed.jsonl")
    )
    assert [(f["spans"], f["log_events"], f["rejected"]) for f in summary["files"]] == [(0, 1, 1), (1, 1, 1)]
    assert summary["log_events"] == 2
    assert "no trace id and span id" in summary["files"][0]["errors"][0]
    store = SqliteStore(store_path)
    try:
        (span,) = store.get_spans(TRACE_HEX)
    finally:
        store.close()
    assert [e.attributes["content"] for e in span.events] == ["from a file"]  # the repeat is stored once


def test_collect_file_reads_otlp_protobuf_log_requests(tmp_path: Path, store_path: Path) -> None:
    # What opentelemetry-instrumentation-openai-v2 sends as log records, saved as protobuf files:
    # bare, gzip-compressed, and in the Collector's length-prefixed frames beside a trace request.
    logs = log_request(user_record("from a protobuf file"), {"event_name": "no.span"}).SerializeToString()
    (tmp_path / "logs.pb").write_bytes(logs)
    (tmp_path / "logs.binpb.gz").write_bytes(gzip.compress(logs))
    frames = b"".join(len(m).to_bytes(4, "big") + m for m in (chat_span(), logs))
    (tmp_path / "mixed.binpb").write_bytes(frames)
    summary = cli_json(store_path, "collect", "file", str(tmp_path))
    by_name = {
        Path(f["path"]).name: (f["spans"], f["log_events"], f["rejected"], f["failed"])
        for f in summary["files"]
    }
    assert by_name == {
        "logs.pb": (0, 1, 1, False),
        "logs.binpb.gz": (0, 1, 1, False),
        "mixed.binpb": (1, 1, 1, False),
    }
    store = SqliteStore(store_path)
    try:
        (span,) = store.get_spans(TRACE_HEX)
    finally:
        store.close()
    assert [e.attributes["content"] for e in span.events] == ["from a protobuf file"]
