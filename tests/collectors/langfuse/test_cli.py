"""``tracejudge collect langfuse`` end to end: options, JSON, errors, secrets, and a killed pull."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import Fault, LangfuseServer, synthetic_trace
from tracejudge_collectors.langfuse import parse_when


def env_for(server: LangfuseServer, **extra: str) -> dict[str, str]:
    return {
        "LANGFUSE_BASE_URL": server.base_url,
        "LANGFUSE_PUBLIC_KEY": server.public_key,
        "LANGFUSE_SECRET_KEY": server.secret_key,
        **extra,
    }


def run(args: list[str], env: dict[str, str | None]):
    return CliRunner().invoke(cli, args, env=env, catch_exceptions=False)


@pytest.fixture
def v4():
    srv = LangfuseServer(generation="v4").start()
    yield srv
    srv.stop()
    assert srv.response_errors == []


def test_cli_pulls_and_prints_json_without_the_secret(v4, tmp_path):
    for i in range(5):
        v4.add_trace(synthetic_trace(i))
    db = tmp_path / "t.db"
    result = run(
        ["--store", str(db), "collect", "langfuse", "--tag", "prod", "--name", "rag-answer", "--json"],
        env_for(v4),
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["generation"], report["fetched"], report["spans_new"]) == ("v4", 5, 20)
    assert v4.secret_key not in result.output
    again = run(["--store", str(db), "collect", "langfuse"], env_for(v4))
    assert "fetched 0, already stored 5" in again.stdout
    assert v4.secret_key not in again.output
    st = SqliteStore(db)
    try:
        assert len(st.list_traces()) == 5
        assert v4.secret_key not in json.dumps(
            [s.model_dump() for t in st.list_traces() for s in st.get_spans(t.trace_id)]
        )
    finally:
        st.close()


def test_legacy_host_variable_is_read(tmp_path):
    srv = LangfuseServer(generation="v3").start()
    try:
        srv.add_trace(synthetic_trace(0))
        env = env_for(srv, LANGFUSE_HOST=srv.base_url)
        env["LANGFUSE_BASE_URL"] = None  # type: ignore[assignment]
        result = run(["--store", str(tmp_path / "t.db"), "collect", "langfuse", "--json"], env)  # type: ignore[arg-type]
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["generation"] == "legacy"
    finally:
        srv.stop()


def test_missing_configuration_is_an_input_error(tmp_path):
    env = {
        "LANGFUSE_BASE_URL": None,
        "LANGFUSE_HOST": None,
        "LANGFUSE_PUBLIC_KEY": "pk",
        "LANGFUSE_SECRET_KEY": None,
    }
    result = run(["--store", str(tmp_path / "t.db"), "collect", "langfuse"], env)  # type: ignore[arg-type]
    assert result.exit_code == 2
    assert "LANGFUSE_BASE_URL" in result.output
    assert "LANGFUSE_SECRET_KEY" in result.output


def test_wrong_key_fails_cleanly_without_echoing_secrets(v4, tmp_path):
    secret = "sk-lf-THIS-MUST-NOT-LEAK-1234"
    result = run(
        ["--store", str(tmp_path / "t.db"), "collect", "langfuse"],
        env_for(v4, LANGFUSE_SECRET_KEY=secret),
    )
    assert result.exit_code == 1
    assert "401" in result.output
    assert "LANGFUSE_SECRET_KEY" in result.output
    assert secret not in result.output
    assert v4.secret_key not in result.output


def test_unreachable_server_error_has_no_secret(tmp_path):
    secret = "sk-lf-unreachable-secret-999"
    env = {
        "LANGFUSE_BASE_URL": "http://127.0.0.1:9",
        "LANGFUSE_PUBLIC_KEY": "pk-lf-x",
        "LANGFUSE_SECRET_KEY": secret,
    }
    result = run(["--store", str(tmp_path / "t.db"), "collect", "langfuse", "--retries", "1"], env)  # type: ignore[arg-type]
    assert result.exit_code == 1
    assert "could not be reached" in result.output
    assert secret not in result.output


def test_bad_time_is_an_input_error(v4, tmp_path):
    result = run(
        ["--store", str(tmp_path / "t.db"), "collect", "langfuse", "--from", "yesterday-ish"], env_for(v4)
    )
    assert result.exit_code == 2
    assert "--from" in result.output


def test_parse_when():
    now = datetime(2026, 3, 10, tzinfo=UTC)
    assert parse_when("2026-03-01", option="--from") == datetime(2026, 3, 1, tzinfo=UTC)
    assert parse_when("2026-03-01T09:30:00Z", option="--from") == datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    assert parse_when("2d", option="--from", now=now) == datetime(2026, 3, 8, tzinfo=UTC)
    assert parse_when(None, option="--from") is None


def test_killed_pull_resumes_and_holds_every_trace_once(tmp_path):
    srv = LangfuseServer(generation="v4").start()
    try:
        traces = [synthetic_trace(i) for i in range(30)]
        for t in traces:
            srv.add_trace(t)
        # After 12 trace fetches every further one hangs: the process is killed mid-pull.
        srv.inject(Fault("slow", path="observations", after=13, times=None, delay=30))
        db = tmp_path / "t.db"
        env = {**os.environ, **env_for(srv)}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracejudge",
                "--store",
                str(db),
                "collect",
                "langfuse",
                "--concurrency",
                "2",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        stored = 0
        while time.monotonic() < deadline and stored < 6:
            time.sleep(0.2)
            if db.exists():
                st = SqliteStore(db)
                stored = len(st.list_traces())
                st.close()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert 6 <= stored < 30
        srv.faults.clear()

        result = run(["--store", str(db), "collect", "langfuse", "--json"], env_for(srv))
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["fetched"] + report["skipped"] == 30
        st = SqliteStore(db)
        try:
            assert {t.trace_id: t.span_count for t in st.list_traces()} == {t["id"]: 4 for t in traces}
        finally:
            st.close()
        assert (
            json.loads(run(["--store", str(db), "collect", "langfuse", "--json"], env_for(srv)).stdout)[
                "fetched"
            ]
            == 0
        )
    finally:
        srv.stop()


def test_progress_bar_on_a_terminal_counts_up_to_the_limit(v4, tmp_path, monkeypatch):
    import io

    from rich.console import Console

    from tracejudge.cli import App
    from tracejudge_collectors.langfuse import langfuse_command

    for i in range(6):
        v4.add_trace(synthetic_trace(i))
    for key, value in env_for(v4).items():
        monkeypatch.setenv(key, value)
    db = tmp_path / "t.db"

    def pull(*args: str) -> tuple[str, str]:
        err = io.StringIO()
        app = App(store_url=f"sqlite:///{db}", err=Console(file=err, force_terminal=True, width=100))
        result = CliRunner().invoke(langfuse_command, list(args), obj=app, catch_exceptions=False)
        app.close()
        assert result.exit_code == 0, result.output
        return result.stdout, err.getvalue()

    out, bar = pull("--limit", "4")
    assert "pulling traces" in bar
    assert "4/4" in bar
    assert "fetched 4" in out
    for i in range(6, 8):
        v4.add_trace(synthetic_trace(i))
    # Six traces are stored already: the bar counts only what is fetched, up to the limit.
    out, bar = pull("--limit", "3")
    assert "3/3" in bar
    assert not any(f"{n}/3" in bar for n in range(4, 10))
    assert "fetched 3" in out
    out, bar = pull("--json")
    assert bar == ""  # no bar under --json
    assert json.loads(out)["fetched"] == 1


def test_the_secret_never_reaches_output_logs_or_the_store_file(v4, tmp_path, caplog):
    import base64
    import logging

    caplog.set_level(logging.DEBUG)
    for i in range(3):
        v4.add_trace(synthetic_trace(i))
    v4.add_score({"traceId": synthetic_trace(0)["id"], "name": "user-feedback", "value": 1})
    db = tmp_path / "t.db"
    outputs = [
        run(["--store", str(db), "collect", "langfuse", *args], env_for(v4)).output
        for args in ((), ("--feedback", "user-feedback", "--json"), ("--limit", "1"))
    ]
    basic = base64.b64encode(f"{v4.public_key}:{v4.secret_key}".encode()).decode()
    assert "langfuse" in caplog.text.lower()  # the logs were captured
    files = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("t.db"))
    assert b"user-feedback" in files
    for needle in (v4.secret_key, basic):
        assert needle not in caplog.text
        assert not any(needle in out for out in outputs)
        assert needle.encode() not in files


def test_cli_session_pulls_one_conversation_then_triage_reads_its_turns(v4, tmp_path):
    for i in range(23):
        v4.add_trace(synthetic_trace(i))
    db = tmp_path / "t.db"
    result = run(["--store", str(db), "collect", "langfuse", "--session", "session-5", "--json"], env_for(v4))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["fetched"] == 2
    shown = run(["--store", str(db), "traces", "show", "--session", "session-5", "--json"], {})
    assert shown.exit_code == 0, shown.output
    assert [t["trace_id"] for t in json.loads(shown.stdout)["turns"]] == [
        synthetic_trace(i)["id"] for i in (5, 16)
    ]
