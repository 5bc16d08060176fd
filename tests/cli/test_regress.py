"""``tracejudge regress``: exit codes, JSON, Langfuse feedback as a source, pushing twice to Langfuse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tests.store.damage import cut_chunks
from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import LangfuseServer, synthetic_trace
from tracejudge.write import LangfuseApi, LangfuseCredentials
from tracejudge_collectors.langfuse import pull_langfuse

from ..regress.conftest import balanced, sample, write_suite

EXAMPLE_SUITE = Path(__file__).resolve().parents[2] / "examples" / "procurement" / "suite"


def _run(tmp_path: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", f"sqlite:///{tmp_path / 't.db'}", *args])


def test_check_exits_1_on_violations_and_0_when_clean(tmp_path: Path) -> None:
    clean = _run(tmp_path, "regress", "check", str(balanced(tmp_path / "ok")), "--json")
    assert clean.exit_code == 0, clean.output
    assert json.loads(clean.output)["ok"] is True
    bad = write_suite(tmp_path / "bad", [sample("rs-0001"), sample("rs-0002", split="debug")])
    result = _run(tmp_path, "regress", "check", str(bad), "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert {v["rule"] for v in report["violations"]} == {"balance", "split_straddle"}
    text = _run(tmp_path, "regress", "check", str(bad))
    assert text.exit_code == 1
    assert "split_straddle" in text.output


def test_a_bad_sample_exits_2_naming_file_and_field(tmp_path: Path) -> None:
    bad = sample()
    bad["split"] = "holdout"
    folder = write_suite(tmp_path / "s", [bad])
    for command in (
        ["check", str(folder)],
        ["push", str(folder), "--dataset", "d"],
        ["run", str(folder), "--target", "x:y"],
    ):
        result = _run(tmp_path, "regress", *command)
        assert result.exit_code == 2, result.output
        assert "rs-0001.yaml:5: split:" in result.output


def test_run_needs_exactly_one_target(tmp_path: Path) -> None:
    folder = balanced(tmp_path / "s")
    neither = _run(tmp_path, "regress", "run", str(folder))
    both = _run(
        tmp_path, "regress", "run", str(folder), "--target", "a:b", "--endpoint", "http://127.0.0.1:1/"
    )
    assert neither.exit_code == both.exit_code == 2
    missing = _run(tmp_path, "regress", "run", str(folder), "--target", "no_such_module_xyz:f")
    assert missing.exit_code == 2
    assert "cannot import" in missing.output


def test_build_reports_tickets_without_stored_traces(tmp_path: Path) -> None:
    ticket = tmp_path / "t.yaml"
    ticket.write_text(
        yaml.safe_dump({"trace_id": "ab" * 16, "required": [{"doc_id": "D"}]}), encoding="utf-8"
    )
    result = _run(
        tmp_path, "regress", "build", "--ticket", str(ticket), "--out", str(tmp_path / "s"), "--json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["written"] == []
    assert "no spans stored" in report["skipped"][0]["reason"]
    bad_kind = tmp_path / "k.yaml"
    bad_kind.write_text(
        yaml.safe_dump({"trace_id": "ab" * 16, "kind": "oops", "required": [{"doc_id": "D"}]})
    )
    result = _run(tmp_path, "regress", "build", "--ticket", str(bad_kind), "--out", str(tmp_path / "s"))
    assert result.exit_code == 2
    assert "k.yaml: kind: 'oops'" in result.output


@pytest.fixture
def langfuse(monkeypatch: pytest.MonkeyPatch) -> Any:
    srv = LangfuseServer().start()
    monkeypatch.setenv("LANGFUSE_BASE_URL", srv.base_url)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", srv.public_key)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", srv.secret_key)
    try:
        yield srv
    finally:
        srv.stop()


def test_push_twice_changes_nothing(tmp_path: Path, langfuse: LangfuseServer) -> None:
    def items() -> list[dict[str, Any]]:
        return sorted(
            ({k: v for k, v in i.items() if k != "updatedAt"} for i in langfuse.dataset_items),
            key=lambda i: i["id"],
        )

    first = _run(
        tmp_path, "regress", "push", str(EXAMPLE_SUITE), "--dataset", "procurement-regress", "--json"
    )
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["written"] == 11
    after_first = items()
    assert len(after_first) == 11
    assert all(i["sourceTraceId"] and i["datasetName"] == "procurement-regress" for i in after_first)
    assert {i["metadata"]["kind"] for i in after_first} == {
        "failure",
        "success",
        "reasonable_rejection",
        "boundary",
    }
    assert all("expected" not in json.dumps(i["input"]) for i in after_first)
    second = _run(
        tmp_path, "regress", "push", str(EXAMPLE_SUITE), "--dataset", "procurement-regress", "--json"
    )
    assert second.exit_code == 0
    assert json.loads(second.output)["ids"] == json.loads(first.output)["ids"]
    assert items() == after_first
    assert len(langfuse.datasets) == 1


def test_build_from_langfuse_feedback_scores(tmp_path: Path, langfuse: LangfuseServer) -> None:
    good = synthetic_trace(0, answer="The cap is 30,000 RMB per C-17/attachment v2.")
    bad = synthetic_trace(1, answer="The cap is 50,000 RMB.")
    langfuse.add_trace(good)
    langfuse.add_trace(bad)
    langfuse.add_score({"traceId": good["id"], "name": "user-feedback", "value": 1, "dataType": "NUMERIC"})
    langfuse.add_score(
        {
            "traceId": bad["id"],
            "name": "user-feedback",
            "value": 0,
            "dataType": "NUMERIC",
            "comment": "wrong cap: v2 says 30,000",
        }
    )
    langfuse.add_score({"traceId": bad["id"], "name": "other", "value": 0, "dataType": "NUMERIC"})
    store = SqliteStore(tmp_path / "t.db")
    with LangfuseApi(LangfuseCredentials.from_env()) as api:
        pull_langfuse(store, api)
    store.close()
    out = tmp_path / "suite"
    result = _run(
        tmp_path, "regress", "build", "--langfuse-feedback", "user-feedback", "--out", str(out), "--json"
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["kinds"] == {"success": 1, "failure": 1}
    samples = {
        s["source"]["trace_id"]: s for s in (yaml.safe_load(p.read_text()) for p in out.glob("*.yaml"))
    }
    assert samples[good["id"]]["kind"] == "success"
    assert samples[good["id"]]["basis"]["required"][0]["doc_id"] == "C-17/attachment"
    assert samples[bad["id"]]["kind"] == "failure"
    assert samples[bad["id"]]["source"]["feedback"] == "wrong cap: v2 says 30,000"
    none = _run(
        tmp_path, "regress", "build", "--langfuse-feedback", "thumbs", "--out", str(tmp_path / "x"), "--json"
    )
    assert "no stored trace carries a score" in json.loads(none.output)["skipped"][0]["reason"]


@pytest.mark.parametrize("generation", ["v4", "v3"])
def test_build_from_annotation_queue_results_given_after_the_pull(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, generation: str
) -> None:
    srv = LangfuseServer(generation=generation).start()  # type: ignore[arg-type]
    monkeypatch.setenv("LANGFUSE_BASE_URL", srv.base_url)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", srv.public_key)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", srv.secret_key)
    try:
        good = synthetic_trace(0, answer="The cap is 30,000 RMB per C-17/attachment v2.")
        bad = synthetic_trace(1, answer="The cap is 50,000 RMB.")
        other = synthetic_trace(2)
        for t in (good, bad, other):
            srv.add_trace(t)
        pulled = _run(tmp_path, "collect", "langfuse", "--json")
        assert pulled.exit_code == 0, pulled.output

        # The traces go to a queue and reviewers score them after the pull.
        queue = srv.add_annotation_queue("answer review")
        for trace, value in ((good, 1), (bad, 0)):
            srv.add_score(
                {
                    "traceId": trace["id"],
                    "name": "correct",
                    "value": value,
                    "dataType": "BOOLEAN",
                    "source": "ANNOTATION",
                    "queueId": queue,
                    "authorUserId": "finance-ops",
                    "timestamp": "2026-03-02T10:00:00Z",
                }
            )
        srv.add_score(
            {
                "traceId": bad["id"],
                "name": "note",
                "value": "cited the superseded 50,000 cap; v2 says 30,000",
                "dataType": "TEXT",
                "source": "ANNOTATION",
                "queueId": queue,
                "authorUserId": "finance-ops",
            }
        )
        srv.add_score({"traceId": other["id"], "name": "correct", "value": 0, "dataType": "BOOLEAN"})

        stale = _run(
            tmp_path, "regress", "build", "--langfuse-queue", queue, "--out", str(tmp_path / "s0"), "--json"
        )
        assert stale.exit_code == 0, stale.output
        assert "collect langfuse" in json.loads(stale.output)["skipped"][0]["reason"]

        refreshed = _run(tmp_path, "collect", "langfuse", "--queue", queue, "--json")
        assert refreshed.exit_code == 0, refreshed.output
        scores = json.loads(refreshed.output)["scores"]
        assert (scores["seen"], scores["traces_updated"], scores["not_pulled"]) == (3, 2, 0)
        assert srv.secret_key not in refreshed.output

        out = tmp_path / "suite"
        built = _run(tmp_path, "regress", "build", "--langfuse-queue", queue, "--out", str(out), "--json")
        assert built.exit_code == 0, built.output
        assert json.loads(built.output)["kinds"] == {"success": 1, "failure": 1}
        samples = {
            s["source"]["trace_id"]: s for s in (yaml.safe_load(p.read_text()) for p in out.glob("*.yaml"))
        }
        assert set(samples) == {good["id"], bad["id"]}  # the score outside the queue is not a result
        failure, success = samples[bad["id"]], samples[good["id"]]
        assert failure["kind"] == "failure"
        assert failure["source"]["feedback"] == "cited the superseded 50,000 cap; v2 says 30,000"
        assert failure["source"]["verified_by"] == "finance-ops"
        assert failure["tags"]["annotation_queue"] == queue
        assert failure["expected"]["behavior"] == failure["source"]["feedback"]
        assert success["kind"] == "success"
        assert str(success["source"]["verified_at"]).startswith("2026-03-02")
        assert success["basis"]["required"][0]["doc_id"] == "C-17/attachment"
        check = _run(
            tmp_path,
            "regress",
            "build",
            "--langfuse-queue",
            queue,
            "--langfuse-feedback",
            "note",
            "--out",
            str(tmp_path / "notes"),
            "--json",
        )
        assert check.exit_code == 0, check.output
        assert json.loads(check.output)["kinds"] == {"failure": 1}
        (note,) = (yaml.safe_load(p.read_text()) for p in (tmp_path / "notes").glob("*.yaml"))
        assert note["source"]["feedback"] == "cited the superseded 50,000 cap; v2 says 30,000"
        assert srv.request_errors == []
        assert srv.response_errors == []
    finally:
        srv.stop()


def test_build_skips_a_trace_the_store_holds_damaged_and_builds_the_rest(
    tmp_path: Path, langfuse: LangfuseServer
) -> None:
    """A trace that no longer reads back is a skipped source naming the damage, not the end of the build:
    from feedback, from a ticket, and from the sweep."""
    good = synthetic_trace(0, answer="The cap is 30,000 RMB per C-17/attachment v2.")
    bad = synthetic_trace(1, answer="The cap is 50,000 RMB.")
    for trace, value in ((good, 1), (bad, 0)):
        langfuse.add_trace(trace)
        langfuse.add_score(
            {"traceId": trace["id"], "name": "user-feedback", "value": value, "dataType": "NUMERIC"}
        )
    store = SqliteStore(tmp_path / "t.db")
    with LangfuseApi(LangfuseCredentials.from_env()) as api:
        pull_langfuse(store, api)
    store.close()
    cut_chunks(tmp_path / "t.db", bad["id"])
    ticket = tmp_path / "bad.yaml"
    ticket.write_text(
        yaml.safe_dump({"trace_id": bad["id"], "required": [{"doc_id": "D"}]}), encoding="utf-8"
    )
    manifest = str(EXAMPLE_SUITE.parent / "manifest.jsonl")

    def build(*source: str) -> dict[str, Any]:
        out = tmp_path / f"suite{len(list(tmp_path.glob('suite*')))}"
        result = _run(tmp_path, "regress", "build", *source, "--out", str(out), "--json")
        assert result.exit_code == 0, result.output
        report: dict[str, Any] = json.loads(result.output)
        report["built"] = [yaml.safe_load(p.read_text()) for p in out.glob("*.yaml")]
        return report

    fed = build("--langfuse-feedback", "user-feedback")
    assert fed["kinds"] == {"success": 1}
    assert [b["source"]["trace_id"] for b in fed["built"]] == [good["id"]]
    ticketed = build("--ticket", str(ticket))
    swept = build("--sweep", "--manifest", manifest)
    assert swept["written"] == []
    for report, source in ((fed, bad["id"]), (ticketed, str(ticket)), (swept, bad["id"])):
        [skip] = report["skipped"]
        assert skip["source"] == source
        assert skip["reason"].startswith("store_damaged: ")
        assert "tracejudge doctor --deep" in skip["reason"]
    text = _run(tmp_path, "regress", "build", "--ticket", str(ticket), "--out", str(tmp_path / "t"))
    assert text.exit_code == 0, text.output
    assert "store_damaged" in text.output
