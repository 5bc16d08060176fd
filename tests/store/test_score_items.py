"""Several items' results and judge replies written in one transaction, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from tracejudge.schema import ItemResult
from tracejudge.store import SqlStore

MakeStore = Callable[[], SqlStore]


def item(trace: str, verdict: str = "pass", run: str = "run-1") -> ItemResult:
    return ItemResult.model_validate(
        {"run_id": run, "trace_id": trace, "verdict": verdict, "scored_at": datetime(2026, 3, 1, tzinfo=UTC)}
    )


def test_items_and_replies_are_stored_together(make_store: MakeStore) -> None:
    store = make_store()
    store.put_cached_reply("k1", '{"text": "old"}')
    store.put_score_items(
        [item("a" * 32), item("b" * 32, "fail")], cached_replies={"k1": '{"text": "new"}', "k2": "{}"}
    )
    assert [(i.trace_id, i.verdict) for i in store.iter_score_items("run-1")] == [
        ("a" * 32, "pass"),
        ("b" * 32, "fail"),
    ]
    assert store.get_cached_reply("k1") == '{"text": "old"}'  # an existing entry is kept
    assert store.get_cached_reply("k2") == "{}"
    # A result written again replaces the first, as put_score_item does.
    store.put_score_items([item("a" * 32, "indeterminate")], cached_replies={})
    assert [i.verdict for i in store.iter_score_items("run-1")] == ["indeterminate", "fail"]


def test_a_failed_batch_writes_neither_items_nor_replies(make_store: MakeStore) -> None:
    store = make_store()

    class Boom(ItemResult):
        def model_dump_json(self, **_: object) -> str:  # type: ignore[override]
            raise RuntimeError("serializer failed mid-batch")

    boom = Boom.model_validate(item("c" * 32).model_dump())
    with pytest.raises(RuntimeError):
        store.put_score_items([item("a" * 32), boom], cached_replies={"k": "{}"})
    assert list(store.iter_score_items("run-1")) == []
    assert store.get_cached_reply("k") is None
    store.put_score_items([], cached_replies={})  # nothing to write is fine
