"""Pull -> normalize -> localize -> write the verdict back -> pull and write again: no duplicates."""

from __future__ import annotations

import pytest

from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import Material, Ticket
from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import LangfuseServer, synthetic_trace
from tracejudge.write import TRIAGE_SCORE_NAME, LangfuseApi, LangfuseCredentials, write_triage
from tracejudge_collectors.langfuse import pull_langfuse, stored_scores

CLAUSE = "Prepayment shall not exceed 30,000 RMB"
TICKET = Ticket(
    ticket="EXP-311",
    feedback="the agent allowed a 50,000 RMB prepayment",
    required=(
        Material(doc_id="C-17/attachment", version="v2", clause=CLAUSE, facts={"prepayment_cap_rmb": 30000}),
    ),
    superseded=(Material(doc_id="C-17/attachment", version="v1", facts={"prepayment_cap_rmb": 50000}),),
)


def dropped_clause_trace(index: int) -> dict:
    t = synthetic_trace(index, answer="The prepayment cap is 50,000 RMB.")
    gen = t["observations"][2]
    gen["input"] = [
        {
            "role": "system",
            "content": "Answer from the context.\n\nContext:\n(attachment omitted for length)",
        },
        gen["input"][1],
    ]
    return t


@pytest.mark.parametrize("generation", ["v4", "v3"])
def test_pull_triage_write_back_twice_keeps_one_score_per_trace(generation, tmp_path, monkeypatch):
    srv = LangfuseServer(generation=generation).start()
    try:
        traces = [synthetic_trace(0), dropped_clause_trace(1), synthetic_trace(2)]
        for t in traces:
            srv.add_trace(t)
        monkeypatch.setenv("LANGFUSE_BASE_URL", srv.base_url)
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", srv.public_key)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", srv.secret_key)
        creds = LangfuseCredentials.from_env()
        store = SqliteStore(tmp_path / "t.db")

        def triage_all() -> dict[str, str]:
            with LangfuseApi(creds) as api:
                pull_langfuse(store, api)
            results = [localize(normalize(store.get_spans(t["id"])), TICKET) for t in traces]
            report = write_triage("langfuse", results)
            assert report.ok
            assert report.written == len(traces)
            return {r.trace_id: r.verdict for r in results}

        first = triage_all()
        assert first[traces[1]["id"]] == "dropped_in_context"
        assert first[traces[0]["id"]] == "no_fault"
        triage_scores = [s for s in srv.scores if s["name"] == TRIAGE_SCORE_NAME]
        assert len(triage_scores) == 3

        srv.add_trace(synthetic_trace(3))  # a new trace arrives; the old ones are not fetched again
        second = triage_all()
        assert second == first
        assert len([s for s in srv.scores if s["name"] == TRIAGE_SCORE_NAME]) == 3
        by_trace = {s["traceId"]: s for s in srv.scores}
        assert by_trace[traces[1]["id"]]["value"] == "dropped_in_context"
        assert "in_context: fail" in by_trace[traces[1]["id"]]["comment"]
        store.close()

        # A fresh pull sees the verdict as a score on the trace.
        fresh = SqliteStore(tmp_path / "fresh.db")
        with LangfuseApi(creds) as api:
            pull_langfuse(fresh, api)
        kept = stored_scores(fresh, traces[1]["id"]) or []
        assert [(s["name"], s["value"]) for s in kept] == [(TRIAGE_SCORE_NAME, "dropped_in_context")]
        fresh.close()
        assert srv.response_errors == []
        assert srv.request_errors == []
    finally:
        srv.stop()
