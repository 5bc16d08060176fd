"""``tracejudge serve``: loopback by default, a token when exposed, read-only; the report and /metrics."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from tracejudge.cli import cli
from tracejudge.report import CSP, build_app
from tracejudge.schema import Localization, StageResult
from tracejudge.store import SqliteStore

TOKEN = "s3cret-token-value"


def _store(tmp_path: Path) -> SqliteStore:
    store = SqliteStore(tmp_path / "s.db")
    store.put_triage_result(
        Localization(
            ticket="EXP-1",
            trace_id="t1",
            task_time=None,
            verdict="unconfirmed",
            stages=(StageResult(name="indexed", status="unconfirmed", missing=("manifest",)),),
        )
    )
    return store


def test_refuses_to_listen_beyond_loopback_without_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRACEJUDGE_SERVE_TOKEN", raising=False)
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "serve", "--listen", "0.0.0.0:0"])
    assert result.exit_code == 2
    assert "without a token" in result.output


def test_bad_listen_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "serve", "--listen", "nowhere"])
    assert result.exit_code == 2
    assert "HOST:PORT" in result.output


def test_token_guards_every_page(tmp_path: Path) -> None:
    client = TestClient(build_app(_store(tmp_path), token=TOKEN))
    for path in ("/", "/metrics"):
        denied = client.get(path)
        assert denied.status_code == 401
        assert "Basic" in denied.headers["www-authenticate"]
        assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
    ok = client.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    assert ok.headers["content-security-policy"] == CSP
    assert "EXP-1" in ok.text
    basic = base64.b64encode(f"anyone:{TOKEN}".encode()).decode()
    metrics = client.get("/metrics", headers={"Authorization": f"Basic {basic}"})
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'tracejudge_triage_verdicts{verdict="unconfirmed",stage="indexed",cause="none"} 1' in metrics.text
    assert TOKEN not in metrics.text + ok.text


def test_read_only(tmp_path: Path) -> None:
    client = TestClient(build_app(_store(tmp_path)))
    assert client.get("/healthz").text == "ok"
    for method in ("POST", "PUT", "DELETE"):
        assert client.request(method, "/").status_code == 405
        assert client.request(method, "/metrics").status_code == 405


def test_serve_subprocess_answers_on_loopback(tmp_path: Path) -> None:
    _store(tmp_path).close()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracejudge",
            "--store",
            str(tmp_path / "s.db"),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        found: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if m := re.search(r"listening on (http://\S+)", line):
                    found.append(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        ready.wait(60)
        assert found, "serve did not start"
        assert found[0].startswith("http://127.0.0.1:")
        page = httpx.get(found[0] + "/", timeout=30)
        assert page.status_code == 200
        assert "tracejudge report" in page.text
        assert "tracejudge_info" in httpx.get(found[0] + "/metrics", timeout=30).text
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert proc.returncode in (0, -15)


def test_without_a_token_only_loopback_names_are_answered(tmp_path: Path) -> None:
    # A page on evil.example whose name is re-pointed at 127.0.0.1 (DNS rebinding) reaches the
    # server with its own Host header: without a token that must not read the traces.
    store = _store(tmp_path)
    for base in ("http://127.0.0.1:8765", "http://localhost:8765", "http://[::1]:8765", "http://localhost"):
        client = TestClient(build_app(store), base_url=base)
        assert client.get("/").status_code == 200, base
        assert client.get("/metrics").status_code == 200, base
    rebound = TestClient(build_app(store), base_url="http://evil.example:8765")
    for path in ("/", "/metrics"):
        denied = rebound.get(path)
        assert denied.status_code == 421
        assert "EXP-1" not in denied.text
        assert "--token" in denied.text
    for host in ("127.0.0.1.evil.example", "localhost.evil.example:8765", "[::2]:8765"):
        assert TestClient(build_app(store)).get("/", headers={"host": host}).status_code == 421, host
    # With a token the name does not matter: the token is the guard.
    named = TestClient(build_app(store, token=TOKEN), base_url="http://tracejudge.internal:8765")
    assert named.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
