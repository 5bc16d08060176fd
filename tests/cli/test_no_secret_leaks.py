"""No command shows or keeps a credential, even when a backend (or a proxy) echoes the request's
``Authorization`` in its error body (issue 17.3): for each command that talks to Langfuse or Phoenix,
the local spec-validated server answers with the request headers echoed, and neither the secret key,
the Basic pair ``base64(public:secret)``, the base64 of the secret, nor the bearer token may appear in
stdout, stderr, log records, ``--json``, the report or the store file."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner, Result

from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import Fault, LangfuseServer
from tracejudge.testing.openai_server import ScriptedOpenAIServer
from tracejudge.testing.phoenix_server import Fault as PhoenixFault
from tracejudge.testing.phoenix_server import PhoenixServer, synthetic_spans

if TYPE_CHECKING:
    from tests.conftest import Restaurant

EXAMPLE_SUITE = Path(__file__).resolve().parents[2] / "examples" / "procurement" / "suite"
OPENAI_KEY = "sk-proj-judgekey0123456789abcdef"
PHOENIX_KEY = "phx-live-7f3e9a2c5b1d4e6f"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def forbidden(srv: LangfuseServer | None = None) -> dict[str, str]:
    """Every form of a credential that must not show: what it is -> the text."""
    out = {"openai key": OPENAI_KEY, "phoenix bearer token": PHOENIX_KEY}
    if srv is not None:
        out |= {
            "langfuse secret key": srv.secret_key,
            "basic pair base64(public:secret)": _b64(f"{srv.public_key}:{srv.secret_key}"),
            "base64(secret)": _b64(srv.secret_key),
        }
    return out


def assert_clean(secrets: dict[str, str], **texts: str) -> None:
    for where, text in texts.items():
        for what, value in secrets.items():
            assert value not in text, f"{what} leaked into {where}"


def store_bytes(folder: Path) -> str:
    """The store file (and its journal) as text, for a search."""
    return "".join(p.read_bytes().decode("latin-1") for p in sorted(folder.glob("t.db*")))


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.fixture
def langfuse(monkeypatch: pytest.MonkeyPatch) -> Iterator[LangfuseServer]:
    with LangfuseServer(generation="v4") as srv:
        monkeypatch.setenv("LANGFUSE_BASE_URL", srv.base_url)
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", srv.public_key)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", srv.secret_key)
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        yield srv


@pytest.fixture
def scored(tmp_path: Path, restaurant: Restaurant, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A store holding the restaurant traces, and the judge serving; yields the store URL."""
    store = SqliteStore(tmp_path / "t.db")
    store.put_spans(restaurant.spans)
    store.close()
    with ScriptedOpenAIServer(restaurant.rules) as judge:
        monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        yield f"sqlite:///{tmp_path / 't.db'}"


def test_the_echo_fault_does_echo_the_credentials(langfuse: LangfuseServer) -> None:
    # The leak tests below are only worth something if the server really sends the key back.
    import httpx

    langfuse.inject(Fault("echo", status=400))
    answer = httpx.get(
        f"{langfuse.base_url}/api/public/traces", auth=(langfuse.public_key, langfuse.secret_key)
    )
    assert answer.status_code == 400
    assert forbidden(langfuse)["basic pair base64(public:secret)"] in answer.json()["message"]


