"""``collect file`` on another tool's trace export: refused (exit 2) naming the format and the command or
exporter that brings those traces in — they were refused as "no resourceSpans … the file is truncated or
not OTLP/JSON; re-export it", or a JSON array as "must be a JSON object". Langfuse's and Phoenix's are the
JSON their APIs return (the local, spec-checked servers); LangSmith's follows its documented shape (a run:
``run_type``, ``inputs``, ``outputs``). MLflow's own export is read, one trace at a time (a list of them is
refused)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from tracejudge.cli import cli
from tracejudge.testing.langfuse_server import LangfuseServer
from tracejudge.testing.langfuse_server import synthetic_trace as langfuse_trace
from tracejudge.testing.phoenix_server import PhoenixServer, synthetic_spans


def _collect(tmp_path: Path, name: str, body: str) -> Result:
    path = tmp_path / name
    path.write_text(body)
    return CliRunner().invoke(
        cli, ["--store", f"sqlite:///{tmp_path / 's.db'}", "collect", "file", str(path)]
    )


def _refused(result: Result, *said: str) -> None:
    assert result.exit_code == 2, result.output
    assert "truncated" not in result.output
    for words in said:
        assert words in result.output


@pytest.mark.parametrize("generation", ["v3", "v4"])
def test_a_trace_saved_from_langfuse_s_api_names_collect_langfuse(tmp_path: Path, generation: str) -> None:
    server = LangfuseServer(generation=generation).start()  # type: ignore[arg-type]
    try:
        trace = langfuse_trace(0)
        server.add_trace(trace)
        auth = (server.public_key, server.secret_key)
        api = f"{server.base_url}/api/public"
        # A trace with its observations (v3), or a page of observations (v4 has no trace endpoint).
        url = f"{api}/traces/{trace['id']}" if generation == "v3" else f"{api}/v2/observations"
        answer = httpx.get(url, auth=auth, params={} if generation == "v3" else {"traceId": trace["id"]})
        body = answer.raise_for_status().text
    finally:
        server.stop()
    _refused(_collect(tmp_path, "trace.json", body), "Langfuse", "tracejudge collect langfuse")


def test_spans_saved_from_phoenix_s_api_name_collect_phoenix(tmp_path: Path) -> None:
    with PhoenixServer() as server:
        for span in synthetic_spans(0):
            server.add_span("default", span)
        page = httpx.get(f"{server.base_url}/v1/projects/default/spans").json()
    # The page as the API answers it, and its spans one per line.
    _refused(_collect(tmp_path, "page.json", json.dumps(page)), "Phoenix", "tracejudge collect phoenix")
    lines = "".join(json.dumps(s) + "\n" for s in page["data"])
    _refused(_collect(tmp_path, "spans.jsonl", lines), "Phoenix", "tracejudge collect phoenix", "line 1")
    _refused(_collect(tmp_path, "spans.json", json.dumps(page["data"])), "Phoenix", "collect phoenix")


def test_mlflow_traces_in_a_json_array_say_to_give_one_a_file(tmp_path: Path) -> None:
    # One MLflow trace (Trace.to_json) is read (tests/collectors/otel/test_mlflow_export.py); a list of them,
    # as a script might dump, is not one request.
    span = {
        "trace_id": "2Bu6Kqg7AnyY3NNCUXDiVA==",
        "span_id": "Z1JNjmjyXWs=",
        "parent_span_id": "",
        "name": "retrieve",
        "start_time_unix_nano": 1_763_456_400_000_000_000,
        "end_time_unix_nano": 1_763_456_401_000_000_000,
        "attributes": {"mlflow.spanType": '"RETRIEVER"', "mlflow.spanInputs": '"cap?"'},
        "status": {"code": "STATUS_CODE_OK", "message": ""},
        "events": [],
    }
    trace = {
        "info": {"trace_id": "tr-d81bba2aa83b027c98dcd3425170e254", "state": "OK"},
        "data": {"spans": [span]},
    }
    _refused(_collect(tmp_path, "traces.json", json.dumps([trace, trace])), "MLflow", "one per line")


def test_a_langsmith_run_says_tracejudge_reads_none(tmp_path: Path) -> None:
    run = {
        "id": "1f0c5a3e-0000-4000-8000-000000000001",
        "name": "RunnableSequence",
        "run_type": "chain",
        "inputs": {"question": "cap?"},
        "outputs": {"output": "30,000 RMB"},
        "child_runs": [],
    }
    _refused(_collect(tmp_path, "run.json", json.dumps(run)), "LangSmith run", "tracejudge collect otlp")


def test_a_json_array_of_spans_says_how_to_wrap_them(tmp_path: Path) -> None:
    span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "rag"}
    _refused(_collect(tmp_path, "spans.json", json.dumps([span, span])), "2 spans", '{"resourceSpans"')
    _refused(_collect(tmp_path, "numbers.json", "[1, 2]"), "JSON array (2 items)")
