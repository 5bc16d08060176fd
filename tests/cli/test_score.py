"""``tracejudge score`` on the restaurant example, against the scripted judge server."""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import load_module
from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "restaurant"


traces = load_module(EXAMPLE / "traces.py", "restaurant_traces")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAIServer]:
    rules = [Rule(reply=r["reply"], any_message=re.escape(r["match"])) for r in traces.judge_rules()]
    with ScriptedOpenAIServer(rules) as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-do-not-print")
        yield s


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    path = tmp_path / "t.db"
    store = SqliteStore(path)
    store.put_spans(traces.all_spans())
    store.close()
    return f"sqlite:///{path}"


def _score(store_url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli,
        [
            "--store",
            store_url,
            "score",
            "--rubric",
            str(EXAMPLE / "rubric.yaml"),
            "--manifest",
            str(EXAMPLE / "manifest.jsonl"),
            *args,
        ],
    )
    return result.exit_code, result.output


def _by_key(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    ids = {s.trace_id: s.key for s in traces.SCENARIOS}
    return {ids[i["trace_id"]]: i for i in data["items"]}


def test_battery_verdicts_per_item_criterion_and_category(
    server: ScriptedOpenAIServer, store_url: str
) -> None:
    code, out = _score(store_url, "--json")
    assert code == 0, out
    assert "sk-test-secret" not in out
    # Nor in the store: runs, items, replies and the cache keep no key.
    assert b"sk-test-secret" not in Path(store_url.removeprefix("sqlite:///")).read_bytes()
    data = json.loads(out)
    assert data["rubric"] == {"name": "restaurant-assistant", "version": "1"}
    items = _by_key(data)
    assert len(items) == len(traces.SCENARIOS)
    expected = {
        "greeting": "pass",
        "hours": "pass",
        "parking": "fail",
        "lasagna": "pass",
        "order-ok": "pass",
        "order-wrong-total": "fail",
        "workflow": "pass",
        "pay-ok": "pass",
        "pay-wrong-change": "fail",
        "handoff-ok": "pass",
        "handoff-missing": "fail",
        "peeked-payroll": "fail",
        "injection": "fail",
        "judge-glitch": "indeterminate",
    }
    assert {k: v["verdict"] for k, v in items.items()} == expected
    assert items["order-wrong-total"]["checks"]["totals"]["verdict"] == "fail"
    assert items["pay-wrong-change"]["checks"]["change_due"]["verdict"] == "fail"
    assert items["handoff-missing"]["checks"]["handoff_recorded"]["verdict"] == "fail"
    assert items["peeked-payroll"]["checks"]["within_permissions"]["verdict"] == "fail"
    # The unauthorized read fails although the judge scored the answer itself well.
    assert all(c["verdict"] == "pass" for c in items["peeked-payroll"]["criteria"].values())
    glitch = items["judge-glitch"]
    assert all(c["score"] is None for c in glitch["criteria"].values())
    assert glitch["replies"][0]["raw"] == "Great answer, I'd say 9 out of 10."
    summary = data["summary"]
    assert (summary["n"], summary["pass"], summary["fail"], summary["indeterminate"]) == (14, 7, 6, 1)
    assert summary["pass_rate"] == 0.5
    assert set(summary["criteria"]) == set(traces.CRITERIA)
    assert summary["categories"]["payment"]["pass"] == 1
    assert summary["checks"]["totals"]["n"] == 3
    assert summary["cost_usd"] > 0


def _seed_calibration(store_url: str) -> None:
    """A held-out calibration at kappa 0.8: the gate refuses without one (tests/cli/test_calibrate.py)."""
    from datetime import UTC, datetime

    from tracejudge.audit import agent_prompts
    from tracejudge.judge import load_rubric, prompt_template_hash, rubric_hash
    from tracejudge.normalize import normalize
    from tracejudge.schema import Agreement, CalibrationReport, StoredReport

    rubric = load_rubric(EXAMPLE / "rubric.yaml")
    assert rubric.judge is not None
    store = SqliteStore(store_url.removeprefix("sqlite:///"))
    prompts = agent_prompts(normalize(store.get_spans(t)) for t in store.iter_trace_ids())
    held = Agreement(n=40, kappa=0.8)
    report = CalibrationReport(
        **held.model_dump(),
        calibration_id="cal-seeded",
        created_at=datetime.now(UTC),
        rubric_name=rubric.name,
        rubric_version=str(rubric.version),
        rubric_hash=rubric_hash(rubric),
        prompt_hash=prompt_template_hash(rubric),
        judge_model=rubric.judge.model,
        agent_prompts=tuple(sorted(prompts)),
        evaluated_on="holdout",
        holdout=held,
    )
    store.put_report(
        StoredReport(
            report_id=report.calibration_id,
            kind="calibration",
            created_at=report.created_at,
            rubric_name=rubric.name,
            payload=report.model_dump(mode="json"),
        )
    )
    store.close()


def test_gate_exit_code_and_rerun_uses_cache(server: ScriptedOpenAIServer, store_url: str) -> None:
    _seed_calibration(store_url)
    code, _ = _score(store_url, "--gate", "0.9")
    assert code == 1
    calls = len(server.completion_requests())
    code, out = _score(store_url, "--gate", "0.5", "--json")
    assert code == 0
    data = json.loads(out)
    assert len(server.completion_requests()) == calls
    assert data["summary"]["cache_hits"] == 14
    assert data["previous_run_id"]
    assert data["gate"] == {
        "threshold": 0.5,
        "passed": True,
        "reason": "pass rate 50.0% (7 of 14, 1 indeterminate) is at or above 50.0%",
    }


def test_gate_messages_range_and_an_unfinished_run(server: ScriptedOpenAIServer, store_url: str) -> None:
    _seed_calibration(store_url)
    code, out = _score(store_url, "--gate", "0.9")
    assert code == 1
    assert "gate failed: pass rate 50.0% (7 of 14, 1 indeterminate) is under 90.0%" in " ".join(out.split())
    # A percentage where a fraction is meant is a usage error, not a gate that can never pass.
    code, out = _score(store_url, "--gate", "90")
    assert code == 2
    assert "fraction in [0, 1]" in out
    # A budget that stops the run leaves traces unscored: the gate cannot pass on what it did not see.
    code, out = _score(
        store_url, "--gate", "0", "--no-cache", "--concurrency", "1", "--budget-usd", "0.0005", "--json"
    )
    assert code == 1
    data = json.loads(out)
    assert data["status"] == "stopped_budget"
    assert data["summary"]["not_scored"] > 0
    assert data["gate"]["passed"] is False
    assert "selected traces not scored" in data["gate"]["reason"]


def test_trace_selection_and_limit(server: ScriptedOpenAIServer, store_url: str) -> None:
    one = traces.SCENARIOS[0].trace_id
    code, out = _score(store_url, "--trace", one, "--json")
    assert code == 0
    assert [i["trace_id"] for i in json.loads(out)["items"]] == [one]
    others = [s.trace_id for s in traces.SCENARIOS[1:]]
    short = next(n for n in range(8, 33) if not any(t.startswith(one[:n]) for t in others))
    code, out = _score(store_url, "--trace", one[:short].upper(), "--json")  # as `traces show` takes it
    assert code == 0
    assert [i["trace_id"] for i in json.loads(out)["items"]] == [one]
    assert json.loads(out)["items"][0]["verdict"] != "indeterminate"
    code, out = _score(store_url, "--limit", "3", "--json")
    assert len(json.loads(out)["items"]) == 3
    code, out = _score(store_url, "--sample", "1.5")
    assert code == 2


def test_a_trace_that_is_not_stored_is_an_input_error_before_any_run(
    server: ScriptedOpenAIServer, store_url: str
) -> None:
    one = traces.SCENARIOS[0].trace_id
    code, out = _score(store_url, "--trace", one, "--trace", "f" * 32, "--json")
    assert code == 2
    assert "no spans stored for trace " + "f" * 32 in out
    assert one not in out
    assert "collect it first" in out
    assert server.completion_requests() == []
    store = SqliteStore(Path(store_url.removeprefix("sqlite:///")))
    try:
        assert store.list_runs() == []
    finally:
        store.close()


def test_table_output_names_failures(server: ScriptedOpenAIServer, store_url: str) -> None:
    code, out = _score(store_url)
    assert code == 0
    assert "per criterion" in out
    assert "per category" in out
    assert "handoff_to_human not called" in out
    # Categories show latency and tokens beside pass rate, mean and range.
    category_table = out[out.index("per category") :]
    assert "p95 ms" in category_table
    assert "tokens" in category_table


def test_json_has_every_field_of_design_5_6(server: ScriptedOpenAIServer, store_url: str) -> None:
    code, out = _score(store_url, "--json")
    assert code == 0, out
    data = json.loads(out)
    assert {"run_id", "rubric", "items", "summary"} <= set(data)
    assert set(data["rubric"]) == {"name", "version"}
    assert {"n", "pass", "fail", "indeterminate", "pass_rate"} <= set(data["summary"])
    for item in data["items"]:
        assert {"trace_id", "verdict", "reason", "criteria", "checks"} <= set(item)
        assert item["verdict"] in ("pass", "fail", "indeterminate")
        assert set(item["criteria"]) == set(traces.CRITERIA)
        for c in item["criteria"].values():
            assert {"score", "reasoning", "verdict"} <= set(c)
            # A score is on the 0-10 scale or absent, never a silent zero for an unusable reply.
            assert c["score"] is None or 0 <= c["score"] <= 10
            assert (c["score"] is None) == (c["verdict"] == "indeterminate")
        for chk in item["checks"].values():
            assert chk["verdict"] in ("pass", "fail", "indeterminate")
        if item["verdict"] != "pass":
            assert item["reason"]
    # Provenance travels with the run.
    prov = data["provenance"]
    assert prov["rubric_name"] == "restaurant-assistant"
    assert prov["judge_model"] == "judge-model"
    assert prov["prompt_hash"]
    assert prov["tracejudge_version"]
    assert prov["temperature"] == 0


def test_json_items_are_the_stored_items_in_trace_id_order(
    server: ScriptedOpenAIServer, store_url: str
) -> None:
    # The printed items are the run's results as scored, not read back: the same as the store holds.
    from tracejudge.runs import item_json

    code, out = _score(store_url, "--json")
    assert code == 0, out
    printed = json.loads(out)
    store = SqliteStore(Path(store_url.removeprefix("sqlite:///")))
    try:
        stored = list(store.iter_score_items(printed["run_id"]))
    finally:
        store.close()
    assert len(stored) == printed["summary"]["n"] == len(traces.SCENARIOS)
    assert printed["items"] == json.loads(json.dumps([item_json(i) for i in stored]))
    ids = [i["trace_id"] for i in printed["items"]]
    assert ids == sorted(ids)
    assert {i["verdict"] for i in printed["items"]} == {"pass", "fail", "indeterminate"}


def test_json_is_the_text_print_json_prints_for_the_outcome(
    server: ScriptedOpenAIServer, store_url: str
) -> None:
    # The items are rendered while the calls are out, the rest after the run: the text is what
    # print_json prints for the whole outcome (rebuilt here from the store), byte for byte.
    import contextlib
    import io

    from tracejudge.cli import print_json
    from tracejudge.runs import ScoreOutcome

    code, out = _score(store_url, "--json")
    assert code == 0, out
    run_id = json.loads(out)["run_id"]
    store = SqliteStore(Path(store_url.removeprefix("sqlite:///")))
    try:
        run = store.get_run(run_id)
        stored = tuple(store.iter_score_items(run_id))
    finally:
        store.close()
    assert run is not None
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        # Nothing waits for its trace to arrive (a local run says so too, as a shared run does).
        print_json(ScoreOutcome(run=run, items=stored, waiting=0).json())
    assert out == buf.getvalue()


def test_the_command_leaves_the_garbage_collector_as_it_found_it(
    server: ScriptedOpenAIServer, store_url: str
) -> None:
    # The run freezes start-up out of collections and raises the thresholds (cli._gc); a process that
    # embeds the CLI gets its collector back.
    gc.unfreeze()  # as in a fresh process (main() freezes at its end, and tests may call it)
    before = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
    code, out = _score(store_url, "--json", "--limit", "3")
    assert code == 0, out
    assert (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()) == before


def test_a_run_imports_only_what_scoring_uses(server: ScriptedOpenAIServer, store_url: str) -> None:
    # In a fresh interpreter, as a user runs it: what start-up imports comes before the first judge
    # call. Neither the records of audit, regress and sweep nor openai's ~470 type modules are used.
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from tracejudge.cli import cli\n"
        "try:\n"
        "    cli.main(sys.argv[1:], prog_name='tracejudge', standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print()\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('tracejudge.schema.', 'openai')))))\n"
    )
    args = ["--store", store_url, "score", "--rubric", str(EXAMPLE / "rubric.yaml"), "--json"]
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True)
    *shown, modules = out.stdout.strip().splitlines()
    assert json.loads("\n".join(shown))["summary"]["judge_calls"] > 0
    loaded = set(modules.split())
    assert "tracejudge.schema._score" in loaded
    assert not loaded & {"tracejudge.schema._audit", "tracejudge.schema._regress", "tracejudge.schema._sweep"}
    assert "openai" in loaded
    assert "openai.types.responses.response" not in loaded


