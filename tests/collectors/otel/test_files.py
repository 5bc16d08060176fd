"""``tracejudge collect file`` and ``read_otlp_file``: protobuf, OTLP/JSON, JSON lines, gzip, truncation."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from google.protobuf import json_format

from tracejudge._errors import InputError
from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge_collectors.otel import read_otlp_file

TRACE_HEX = "4bf92f3577b34da6a3ce929d0e0e4736"


def otlp_json(req: Any) -> str:
    doc = json_format.MessageToDict(req, use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in sp:
                        sp[key] = base64.b64decode(sp[key]).hex()
    return json.dumps(doc)


@pytest.fixture
def pb(make_request: Callable[..., Any], good_span: Callable[..., Any]) -> Callable[..., bytes]:
    def make(*ids: int, **extra: Any) -> bytes:
        return make_request([good_span(i, **extra) for i in ids]).SerializeToString()

    return make


@pytest.fixture
def js(make_request: Callable[..., Any], good_span: Callable[..., Any]) -> Callable[..., str]:
    def make(*ids: int) -> str:
        return otlp_json(make_request([good_span(i) for i in ids]))

    return make


def run(store_path: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", f"sqlite:///{store_path}", "collect", "file", *args])


def span_numbers(store: SqliteStore) -> list[int]:
    return sorted(int(s.span_id, 16) for s in store.get_spans(TRACE_HEX))


def test_every_format_in_a_folder(
    tmp_path: Path, store_path: Path, store: SqliteStore, pb: Callable[..., bytes], js: Callable[..., str]
) -> None:
    folder = tmp_path / "exports"
    (folder / "nested").mkdir(parents=True)
    (folder / "a.pb").write_bytes(pb(1, 2))
    (folder / "b.pb.gz").write_bytes(gzip.compress(pb(3)))
    (folder / "c.json").write_text(js(4))
    bad = json.loads(js(6))
    bad["resourceSpans"][0]["scopeSpans"][0]["spans"].append({"traceId": "00" * 16, "spanId": "11" * 8})
    (folder / "d.jsonl").write_text(js(5) + "\n\n" + json.dumps(bad) + "\n")
    (folder / "nested" / "e.jsonl.gz").write_bytes(gzip.compress((js(7) + "\n" + js(8) + "\n").encode()))
    # The Collector's file exporter in proto format: 4-byte big-endian length before each message.
    frames = b"".join(len(m).to_bytes(4, "big") + m for m in (pb(9), pb(10)))
    (folder / "nested" / "f.binpb").write_bytes(frames)
    (folder / "g.json").write_text(js(11) + "\n" + js(12) + "\n")  # JSON lines in a .json file
    (folder / "README.md").write_text("not a trace")

    result = run(store_path, str(folder), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["spans"], summary["new"], summary["rejected"], summary["failed"]) == (12, 12, 1, 0)
    per_file = {Path(f["path"]).name: (f["spans"], f["rejected"]) for f in summary["files"]}
    assert per_file == {
        "a.pb": (2, 0),
        "b.pb.gz": (1, 0),
        "c.json": (1, 0),
        "d.jsonl": (2, 1),
        "g.json": (2, 0),
        "e.jsonl.gz": (2, 0),
        "f.binpb": (2, 0),
    }
    assert "all zero" in next(f for f in summary["files"] if f["path"].endswith("d.jsonl"))["errors"][0]
    assert span_numbers(store) == list(range(1, 13))
    assert {s.source for s in store.get_spans(TRACE_HEX)} == {"file"}

    again = run(store_path, str(folder), "--json")
    assert json.loads(again.stdout)["new"] == 0
    assert span_numbers(store) == list(range(1, 13))


def test_table_output(
    tmp_path: Path, store_path: Path, pb: Callable[..., bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.otlp").write_bytes(pb(1, 2, 3))
    result = run(store_path, "x.otlp")
    assert result.exit_code == 0, result.output
    assert "x.otlp" in result.stdout
    assert "3 spans read, 3 new, 0 rejected, from 1 file(s)" in result.stdout


def test_truncated_protobuf_exits_2_and_keeps_the_other_files(
    tmp_path: Path, store_path: Path, store: SqliteStore, pb: Callable[..., bytes]
) -> None:
    (tmp_path / "good.pb").write_bytes(pb(1))
    body = pb(2, 3, 4)
    (tmp_path / "cut.pb").write_bytes(body[: len(body) // 2])
    result = run(store_path, str(tmp_path / "good.pb"), str(tmp_path / "cut.pb"))
    assert result.exit_code == 2
    assert "cut.pb" in result.stderr
    assert "truncated" in result.stderr
    assert span_numbers(store) == [1]


def test_truncated_jsonl_names_the_line_and_keeps_earlier_lines(
    tmp_path: Path, store_path: Path, store: SqliteStore, js: Callable[..., str]
) -> None:
    last = js(3)
    (tmp_path / "t.jsonl").write_text(js(1) + "\n" + js(2) + "\n" + last[: len(last) // 2])
    result = run(store_path, str(tmp_path / "t.jsonl"), "--json")
    assert result.exit_code == 2
    assert "t.jsonl, line 3" in result.stderr
    assert "fix or delete the line" in result.stderr
    summary = json.loads(result.stdout)
    assert (summary["spans"], summary["failed"]) == (2, 1)
    assert summary["files"][0]["failed"] is True
    assert span_numbers(store) == [1, 2]


def test_truncated_json_and_gzip(
    tmp_path: Path, store_path: Path, js: Callable[..., str], pb: Callable[..., bytes]
) -> None:
    text = js(1)
    (tmp_path / "t.json").write_text(text[:-5])
    packed = gzip.compress(pb(1))
    (tmp_path / "t.pb.gz").write_bytes(packed[: len(packed) - 10])
    result = run(store_path, str(tmp_path / "t.json"), str(tmp_path / "t.pb.gz"))
    assert result.exit_code == 2
    assert "t.json: the body is not valid JSON" in result.stderr
    assert "t.pb.gz is a truncated or corrupt gzip file" in result.stderr


def test_missing_path_exits_2(tmp_path: Path, store_path: Path) -> None:
    result = run(store_path, str(tmp_path / "nope.pb"))
    assert result.exit_code == 2
    assert "nope.pb does not exist" in result.stderr


def test_read_otlp_file_streams_spans(tmp_path: Path, js: Callable[..., str]) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(js(1, 2) + "\n" + js(3) + "\n")
    spans = list(read_otlp_file(path))
    assert [int(s.span_id, 16) for s in spans] == [1, 2, 3]
    assert {s.source for s in spans} == {"file"}


def test_read_otlp_file_errors_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        list(read_otlp_file(tmp_path / "missing.pb"))
    (tmp_path / "x.jsonl").write_text('{"resourceSpans": []}\n[\n')
    with pytest.raises(InputError, match=r"x\.jsonl, line 2"):
        list(read_otlp_file(tmp_path / "x.jsonl"))


def _span_rows(path: Path) -> list[tuple[Any, ...]]:
    """Every stored span, read from the store's chunks without tracejudge's reads: (trace id, span
    id, start, its JSON payload without the source, its OTLP bytes), the source (``file`` or ``otlp``,
    in the chunk and in a JSON payload) apart."""
    import sqlite3

    from tracejudge.store._chunks import unpack_chunk

    conn = sqlite3.connect(path)
    try:
        chunks = conn.execute(
            "SELECT t.trace_id, c.data FROM span_chunks c JOIN traces t ON t.seq = c.trace_seq"
        ).fetchall()
    finally:
        conn.close()
    kept = []
    for trace_id, data in chunks:
        for span_id, start, payload, otlp, source in unpack_chunk(data):
            doc = json.loads(payload) if payload else None
            if doc is not None:
                assert doc.pop("source") == source
            kept.append((trace_id, span_id, start, doc, otlp))
    return sorted(kept, key=lambda r: (r[0], r[1]))


@pytest.mark.parametrize("framed", [False, True], ids=["bare", "collector-framed"])
def test_a_protobuf_file_stores_the_rows_the_same_request_over_http_stores(
    framed: bool,
    make_request: Callable[..., Any],
    good_span: Callable[..., Any],
    tmp_path: Path,
) -> None:
    import httpx

    from tracejudge_collectors.otel import MAX_VALUE_CHARS, serve_in_thread

    # One span kept in its own OTLP bytes, one that needs a note (a value cut at the limit) and is
    # stored as JSON, one with an invalid parent id (rejected).
    body = make_request(
        [
            good_span(1),
            good_span(2, parent=1, attributes={"input.value": "x" * (MAX_VALUE_CHARS + 1)}),
            good_span(3, parent_span_id=b"\x01\x02"),
        ]
    ).SerializeToString()
    over_http = SqliteStore(tmp_path / "http.db")
    with serve_in_thread(over_http) as url:
        resp = httpx.post(
            f"{url}/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"}
        )
        assert resp.status_code == 200
    over_http.close()
    path = tmp_path / "req.pb"
    path.write_bytes(len(body).to_bytes(4, "big") + body if framed else body)
    from_file = tmp_path / "file.db"
    result = CliRunner().invoke(
        cli, ["--store", f"sqlite:///{from_file}", "collect", "file", str(path), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rejected"] == 1

    rows = _span_rows(from_file)
    assert rows == _span_rows(tmp_path / "http.db")
    assert [(r[1], r[3] is None, r[4] is not None) for r in rows] == [
        ("0000000000000001", True, True),  # in its own OTLP bytes
        ("0000000000000002", False, False),  # noted (truncated value): JSON
    ]
    store = SqliteStore(from_file)
    try:
        spans = store.get_spans(TRACE_HEX)
    finally:
        store.close()
    assert [s.source for s in spans] == ["file", "file"]