def test_collect_langfuse(langfuse: LangfuseServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    langfuse.inject(Fault("echo", times=None))
    caplog.set_level(logging.DEBUG)
    store = f"sqlite:///{tmp_path / 't.db'}"
    for extra in ([], ["--json"]):
        result = invoke(["--store", store, "collect", "langfuse", "--retries", "0", *extra])
        assert result.exit_code == 1, result.output
        assert "Langfuse failed on GET" in result.stderr
        assert "Basic [redacted]" in result.stderr  # what the backend said stays readable
        assert_clean(
            forbidden(langfuse),
            stdout=result.stdout,
            stderr=result.stderr,
            logs=caplog.text,
            store=store_bytes(tmp_path),
        )


def test_collect_phoenix(tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch) -> None:
    with PhoenixServer(api_key=PHOENIX_KEY) as srv:
        for span in synthetic_spans(0):
            srv.add_span("default", span)
        srv.inject(PhoenixFault("echo", times=None))
        monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", srv.base_url)
        monkeypatch.setenv("PHOENIX_API_KEY", PHOENIX_KEY)
        caplog.set_level(logging.DEBUG)
        store = f"sqlite:///{tmp_path / 't.db'}"
        for extra in ([], ["--json"]):
            result = invoke(["--store", store, "collect", "phoenix", "--retries", "0", *extra])
            assert result.exit_code == 1, result.output
            assert "Bearer [redacted]" in result.stderr
            assert_clean(
                forbidden(),
                stdout=result.stdout,
                stderr=result.stderr,
                logs=caplog.text,
                store=store_bytes(tmp_path),
            )


def test_regress_push(langfuse: LangfuseServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    langfuse.inject(Fault("echo", path="datasets", status=400, times=None))
    caplog.set_level(logging.DEBUG)
    store = f"sqlite:///{tmp_path / 't.db'}"
    for extra in ([], ["--json"]):
        result = invoke(["--store", store, "regress", "push", str(EXAMPLE_SUITE), "--dataset", "d", *extra])
        assert result.exit_code == 1, result.output
        if extra:
            report = json.loads(result.stdout)
            assert report["failed"]
            assert all("Basic [redacted]" in f["reason"] for f in report["failed"])
        assert_clean(
            forbidden(langfuse),
            stdout=result.stdout,
            stderr=result.stderr,
            logs=caplog.text,
            store=store_bytes(tmp_path),
        )


def test_score_write_back_langfuse(
    langfuse: LangfuseServer,
    scored: str,
    restaurant: Restaurant,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    langfuse.inject(Fault("echo", path="scores", status=400, times=None))
    caplog.set_level(logging.DEBUG)
    result = invoke(restaurant.score_args(scored, "--write-back", "langfuse", "--json"))
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.stdout)["write_back"]
    assert report["written"] == 0
    assert report["failed"]
    assert all("Basic [redacted]" in f["reason"] for f in report["failed"])
    again = invoke(restaurant.score_args(scored, "--write-back", "langfuse"))
    page = tmp_path / "report.html"
    shown = invoke(["--store", scored, "report", "--out", str(page)])
    assert shown.exit_code == 0, shown.output
    assert_clean(
        forbidden(langfuse),
        stdout=result.stdout + again.stdout,
        stderr=result.stderr + again.stderr,
        logs=caplog.text,
        report=page.read_text(),
        store=store_bytes(tmp_path),
    )


def test_calibrate_sample(
    langfuse: LangfuseServer,
    scored: str,
    restaurant: Restaurant,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert invoke(restaurant.score_args(scored)).exit_code == 0
    queue = langfuse.add_annotation_queue("judge-calibration")
    langfuse.inject(Fault("echo", path="annotation-queues", status=400, times=None))
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "to-label.jsonl"
    for extra in ([], ["--json"]):
        result = invoke(
            [
                "--store",
                scored,
                "calibrate",
                "sample",
                "--n",
                "4",
                "--out",
                str(out),
                "--queue",
                queue,
                *extra,
            ]
        )
        assert result.exit_code != 0, result.output
        assert "Basic [redacted]" in result.stderr
        assert_clean(
            forbidden(langfuse),
            stdout=result.stdout,
            stderr=result.stderr,
            logs=caplog.text,
            out=out.read_text() if out.exists() else "",
            store=store_bytes(tmp_path),
        )


def test_triage_write_back_langfuse(
    langfuse: LangfuseServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    example = EXAMPLE_SUITE.parent
    store = f"sqlite:///{tmp_path / 't.db'}"
    demo = invoke(["--store", store, "demo", "--json"])  # the procurement traces, stored
    assert demo.exit_code == 0, demo.output
    langfuse.inject(Fault("echo", path="scores", status=400, times=None))
    caplog.set_level(logging.DEBUG)
    tickets = example / "tickets"
    result = invoke(
        ["--store", store, "triage", "--ticket", str(tickets), "--write-back", "langfuse", "--json"]
    )
    assert result.exit_code == 1, result.output
    failed = json.loads(result.stdout)["write_back"]["failed"]
    assert failed
    assert all("Basic [redacted]" in f["reason"] for f in failed)
    page = tmp_path / "report.html"
    assert invoke(["--store", store, "report", "--out", str(page)]).exit_code == 0
    assert_clean(
        forbidden(langfuse),
        stdout=result.stdout,
        stderr=result.stderr,
        logs=caplog.text,
        report=page.read_text(),
        store=store_bytes(tmp_path),
    )
