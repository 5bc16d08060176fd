"""A SQLite store written at schema 6 (each OTLP span in a chunk wrapped in its own resource and scope)
is upgraded to schema 7 by its version alone when it is opened: its chunks stay as they were and read
back exactly what that version read from it. Chunks stored from then on keep the resource and scope
their spans share once (``_chunks.ENVELOPED``); a trace whose chunks are of both layouts reads whole,
in order, and spans sent again are found in either.

The store is ``fixtures/store_v6.sql``, dumped from a store the schema-6 code wrote, and
``fixtures/store_v6_reads.json`` what that code read back from it (``fixtures/make_store_v6.py``).
Schema 6's code, given a schema-7 store, refuses it by name ("newer than this tracejudge knows").
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import lz4.block
import pytest

from tests.store.conftest import dumped, postgres_set_back, sqlite_from_dump, sqlite_rows, store_reads
from tracejudge.schema import RawSpan
from tracejudge.store import STORE_SCHEMA_VERSION, SqlStore, open_store
from tracejudge.store._chunks import ENVELOPED, RAW, chunk_span_ids, unpack_chunk
from tracejudge_collectors.otel import encode_protobuf

FIXTURES = Path(__file__).with_name("fixtures")
DUMP = (FIXTURES / "store_v6.sql").read_text(encoding="utf-8")
READS = json.loads((FIXTURES / "store_v6_reads.json").read_text(encoding="utf-8"))
TA = "a1a2a3a4a5a6a7a8a9aaabacadaeafa0"  # spans of two resources and three scopes
SPANS = sum(len(v) for v in READS["spans"].values())


def _made() -> tuple[ModuleType, ModuleType, ModuleType]:
    """make_store_v6 and the scripts it stores the requests of (they import each other by name)."""
    sys.path.insert(0, str(FIXTURES))
    try:
        return tuple(importlib.import_module(f"make_store_v{n}") for n in (3, 5, 6))  # type: ignore[return-value]
    finally:
        sys.path.remove(str(FIXTURES))


def _fixture_requests() -> list[bytes]:
    v3, v5, v6 = _made()
    return [v3._request(), v3._late_request(), v3._later_request(), v5._big_request(), v6.envelopes_request()]


@pytest.fixture
def v6_path(tmp_path: Path) -> Path:
    return sqlite_from_dump(tmp_path / "v6.db", DUMP)


def _reads(store: SqlStore) -> dict[str, Any]:
    return store_reads(store, READS["session_traces"])


def _open(path: Path) -> SqlStore:
    store = open_store(f"sqlite:///{path}")
    assert isinstance(store, SqlStore)
    return store


def _chunks(path: Path) -> list[tuple[int, bytes]]:
    return [
        (int(s), bytes(d))
        for s, d in sqlite_rows(path, "SELECT trace_seq, data FROM span_chunks ORDER BY id")
    ]


def test_the_fixture_is_a_schema_6_store_of_chunks_without_envelopes(v6_path: Path) -> None:
    assert sqlite_rows(v6_path, "SELECT version FROM schema_info") == [(6,)]
    chunks = _chunks(v6_path)
    assert chunks
    assert all(not data[0] & ENVELOPED for _, data in chunks)
    assert len(READS["spans"][TA]) == 6
    # TA's spans came in two resources and three scopes, each span wrapped in its own.
    assert {s["resource"]["service.name"] for s in READS["spans"][TA]} == {"checkout", "search"}
    assert {s["scope_name"] for s in READS["spans"][TA]} == {"openinference", "langchain"}


def test_opening_upgrades_by_the_version_and_reads_what_schema_6_read(v6_path: Path) -> None:
    before = _chunks(v6_path)
    store = _open(v6_path)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION == 7
        assert _reads(store) == READS
    finally:
        store.close()
    assert _chunks(v6_path) == before  # not rewritten


def test_new_chunks_keep_each_envelope_once_beside_the_old_ones_and_nothing_is_stored_twice(
    v6_path: Path,
) -> None:
    *_, v6 = _made()
    store = _open(v6_path)
    try:
        before = _chunks(v6_path)
        again = [s for body in _fixture_requests() for s in encode_protobuf(body).spans]
        assert len(again) == SPANS - 1  # all but the JSON span
        json_span = RawSpan.model_validate(
            next(s for t in READS["spans"].values() for s in t if s["source"] == "langfuse")
        )
        assert store.put_spans([*again, json_span]) == 0
        assert _chunks(v6_path) == before
        # Six late spans of TA (starts among the old ones), in the same resources and scopes.
        late = encode_protobuf(v6.envelopes_request(range(6, 12), start=1_790_000_499_996_500_000))
        assert store.put_spans(late.spans) == 6
        assert store.put_spans([*late.spans, *again]) == 0
        (seq, newest), *_ = reversed(_chunks(v6_path))
        assert newest[0] & ENVELOPED
        assert chunk_span_ids(newest) == [(0xA000 + i).to_bytes(8, "big").hex() for i in (6, 9, 7, 10, 8, 11)]
        # The chunk holds each of the three envelopes (resource and scope) once, not once per span;
        # each span reads back wrapped in its own, as it arrived.
        raw = newest[1:] if newest[0] == RAW | ENVELOPED else lz4.block.decompress(newest[1:])
        assert raw.count(b"service.name") == 3
        assert [r[3] for r in unpack_chunk(newest)] == [s.otlp for s in late.spans]
        read = store.get_spans(TA)
        assert len(read) == 12
        assert [(s.start_time_unix_nano, s.span_id) for s in read] == sorted(
            (s.start_time_unix_nano, s.span_id) for s in read
        )
        new_ids = {s.span_id for s in late.spans}
        assert dumped([s for s in read if s.span_id not in new_ids]) == READS["spans"][TA]
        assert [s.span_id for s in read].index("000000000000a006") == 3  # among the old spans
        assert {s.span_id: s.model_dump() for s in read if s.span_id in new_ids} == {
            s.span_id: s.decode().model_dump() for s in late.spans
        }
        assert next(t for t in store.list_traces() if t.trace_id == TA).span_count == 12
        assert {t: dumped(store.get_spans(t)) for t in READS["spans"] if t != TA} == {
            t: v for t, v in READS["spans"].items() if t != TA
        }
        assert seq == int(sqlite_rows(v6_path, f"SELECT seq FROM traces WHERE trace_id = '{TA}'")[0][0])
    finally:
        store.close()


def test_a_postgresql_store_at_6_is_upgraded_by_its_version(postgres_url: str) -> None:
    reads = postgres_set_back(postgres_url, _fixture_requests(), 6)
    store = open_store(postgres_url)
    assert isinstance(store, SqlStore)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert {t: dumped(store.get_spans(t)) for t in store.iter_trace_ids()} == reads
        assert reads[TA] == READS["spans"][TA]  # PostgreSQL reads what SQLite's schema 6 read
        assert store.put_spans([s for body in _fixture_requests() for s in encode_protobuf(body).spans]) == 0
    finally:
        store.close()
