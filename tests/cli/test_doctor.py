"""``tracejudge doctor`` against the local Langfuse, Phoenix and OpenAI-compatible servers, the OTLP
metrics sink and real stores: each with a working and a broken setting (wrong key, wrong URL,
server down). No secret value may appear in the output."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from click.testing import CliRunner
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.otlp_metrics_sink import metrics_sink
from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tests.store.test_upgrade import _v1_store
from tracejudge._errors import StoreError
from tracejudge.cli import cli
from tracejudge.schema import RawSpan
from tracejudge.store import STORE_SCHEMA_VERSION, EncodedSpan, SqliteStore, open_store
from tracejudge.store._chunks import ENVELOPED, RAW
from tracejudge.testing.langfuse_server import LangfuseServer
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge.testing.phoenix_server import PhoenixServer
from tracejudge_collectors.otel import encode_protobuf

SECRETS = ("sk-lf-local-test", "phx-secret-key", "sk-judge-secret", "hunter2-db-password")

_CLEARED = (
    "LANGFUSE_BASE_URL",
    "LANGFUSE_HOST",
    "LANGFUSE_PUBLIC_KEY",
    "LANGFUSE_SECRET_KEY",
    "PHOENIX_COLLECTOR_ENDPOINT",
    "PHOENIX_BASE_URL",
    "PHOENIX_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "TRACEJUDGE_JUDGE_BASE_URL",
    "TRACEJUDGE_JUDGE_MODEL",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "TRACEJUDGE_OTLP_LISTEN",
    "TRACEJUDGE_OTLP_TOKEN",
    "TRACEJUDGE_STORE",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in _CLEARED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRACEJUDGE_OTLP_LISTEN", f"127.0.0.1:{_free_port()}")
    monkeypatch.chdir(tmp_path)


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _doctor(*args: str, store: str | None = None) -> tuple[int, dict[str, Any], str]:
    argv = ["--store", store] if store else []
    result = CliRunner().invoke(cli, [*argv, "doctor", "--timeout", "3", *args, "--json"])
    text = result.output
    for secret in SECRETS:
        assert secret not in text
    report = json.loads(result.stdout)
    return result.exit_code, {c["name"]: c for c in report["checks"]}, text


def test_nothing_configured_is_fine_and_says_how_to_configure_each(tmp_path: Path) -> None:
    code, checks, _ = _doctor()
    assert code == 0
    assert checks["store"]["status"] == "ok"
    assert not (tmp_path / ".tracejudge").exists()  # doctor creates no store
    assert checks["receiver"]["status"] == "ok"
    for name in ("langfuse", "phoenix", "judge", "otlp_metrics"):
        assert checks[name]["status"] == "not_configured"
        assert checks[name]["fix"].startswith(("to use", "export", "to push"))


# --- Langfuse -----------------------------------------------------------------------------------


@pytest.fixture
def langfuse_v4() -> Iterator[LangfuseServer]:
    with LangfuseServer(generation="v4") as server:
        yield server


def _langfuse_env(monkeypatch: pytest.MonkeyPatch, url: str, secret: str = "sk-lf-local-test") -> None:
    monkeypatch.setenv("LANGFUSE_BASE_URL", url)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-local-test")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", secret)


def test_langfuse_v4_credentials_project_and_generation(
    langfuse_v4: LangfuseServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _langfuse_env(monkeypatch, langfuse_v4.base_url)
    code, checks, _ = _doctor()
    assert code == 0
    lf = checks["langfuse"]
    assert lf["status"] == "ok"
    assert lf["facts"]["api_generation"] == "v4"
    assert lf["facts"]["project"] == langfuse_v4.project_id
    assert lf["facts"]["server_version"] == langfuse_v4.version
    # The server validates every request against the official OpenAPI spec (400 otherwise).
    seen = {(r.path, r.status) for r in langfuse_v4.requests}
    assert seen >= {("/projects", 200), ("/health", 200), ("/v2/observations", 200)}


def test_langfuse_v3_is_named_v3(monkeypatch: pytest.MonkeyPatch) -> None:
    with LangfuseServer(generation="v3") as server:
        _langfuse_env(monkeypatch, server.base_url)
        code, checks, _ = _doctor()
    assert code == 0
    assert checks["langfuse"]["facts"]["api_generation"] == "v3"


def test_langfuse_wrong_key(langfuse_v4: LangfuseServer, monkeypatch: pytest.MonkeyPatch) -> None:
    _langfuse_env(monkeypatch, langfuse_v4.base_url, secret="sk-judge-secret")
    code, checks, _ = _doctor()
    assert code == 1
    assert checks["langfuse"]["status"] == "fail"
    assert "refused" in checks["langfuse"]["detail"]
    assert "LANGFUSE_SECRET_KEY" in checks["langfuse"]["fix"]


def test_langfuse_wrong_url(langfuse_v4: LangfuseServer, monkeypatch: pytest.MonkeyPatch) -> None:
    _langfuse_env(monkeypatch, langfuse_v4.base_url + "/api/public")
    code, checks, _ = _doctor()
    assert code == 1
    assert "404" in checks["langfuse"]["detail"]
    assert "without /api/public" in checks["langfuse"]["fix"]


def test_langfuse_down(monkeypatch: pytest.MonkeyPatch) -> None:
    _langfuse_env(monkeypatch, f"http://127.0.0.1:{_free_port()}")
    code, checks, _ = _doctor()
    assert code == 1
    assert checks["langfuse"]["detail"] == "cannot reach the server"
    assert "LANGFUSE_BASE_URL" in checks["langfuse"]["fix"]


def test_langfuse_half_configured_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-local-test")
    code, checks, _ = _doctor()
    assert code == 1
    assert "LANGFUSE_SECRET_KEY" in checks["langfuse"]["detail"]


# --- Phoenix ------------------------------------------------------------------------------------


def test_phoenix_working_wrong_key_wrong_url_and_down(monkeypatch: pytest.MonkeyPatch) -> None:
    with PhoenixServer(api_key="phx-secret-key") as server:
        server.add_project("support-bot")
        monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", server.base_url)
        monkeypatch.setenv("PHOENIX_API_KEY", "phx-secret-key")
        code, checks, _ = _doctor()
        assert code == 0, checks["phoenix"]
        assert checks["phoenix"]["status"] == "ok"
        assert "support-bot" in checks["phoenix"]["facts"]["projects"]

        monkeypatch.setenv("PHOENIX_API_KEY", "sk-judge-secret")
        code, checks, _ = _doctor()
        assert code == 1
        assert "refused" in checks["phoenix"]["detail"]
        assert "PHOENIX_API_KEY" in checks["phoenix"]["fix"]

        monkeypatch.setenv("PHOENIX_API_KEY", "phx-secret-key")
        monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", server.base_url + "/phoenix")
        code, checks, _ = _doctor()
        assert code == 1
        assert "404" in checks["phoenix"]["detail"]
    monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", f"http://127.0.0.1:{_free_port()}")
    code, checks, _ = _doctor()
    assert code == 1
    assert checks["phoenix"]["detail"] == "cannot reach the server"


# --- the judge ----------------------------------------------------------------------------------


def test_judge_is_called_only_with_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedOpenAIServer([Rule(reply="OK")], api_key="sk-judge-secret") as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-judge-secret")
        code, checks, _ = _doctor()
        assert code == 0
        assert checks["judge"]["status"] == "skipped"
        assert model.requests == []

        code, checks, _ = _doctor("--judge", "--judge-model", "judge-mini")
        assert code == 0, checks["judge"]
        assert checks["judge"]["status"] == "ok"
        (req,) = model.requests
        assert req.body["max_tokens"] == 1
        assert req.body["model"] == "judge-mini"


def test_judge_wrong_key_wrong_url_no_model_and_down(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedOpenAIServer([Rule(reply="OK")], api_key="sk-judge-secret") as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "hunter2-db-password")
        code, checks, _ = _doctor("--judge", "--judge-model", "judge-mini")
        assert code == 1
        assert checks["judge"]["detail"].endswith("auth_error")
        assert "OPENAI_API_KEY" in checks["judge"]["fix"]

        monkeypatch.setenv("OPENAI_API_KEY", "sk-judge-secret")
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url.removesuffix("/v1") + "/nothing/v1")
        code, checks, _ = _doctor("--judge", "--judge-model", "judge-mini")
        assert code == 1
        assert checks["judge"]["detail"].endswith("bad_request")

        code, checks, _ = _doctor("--judge")
        assert code == 1
        assert "--judge-model" in checks["judge"]["fix"]
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{_free_port()}/v1")
    code, checks, _ = _doctor("--judge", "--judge-model", "judge-mini")
    assert code == 1
    assert checks["judge"]["detail"].endswith("connection_error")
    assert "OPENAI_BASE_URL" in checks["judge"]["fix"]


# --- OTLP metrics, the receiver's address, the store ----------------------------------------------


def test_otlp_metrics_endpoint_working_wrong_path_and_down(monkeypatch: pytest.MonkeyPatch) -> None:
    with metrics_sink() as (url, sink):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        code, checks, _ = _doctor()
        assert code == 0
        assert checks["otlp_metrics"]["status"] == "ok"
        assert sink.paths == ["/v1/metrics"]
    with LangfuseServer() as not_a_collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", not_a_collector.base_url)
        code, checks, _ = _doctor()
        assert code == 1
        assert "HTTP 404" in checks["otlp_metrics"]["detail"]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{_free_port()}")
    code, checks, _ = _doctor()
    assert code == 1
    assert "cannot reach" in checks["otlp_metrics"]["detail"]


def test_receiver_address_taken_by_something_else(monkeypatch: pytest.MonkeyPatch) -> None:
    with LangfuseServer() as other:
        monkeypatch.setenv("TRACEJUDGE_OTLP_LISTEN", other.base_url.removeprefix("http://"))
        code, checks, _ = _doctor()
    assert code == 1
    assert checks["receiver"]["status"] == "fail"
    assert "TRACEJUDGE_OTLP_LISTEN" in checks["receiver"]["fix"]


def test_store_schema_version_and_a_newer_store(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    SqliteStore(db).close()
    code, checks, _ = _doctor(store=f"sqlite:///{db}")
    assert code == 0
    assert checks["store"]["facts"]["schema_version"] == str(STORE_SCHEMA_VERSION)

    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE schema_info SET version = ?", (STORE_SCHEMA_VERSION + 1,))
    code, checks, _ = _doctor(store=f"sqlite:///{db}")
    assert code == 1
    assert "newer" in checks["store"]["detail"]
    assert "upgrade tracejudge" in checks["store"]["fix"]


def test_a_store_url_with_its_durability_option_names_the_same_store(tmp_path: Path) -> None:
    # sqlite:///PATH?synchronous=normal is the store at PATH: doctor read PATH?synchronous=normal as
    # the file's name and said an existing store was "not created yet".
    db = tmp_path / "t.db"
    store = SqliteStore(db)
    store.put_spans([RawSpan(trace_id="ab" * 16, span_id="cd" * 8, name="root")])
    store.close()
    for option in ("full", "normal"):
        code, checks, _ = _doctor(store=f"sqlite:///{db}?synchronous={option}")
        assert code == 0
        assert checks["store"]["facts"]["schema_version"] == str(STORE_SCHEMA_VERSION)
        assert checks["store"]["detail"] == f"schema {STORE_SCHEMA_VERSION}"
    code, checks, _ = _doctor(store=f"sqlite:///{db}?cache=shared")
    assert code == 1
    assert "unknown SQLite store option" in checks["store"]["detail"]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_wal_store_in_a_read_only_folder_is_read_and_left_as_it_is(tmp_path: Path) -> None:
    """A WAL-mode store's read through a plain read-only connection created empty -wal and -shm files
    beside it (and left them), and could not read it at all in a folder it cannot write to."""
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "t.db"
    store = SqliteStore(db)
    store.put_spans([RawSpan(trace_id="ab" * 16, span_id="cd" * 8, name="root")])
    store.close()  # the last connection's close checkpoints the WAL into the file and removes it
    before = _files(folder)
    assert set(before) == {"t.db"}
    folder.chmod(0o555)
    try:
        if os.geteuid() != 0:  # root writes regardless: there the unchanged folder carries the test
            with pytest.raises(PermissionError):
                (folder / "probe").touch()
        code, checks, _ = _doctor(store=f"sqlite:///{db}")
        assert code == 0, checks["store"]
        assert checks["store"]["detail"] == f"schema {STORE_SCHEMA_VERSION}"  # and a trace is there
        assert _files(folder) == before
        # An empty store (no traces) is told apart: the read is the file's, not a guess.
        (tmp_path / "empty").mkdir()
        SqliteStore(tmp_path / "empty" / "e.db").close()
        (tmp_path / "empty").chmod(0o555)
        code, checks, _ = _doctor(store=f"sqlite:///{tmp_path / 'empty' / 'e.db'}")
        assert code == 0, checks["store"]
        assert checks["store"]["detail"] == f"schema {STORE_SCHEMA_VERSION}; no traces yet"
        assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == ["e.db"]
    finally:
        folder.chmod(0o755)
        if (tmp_path / "empty").exists():
            (tmp_path / "empty").chmod(0o755)


def test_a_store_open_in_another_process_is_read_with_what_its_wal_holds(tmp_path: Path) -> None:
    """While a store is open its latest commits may be only in its -wal file: doctor reads them
    (through SQLite's locks, not the database file alone) and adds no file."""
    db = tmp_path / "store" / "t.db"
    store = SqliteStore(db)
    try:
        code, checks, _ = _doctor(store=f"sqlite:///{db}")
        assert checks["store"]["detail"] == f"schema {STORE_SCHEMA_VERSION}; no traces yet"
        store.put_spans([RawSpan(trace_id="ab" * 16, span_id="cd" * 8, name="root")])
        names = sorted(p.name for p in db.parent.iterdir())
        assert "t.db-wal" in names
        code, checks, _ = _doctor(store=f"sqlite:///{db}")
        assert code == 0, checks["store"]
        assert checks["store"]["detail"] == f"schema {STORE_SCHEMA_VERSION}"
        assert sorted(p.name for p in db.parent.iterdir()) == names
        assert [t.trace_id for t in store.list_traces()] == ["ab" * 16]  # the writer is unharmed
    finally:
        store.close()
    assert sorted(p.name for p in db.parent.iterdir()) == ["t.db"]  # its close still removes its WAL


def _store_contents(url: str, tmp_path: Path) -> object:
    """Everything a store holds, read without tracejudge: a SQLite store's files byte for byte, a
    PostgreSQL store's tables (columns, every row) and indexes."""
    if url.startswith("sqlite:///"):
        return {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir()) if p.is_file()}
    with psycopg.connect(url) as pg:
        tables = [r[0] for r in pg.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        return {
            "indexes": sorted(
                r[0] for r in pg.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = 'public'")
            ),
            **{
                t: (
                    [r[0] for r in pg.execute(f"SELECT * FROM {t} LIMIT 0").description or []],  # type: ignore[union-attr]
                    sorted(map(repr, pg.execute(f"SELECT * FROM {t}").fetchall())),
                )
                for t in sorted(tables)
            },
        }


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_schema_1_store_is_reported_and_left_as_it_is(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """doctor must not upgrade the store it checks: an upgraded store locks out older tracejudge
    processes still using it (README, At scale)."""
    folder = tmp_path / "store"
    folder.mkdir()
    url = _v1_store(kind, folder, request.getfixturevalue("postgres_url") if kind == "postgresql" else None)
    before = _store_contents(url, folder)
    code, checks, _ = _doctor(store=url)
    assert code == 0, checks["store"]
    store = checks["store"]
    assert store["status"] == "ok"
    assert store["facts"]["schema_version"] == "1"
    assert store["facts"]["tracejudge_schema"] == str(STORE_SCHEMA_VERSION)
    assert f"upgrades it to schema {STORE_SCHEMA_VERSION}" in store["detail"]
    assert "upgrade every process at once" in store["detail"]
    assert _store_contents(url, folder) == before
    # Shown in the table too.
    result = CliRunner().invoke(cli, ["--store", url, "doctor", "--timeout", "3"])
    assert "upgrade every process at once" in " ".join(result.output.split())
    assert _store_contents(url, folder) == before


def test_postgres_store_working_and_wrong_password(postgres_url: str) -> None:  # noqa: F811
    # A database of its own: the shared test database may carry another branch's store schema.
    url = postgres_url
    code, checks, _ = _doctor(store=url)
    assert code == 0, checks["store"]
    assert checks["store"]["facts"]["schema_version"] == str(STORE_SCHEMA_VERSION)
    scheme, rest = url.split("://", 1)
    host = rest.rsplit("@", 1)[-1]
    user = rest.split("@", 1)[0].split(":", 1)[0] if "@" in rest else "postgres"
    code, checks, _ = _doctor(store=f"{scheme}://{user}:hunter2-db-password@{host}")
    assert code == 1
    assert checks["store"]["status"] == "fail"
    assert "***" in checks["store"]["target"]


def test_a_url_carrying_a_password_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGFUSE_BASE_URL", "ftp://user:hunter2-db-password@127.0.0.1/?token=sk-judge-secret")
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-local-test")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-local-test")
    monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", "http://u:phx-secret-key@127.0.0.1:1/?k=sk-judge-secret")
    code, checks, _ = _doctor()  # _doctor asserts no secret value is in the output
    assert code == 1
    assert "***" in checks["langfuse"]["detail"]
    assert checks["phoenix"]["target"].startswith("http://u:***@")


def test_receiver_beyond_loopback_needs_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEJUDGE_OTLP_LISTEN", f"0.0.0.0:{_free_port()}")
    code, checks, _ = _doctor()
    assert code == 1
    assert "without a token" in checks["receiver"]["detail"]
    assert "TRACEJUDGE_OTLP_TOKEN" in checks["receiver"]["fix"]
    monkeypatch.setenv("TRACEJUDGE_OTLP_TOKEN", "sk-judge-secret")
    code, checks, _ = _doctor()
    assert code == 0, checks["receiver"]
    monkeypatch.setenv("TRACEJUDGE_OTLP_LISTEN", "nonsense")
    code, checks, _ = _doctor()
    assert code == 1
    assert checks["receiver"]["detail"] == "not HOST:PORT"


# --- --deep: every stored trace read back ----------------------------------------------------------

_JSON_TRACE, _OTLP_TRACE, _INTACT_TRACE = "a1" * 16, "b2" * 16, "c3" * 16


def _otlp_spans(trace_id: str, n: int) -> list[Any]:
    """``n`` spans of one trace as the receiver keeps them (their own OTLP bytes, in an envelope)."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "checkout"
    ss = rs.scope_spans.add()
    ss.scope.name = "openinference"
    for i in range(n):
        sp = ss.spans.add(trace_id=bytes.fromhex(trace_id), span_id=bytes([i + 1]) * 8, name=f"s{i}")
        sp.start_time_unix_nano, sp.end_time_unix_nano = 1_000 + i, 2_000 + i
        sp.attributes.add(key="input.value").value.string_value = f"step {i}"
    spans = encode_protobuf(req.SerializeToString()).spans
    assert all(isinstance(s, EncodedSpan) for s in spans)
    return spans


def _three_traces(url: str) -> None:
    store = open_store(url)
    try:
        store.put_spans(
            [
                RawSpan(trace_id=_JSON_TRACE, span_id=f"{i + 1:016x}", name=f"j{i}", source="langfuse")
                for i in range(3)
            ]
        )
        store.put_spans(_otlp_spans(_OTLP_TRACE, 2))
        store.put_spans([RawSpan(trace_id=_INTACT_TRACE, span_id="ee" * 8, name="root", source="langfuse")])
    finally:
        store.close()


def _store_of_three(tmp_path: Path) -> tuple[Path, str]:
    """A SQLite store of the three traces in a folder of its own (compared file by file): folder, URL."""
    folder = tmp_path / "store"
    folder.mkdir()
    url = f"sqlite:///{folder / 't.db'}"
    _three_traces(url)
    return folder, url


def test_deep_reads_every_trace_back_and_leaves_the_store_as_it_is(tmp_path: Path) -> None:
    folder, url = _store_of_three(tmp_path)
    before = _files(folder)
    code, checks, _ = _doctor(store=url)
    assert (code, checks["store_data"]["status"]) == (0, "skipped")  # only when asked: it reads everything
    assert "--deep" in checks["store_data"]["detail"]
    code, checks, _ = _doctor("--deep", store=url)
    assert code == 0, checks["store_data"]
    assert checks["store_data"]["status"] == "ok"
    assert checks["store_data"]["facts"] == {"traces": "3", "spans": "6", "unreadable": "0"}
    assert _files(folder) == before


def test_deep_with_no_store_creates_none(tmp_path: Path) -> None:
    code, checks, _ = _doctor("--deep", store=f"sqlite:///{tmp_path / 'none.db'}")
    assert (code, checks["store_data"]["status"]) == (0, "ok")
    assert checks["store_data"]["detail"] == "no traces stored yet"
    assert not (tmp_path / "none.db").exists()


def _damage_sqlite(db: Path) -> None:
    """The JSON trace's stored span not JSON, the OTLP trace's Span bytes not protobuf (raw chunks, as a
    damaged file or another program's write could leave them); the third trace untouched."""
    conn = sqlite3.connect(db)
    seq = "(SELECT seq FROM traces WHERE trace_id = ?)"
    head = orjson.dumps([[], [["0000000000000001", 1, "langfuse", 0, 2]]])
    conn.execute(
        f"UPDATE span_chunks SET data = ? WHERE trace_seq = {seq}",
        (bytes([RAW | ENVELOPED]) + len(head).to_bytes(4, "little") + head + b"{x", _JSON_TRACE),
    )
    head = orjson.dumps([[[0, 0]], [["0101010101010101", 1, "otlp", 2, 3]]])
    conn.execute(
        f"UPDATE span_chunks SET data = ? WHERE trace_seq = {seq}",
        (bytes([RAW | ENVELOPED]) + len(head).to_bytes(4, "little") + head + b"\xff\xff\xff", _OTLP_TRACE),
    )
    conn.commit()
    conn.close()


def test_deep_lists_the_traces_a_damaged_store_lost(tmp_path: Path) -> None:
    # A read of a damaged trace says to run `doctor --deep`; doctor said nothing of damage at all before.
    folder, url = _store_of_three(tmp_path)
    _damage_sqlite(folder / "t.db")
    store = open_store(url)
    try:
        with pytest.raises(StoreError) as caught:
            store.get_spans(_OTLP_TRACE)
        assert "tracejudge doctor --deep" in (caught.value.hint or "")
    finally:
        store.close()
    before = _files(folder)
    code, checks, text = _doctor("--deep", store=url)
    data = checks["store_data"]
    assert (code, data["status"]) == (1, "fail")
    assert data["facts"] == {
        "traces": "3",
        "spans": "1",
        "unreadable": "2",
        "unreadable_traces": f"{_JSON_TRACE},{_OTLP_TRACE}",
    }
    assert data["detail"].startswith("2 of 3 trace(s) do not read back: ")
    assert "does not parse" in data["detail"]
    assert "does not read back (" in data["detail"]
    assert "backup" in data["fix"]
    assert _INTACT_TRACE not in text
    assert _files(folder) == before
    # The table says so too, and the fix.
    result = CliRunner().invoke(cli, ["--store", url, "doctor", "--deep"])
    assert result.exit_code == 1
    assert "store_data: restore the store from a backup" in result.output


def test_deep_reports_what_sqlite_finds_wrong_with_the_file(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    _three_traces(f"sqlite:///{db}")
    conn = sqlite3.connect(db)
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'traces_start'").fetchone()
    conn.close()
    with db.open("r+b") as f:  # the index's page no longer a b-tree page
        f.seek((root - 1) * page)
        f.write(b"\x00" * 16)
    code, checks, _ = _doctor("--deep", store=f"sqlite:///{db}")
    data = checks["store_data"]
    assert (code, data["status"]) == (1, "fail")
    assert "SQLite's quick_check of the file: " in data["detail"]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_deep_reads_a_schema_1_store_as_it_is(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    url = _v1_store(kind, folder, request.getfixturevalue("postgres_url") if kind == "postgresql" else None)
    before = _store_contents(url, folder)
    code, checks, _ = _doctor("--deep", store=url)
    assert code == 0, checks["store_data"]
    assert int(checks["store_data"]["facts"]["traces"]) > 0
    assert checks["store_data"]["facts"]["unreadable"] == "0"
    assert _store_contents(url, folder) == before


def test_deep_lists_the_traces_a_damaged_postgresql_store_lost(postgres_url: str) -> None:  # noqa: F811
    _three_traces(postgres_url)
    code, checks, _ = _doctor("--deep", store=postgres_url)
    assert (code, checks["store_data"]["facts"]["spans"]) == (0, "6")
    with psycopg.connect(postgres_url, autocommit=True) as pg:
        pg.execute("UPDATE spans SET payload = '{x' WHERE trace_id = %s", (_JSON_TRACE,))
        pg.execute("UPDATE spans SET otlp = '\\xffffff'::bytea WHERE trace_id = %s", (_OTLP_TRACE,))
    code, checks, _ = _doctor("--deep", store=postgres_url)
    assert (code, checks["store_data"]["status"]) == (1, "fail")
    assert checks["store_data"]["facts"]["unreadable_traces"].split(",") == sorted(
        [_JSON_TRACE, _OTLP_TRACE]
    ) or (checks["store_data"]["facts"]["unreadable_traces"].split(",") == [_JSON_TRACE, _OTLP_TRACE])
    assert checks["store_data"]["facts"]["spans"] == "1"
