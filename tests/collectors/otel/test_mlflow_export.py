"""``collect file`` on MLflow's own trace export (``Trace.to_json()``, what ``mlflow traces get`` prints):
read as the spans it holds, which MLflow's OTLP export would have sent (it was refused, naming the OTLP
export).

tests/fixtures/mlflow_export/ holds two traces MLflow wrote (mlflow-tracing 3.17.2, ``record.py``): a RAG
app whose retriever returned the cap clause, sent it to the model, which stated the cap (``rag``), and the
same with the clause left out of the model's input (``dropped``). MLflow 2's span dicts (``context``,
``parent_id``, …) and newer MLflow's version 4 span dicts (hex ids, MLflow's own trace id beside
``otel_trace_id``) are the same spans re-shaped as MLflow's ``Span.from_dict`` reads them.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from tracejudge.cli import cli
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import ManifestEntry, RawSpan, Ticket
from tracejudge_collectors.otel._read import decode_json_file_chunk

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mlflow_export"
CAP = "Prepayment to suppliers in China shall not exceed 50,000 RMB per order."
OTHER = "Suppliers must be registered in the vendor portal before the first order."
QUESTION = "What is the prepayment cap for suppliers in China?"


def _export(name: str) -> dict[str, Any]:
    exported: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return exported


def _trace_id(name: str) -> str:
    return str(_export(name)["info"]["trace_id"]).removeprefix("tr-")


def _run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", *args])


def _entry(doc_id: str, version: str, content: str) -> dict[str, Any]:
    return {
        "doc_id": doc_id,
        "version": version,
        "effective_from": "2025-01-01T00:00:00Z",
        "indexed_at": "2025-06-01T00:00:00Z",
        "content": content,
    }


MANIFEST = [_entry("prepayment-policy", "v2", CAP), _entry("vendor-policy", "v1", OTHER)]
TICKET = {
    "required": [
        {
            "doc_id": "prepayment-policy",
            "version": "v2",
            "clause": "shall not exceed 50,000 RMB per order",
            "facts": {"cap": "50,000 RMB"},
        }
    ]
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("mlflow") / "s.db"
    files = [str(FIXTURES / "rag.json"), str(FIXTURES / "dropped.json")]
    result = _run(db, "collect", "file", *files, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["spans"], summary["rejected"], summary["failed"]) == (6, 0, 0)
    return db


def test_an_mlflow_trace_export_is_read_as_its_spans(store: Path) -> None:
    result = _run(store, "traces", "show", _trace_id("rag"), "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    # MLflow's trace id (tr-<hex>) is the OpenTelemetry trace id of its spans.
    assert [s["name"] for s in record["spans"]] == ["answer", "search", "Completions"]
    (retrieval,) = record["retrievals"]
    assert retrieval["query"] == QUESTION
    assert [(d["doc_id"], d["version"], d["raw_id"]) for d in retrieval["documents"]] == [
        ("vendor-policy", "v1", "chunk-7"),
        ("prepayment-policy", "v2", "chunk-3"),
    ]
    (call,) = record["model_calls"]
    assert [m["role"] for m in call["input_messages"]] == ["system", "user"]
    assert CAP in call["input_messages"][0]["content"]
    assert (record["input"], record["final_answer"]) == (
        QUESTION,
        "The prepayment cap is 50,000 RMB per order.",
    )
    assert record["gaps"] == []


@pytest.mark.parametrize(("name", "verdict"), [("rag", "no_fault"), ("dropped", "dropped_in_context")])
def test_triage_reads_an_mlflow_export_as_it_reads_mlflow_s_otlp_spans(
    store: Path, tmp_path: Path, name: str, verdict: str
) -> None:
    ticket = tmp_path / "ticket.yaml"
    ticket.write_text(yaml.safe_dump({"ticket": name, "trace_id": _trace_id(name), **TICKET}))
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(e) + "\n" for e in MANIFEST))
    result = _run(store, "triage", "--ticket", str(ticket), "--manifest", str(manifest), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["verdict"] == verdict


def _hex(b64: str | None) -> str | None:
    return None if not b64 else base64.b64decode(b64).hex()


def _mlflow_2(span: dict[str, Any]) -> dict[str, Any]:
    """A span as MLflow 2 wrote it (``Span.from_dict_v2``'s fields)."""
    parent = _hex(span["parent_span_id"])
    return {
        "name": span["name"],
        "context": {"span_id": f"0x{_hex(span['span_id'])}", "trace_id": f"0x{_hex(span['trace_id'])}"},
        "parent_id": f"0x{parent}" if parent else None,
        "start_time": span["start_time_unix_nano"],
        "end_time": span["end_time_unix_nano"],
        "status_code": "OK",
        "status_message": "",
        "attributes": span["attributes"],
        "events": [],
    }


def _dict_version_4(span: dict[str, Any], trace_id: str) -> dict[str, Any]:
    """A span as newer MLflow's version 4 span dicts hold it (MLflow's trace id, hex ids)."""
    return {
        **span,
        "trace_id": trace_id,
        "otel_trace_id": _hex(span["trace_id"]),
        "span_id": _hex(span["span_id"]),
        "parent_span_id": _hex(span["parent_span_id"]),
        "status": {"code": "OK", "message": ""},
    }


def _spans(body: object) -> list[RawSpan]:
    return list(decode_json_file_chunk(json.dumps(body).encode()).spans)


def _verdict(spans: list[RawSpan], trace_id: str) -> str:
    ticket = Ticket.model_validate({"trace_id": trace_id, **TICKET})
    return localize(normalize(spans), ticket, [ManifestEntry.model_validate(e) for e in MANIFEST]).verdict


@pytest.mark.parametrize("name", ["rag", "dropped"])
def test_mlflow_2_trace_data_and_newer_span_dicts_read_the_same(name: str) -> None:
    exported = _export(name)
    spans = exported["data"]["spans"]
    as_exported = _spans(exported)
    shapes = {
        "trace data (MLflow 2)": {"spans": [_mlflow_2(s) for s in spans], "request": "{}", "response": "{}"},
        "trace data (MLflow 3)": {"spans": spans},
        "span dict version 4": {
            **exported,
            "data": {"spans": [_dict_version_4(s, exported["info"]["trace_id"]) for s in spans]},
        },
    }
    for shape, body in shapes.items():
        read = _spans(body)
        assert [(s.trace_id, s.span_id, s.parent_span_id, s.name) for s in read] == [
            (s.trace_id, s.span_id, s.parent_span_id, s.name) for s in as_exported
        ], shape
        assert normalize(read).model_dump(exclude={"spans"}) == normalize(as_exported).model_dump(
            exclude={"spans"}
        ), shape


@pytest.mark.parametrize("name", ["rag", "dropped"])
def test_removing_any_record_of_an_mlflow_export_leaves_the_verdict_or_makes_it_unconfirmed(
    name: str,
) -> None:
    spans = _spans(_export(name))
    trace_id = _trace_id(name)
    before = _verdict(spans, trace_id)
    moved = []
    for i, span in enumerate(spans):
        fewer = [spans[:i] + spans[i + 1 :]] if len(spans) > 1 else []
        for key in span.attributes:
            attrs = {k: v for k, v in span.attributes.items() if k != key}
            fewer.append([*spans[:i], span.model_copy(update={"attributes": attrs}), *spans[i + 1 :]])
        moved += [
            f"{span.name}: {before} -> {after}"
            for f in fewer
            if (after := _verdict(f, trace_id)) not in (before, "unconfirmed")
        ]
    assert moved == []


def test_mlflow_traces_one_a_line_are_each_read(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(_export(name)) + "\n" for name in ("rag", "dropped")))
    result = _run(tmp_path / "s.db", "collect", "file", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["spans"] == 6


def test_an_id_mlflow_would_not_write_is_refused_naming_the_span(tmp_path: Path) -> None:
    # A trace shared with its ids redacted by hand: the spans cannot be put back together.
    exported = _export("rag")
    for span in exported["data"]["spans"]:
        span["span_id"] = "<redacted>"
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(exported))
    result = _run(tmp_path / "s.db", "collect", "file", str(path))
    assert result.exit_code == 2, result.output
    assert "MLflow trace: span 0 ('answer')" in result.output
    assert "<redacted>" in result.output


def test_an_attribute_given_as_an_object_is_read_as_that_object() -> None:
    # MLflow writes each attribute as the JSON text of its value; one given as an object (a trace edited
    # by hand, another tool's dump) was re-wrapped as its Python repr ("{'region': 'CN', ...}"), text no
    # reader parses as JSON. It is an OTLP kvlistValue now, as the outside fixtures' objects are.
    exported = _export("rag")
    meta = {"region": "CN", "ids": [1, {"doc": "prepayment-policy"}], "note": None}
    exported["data"]["spans"][0]["attributes"]["app.meta"] = meta
    (span,) = [s for s in _spans(exported) if s.name == "answer"]
    assert span.attributes["app.meta"] == meta