def test_bad_rubric_is_exit_2_naming_the_line(tmp_path: Path, store_url: str) -> None:
    bad = tmp_path / "r.yaml"
    bad.write_text("name: x\nversion: 1\ncriteria:\n  - {name: a, description: d, threshold: 12}\n")
    result = CliRunner().invoke(cli, ["--store", store_url, "score", "--rubric", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:4" in result.output


def test_no_judge_endpoint_is_an_input_error_before_any_run(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, out = _score(store_url)
    assert code == 2
    assert "OPENAI_API_KEY is not set" in out
    assert "OPENAI_BASE_URL" in out
    assert "Traceback" not in out
    store = SqliteStore(store_url.removeprefix("sqlite:///"))
    assert store.list_runs() == []
    store.close()


def test_from_to_window_and_the_deprecated_since_until(server: ScriptedOpenAIServer, store_url: str) -> None:
    def run(*args: str) -> Any:
        return CliRunner().invoke(
            cli, ["--store", store_url, "score", "--rubric", str(EXAMPLE / "rubric.yaml"), *args, "--json"]
        )

    # The restaurant traces start 10 s apart from 14:13:20; [14:14:00, 14:14:30) holds three of them.
    window = ("2026-09-21T14:14:00", "2026-09-21T14:14:30")
    new = run("--from", window[0], "--to", window[1])
    assert new.exit_code == 0, new.output
    data = json.loads(new.stdout)
    assert len(data["items"]) == 3
    assert data["selection"] == {"since": "2026-09-21T14:14:00+00:00", "until": "2026-09-21T14:14:30+00:00"}
    assert "deprecated" not in new.stderr
    # The old spellings still work (scripts keep running) and say what to use instead.
    old = run("--since", window[0], "--until", window[1])
    assert old.exit_code == 0, old.output
    assert {i["trace_id"] for i in json.loads(old.stdout)["items"]} == {i["trace_id"] for i in data["items"]}
    assert "--since is deprecated; use --from" in old.stderr
    assert "--until is deprecated; use --to" in old.stderr
    both = run("--since", window[0], "--from", window[0])
    assert both.exit_code == 2
    assert "give --from only" in both.output
    # Hidden from --help: one spelling is documented.
    shown = CliRunner().invoke(cli, ["score", "--help"]).output
    assert "--from" in shown
    assert "--to" in shown
    assert "--since" not in shown
    assert "--until" not in shown


def test_the_library_call_returns_what_the_command_prints(
    server: ScriptedOpenAIServer, store_url: str
) -> None:
    from tracejudge.judge import load_rubric
    from tracejudge.runs import ScoreOptions, score_traces

    code, out = _score(store_url, "--limit", "4", "--json")
    assert code == 0, out
    printed = json.loads(out)
    store = SqliteStore(Path(store_url.removeprefix("sqlite:///")))
    try:
        got = score_traces(
            store,
            load_rubric(EXAMPLE / "rubric.yaml"),
            limit=4,
            manifest_path=EXAMPLE / "manifest.jsonl",
            options=ScoreOptions(),
        ).json()
    finally:
        store.close()
    # A second run of the same selection: its own id, the first as previous run, every reply cached.
    assert got["previous_run_id"] == printed["run_id"]
    assert got["summary"]["cache_hits"] == got["summary"]["judge_calls"] + got["summary"]["cache_hits"]
    volatile = {"run_id", "previous_run_id", "provenance", "summary", "items"}
    assert {k: v for k, v in got.items() if k not in volatile} == {
        k: v for k, v in printed.items() if k not in volatile
    }
    assert [(i["trace_id"], i["verdict"], i["criteria"]) for i in got["items"]] == [
        (i["trace_id"], i["verdict"], i["criteria"]) for i in printed["items"]
    ]
