"""``ticket draft`` on a trace recorded outside this repository whose retriever returns texts without ids
(TruLens' LangChain run, tests/fixtures/outside/trulens): the document it used is the one triage identifies
by the manifest's content (DESIGN 5.4), not "no document the trace names"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.localize import test_outside_traces as outside
from tracejudge.schema import ManifestEntry
from tracejudge.store import open_store
from tracejudge.sweep import draft_ticket_for


def _manifest() -> list[ManifestEntry]:
    """The run's index, with the Table 2 chunk in two versions: v0 (until 2020) gave the big model 27.9."""
    entries: list[dict[str, Any]] = []
    for entry in outside._chain_manifest():
        if entry["doc_id"] == "attention/table-2":
            old = entry["content"].replace("BLEU score of 28.4", "BLEU score of 27.9")
            entries.append(entry | {"version": "v0", "effective_to": "2020-01-01T00:00:00Z", "content": old})
            entry = entry | {"effective_from": "2020-01-01T00:00:00Z"}
        entries.append(entry)
    return [ManifestEntry.model_validate(e) for e in entries]


def test_a_draft_names_the_document_the_trace_returned_as_text(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        store.put_spans(outside._spans(outside.TRULENS[1]))
        draft = draft_ticket_for(store, outside.CHAIN, _manifest(), "the BLEU score it gave is wrong")
    finally:
        store.close()
    ticket = draft.ticket
    assert [(m["doc_id"], m["version"]) for m in ticket["required"]] == [("attention/table-2", "v1")]
    assert [(m["doc_id"], m["version"]) for m in ticket["superseded"]] == [("attention/table-2", "v0")]
    assert "28.4" in ticket["required"][0]["clause"]
