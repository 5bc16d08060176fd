"""A store written at schema 4, whose scored items carry no ``task_time``, is upgraded to schema 5 when
it is opened (the version only: the tables are as they were) and reads back exactly what that version
read from it; its runs still write back, through the lookup of each score's stored time, as they did.

The store is ``fixtures/store_v4.sql``, dumped from a store the schema-4 code wrote, and
``fixtures/store_v4_reads.json`` is what that code read back from it (``fixtures/make_store_v4.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.store.conftest import sqlite_from_dump
from tracejudge.runs import write_back
from tracejudge.schema import RunRecord
from tracejudge.store import STORE_SCHEMA_VERSION, SqlStore, open_store
from tracejudge.testing.langfuse_server import LangfuseServer
from tracejudge.write import LangfuseApi, LangfuseCredentials, LangfuseWriter

FIXTURES = Path(__file__).with_name("fixtures")
DUMP = (FIXTURES / "store_v4.sql").read_text(encoding="utf-8")
READS = json.loads((FIXTURES / "store_v4_reads.json").read_text(encoding="utf-8"))
RUN = READS["run"]["run_id"]


@pytest.fixture
def v4_path(tmp_path: Path) -> Path:
    return sqlite_from_dump(tmp_path / "v4.db", DUMP)


def _open(path: Path, *, upgrade: bool = True) -> SqlStore:
    store = open_store(f"sqlite:///{path}", upgrade=upgrade)
    assert isinstance(store, SqlStore)
    return store


def _reads(store: SqlStore) -> dict[str, Any]:
    run = store.get_run(RUN)
    assert run is not None
    items = [i.model_dump(mode="json") for i in store.iter_score_items(RUN)]
    # Items stored at schema 4 have no stamp: read as None, and otherwise as that version read them.
    assert [i.pop("task_time") for i in items] == [None] * len(items)
    # A run recorded before RunRecord.left_waiting reads 0 (no items left waiting), the rest as it read.
    dumped = run.model_dump(mode="json")
    assert dumped.pop("left_waiting") == 0
    return {
        "traces": [t.model_dump(mode="json") for t in store.list_traces()],
        "run": dumped,
        "items": items,
    }


def test_a_schema_4_store_is_upgraded_on_open_and_reads_as_before(v4_path: Path) -> None:
    store = _open(v4_path)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION == 7
        assert _reads(store) == READS
    finally:
        store.close()


def test_opened_for_reading_a_schema_4_store_stays_at_4(v4_path: Path) -> None:
    store = _open(v4_path, upgrade=False)
    try:
        assert store.schema_version() == 4
        assert _reads(store) == READS
    finally:
        store.close()
    store = _open(v4_path, upgrade=False)
    try:
        assert store.schema_version() == 4
    finally:
        store.close()


def test_a_postgresql_store_at_4_is_upgraded_and_reads_its_items(postgres_url: str) -> None:
    store = open_store(postgres_url)
    store.put_run(RunRecord.model_validate(READS["run"]))
    store.close()
    # The items as the schema-4 code stored them (no task_time), and the version it recorded.
    with psycopg.connect(postgres_url, autocommit=True) as pg:
        for item in READS["items"]:
            pg.execute(
                "INSERT INTO score_items (run_id, trace_id, verdict, payload) VALUES (%s, %s, %s, %s)",
                (item["run_id"], item["trace_id"], item["verdict"], json.dumps(item)),
            )
        pg.execute("UPDATE schema_info SET version = 4")
    store = open_store(postgres_url)
    assert isinstance(store, SqlStore)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION
        items = [i.model_dump(mode="json") for i in store.iter_score_items(RUN)]
        assert [i.pop("task_time") for i in items] == [None, None]
        assert items == READS["items"]
    finally:
        store.close()


def test_a_run_stored_at_schema_4_writes_back_through_the_lookup(v4_path: Path) -> None:
    store = _open(v4_path)
    try:
        run = store.get_run(RUN)
        items = list(store.iter_score_items(RUN))
    finally:
        store.close()
    assert run is not None
    with LangfuseServer() as srv:
        creds = LangfuseCredentials.model_validate(
            {"base_url": srv.base_url, "public_key": srv.public_key, "secret_key": srv.secret_key}
        )
        with LangfuseWriter(LangfuseApi(creds)) as w:
            first = write_back("langfuse", run, items, writer=w)
            stored = {s["id"]: s["timestamp"] for s in srv.scores}
            again = write_back("langfuse", run, items, writer=w)
        gets = [r for r in srv.requests if r.method == "GET" and r.path == "/v3/scores"]
        posts = [r for r in srv.requests if r.method == "POST" and r.path == "/scores"]
        assert srv.request_errors == []
    assert first.ok
    assert again == first
    # Unstamped, each score is looked up before it is sent (its stored time, none the first time:
    # then the time of writing), and the rerun sends the time it found, so it replaced each score.
    assert len(gets) == len(posts) == 2 * first.written
    assert len(srv.scores) == first.written
    assert {s["id"]: s["timestamp"] for s in srv.scores} == stored
    assert [p.body["timestamp"] for p in posts[first.written :]] == [
        stored[p.body["id"]] for p in posts[first.written :]
    ]
