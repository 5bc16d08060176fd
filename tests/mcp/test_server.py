"""``tracejudge mcp`` with the SDK's own client, over stdio and streamable HTTP: every tool's result
equals the CLI's ``--json``; bad arguments are tool errors; the token rule; paths stay inside the
folders the server was given; long results are paged, never cut."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tracejudge.cli import cli
from tracejudge.mcp import McpOptions, Toolbox, build_server, run_http
from tracejudge.store import open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
RAG = "openai_agents_rag.pb"
IGNORED = "openai_agents_ignored.pb"

TICKET = """\
ticket: EXP-311
trace_id: {trace_id}
feedback: "Agent approved a 45,000 RMB prepayment; the cap is 30,000"
required:
  - doc_id: C-17/attachment
    version: v2
    clause: "Prepayment shall not exceed 30,000 RMB"
    facts: {{prepayment_cap_rmb: 30000}}
superseded:
  - doc_id: C-17/attachment
    version: v1
    facts: {{prepayment_cap_rmb: 50000}}
"""

MANIFEST = [
    {
        "doc_id": "C-17/attachment",
        "version": "v1",
        "effective_from": "2025-01-01T00:00:00Z",
        "effective_to": "2026-03-01T00:00:00Z",
        "indexed_at": "2025-01-02T00:00:00Z",
        "metadata": {"region": "CN"},
    },
    {
        "doc_id": "C-17/attachment",
        "version": "v2",
        "effective_from": "2026-03-01T00:00:00Z",
        "indexed_at": "2026-03-02T00:00:00Z",
        "metadata": {"region": "CN"},
        "content": "Attachment v2. Payment terms.\nPrepayment shall not exceed 30,000 RMB per order.",
    },
]


def _cli(store: str, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--store", store, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A working directory with a store holding two recorded traces, their tickets and a manifest."""
    monkeypatch.chdir(tmp_path)
    store = f"sqlite:///{tmp_path}/store.db"
    for name in (RAG, IGNORED):
        shutil.copy(FIXTURES / name, tmp_path / name)
    result = CliRunner().invoke(cli, ["--store", store, "collect", "file", RAG, IGNORED])
    assert result.exit_code == 0, result.output
    traces = _cli(store, "traces", "list", "--json")
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    ids = {}
    for row in traces:
        spans = open_store(store)
        try:
            names = {s.name for s in spans.get_spans(row["trace_id"])}
        finally:
            spans.close()
        ids[row["trace_id"]] = names
    (tmp_path / "manifest.jsonl").write_text("".join(json.dumps(e) + "\n" for e in MANIFEST), "utf-8")
    trace_ids = sorted(ids)
    for n, tid in enumerate(trace_ids):
        (tickets / f"EXP-31{n}.yaml").write_text(TICKET.format(trace_id=tid), "utf-8")
    return {"store": store, "dir": tmp_path, "trace_ids": trace_ids, "tickets": tickets}


def _structured(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    # The text content carries the same JSON.
    assert json.loads(result.content[0].text) == (data["result"] if set(data) == {"result"} else data)
    return data["result"] if set(data) == {"result"} else data


def _session(work: dict[str, Any], **opts: Any) -> Client:
    store = open_store(work["store"])
    roots = [work["dir"].resolve()]
    options = McpOptions(roots=roots, tickets=work["tickets"], **opts)
    toolbox = Toolbox(store, roots=roots, allow_write=options.allow_write)
    return Client(build_server(toolbox, options))


def _run(coro: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(coro())  # type: ignore[arg-type]


def test_every_tool_returns_the_clis_json(work: dict[str, Any]) -> None:
    store, tid = work["store"], work["trace_ids"][0]
    ticket_file = str(work["tickets"] / "EXP-310.yaml")
    suite_cli, suite_mcp = work["dir"] / "suite-cli", work["dir"] / "suite-mcp"

    async def go() -> dict[str, Any]:
        async with _session(work, allow_write=True) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"list_traces", "show_trace", "triage", "build_sample"} <= names
            return {
                "list": _structured(await c.call_tool("list_traces", {"limit": 10})),
                "show": _structured(await c.call_tool("show_trace", {"trace_id": tid})),
                "triage_file": _structured(
                    await c.call_tool("triage", {"ticket": ticket_file, "manifest": "manifest.jsonl"})
                ),
                "triage_text": _structured(
                    await c.call_tool(
                        "triage",
                        {
                            "ticket": TICKET.format(trace_id=tid),
                            "manifest": str(work["dir"] / "manifest.jsonl"),
                        },
                    )
                ),
                "build": _structured(
                    await c.call_tool(
                        "build_sample",
                        {"ticket": ticket_file, "manifest": "manifest.jsonl", "out": str(suite_mcp)},
                    )
                ),
            }

    got = _run(go)
    assert got["list"] == _cli(store, "traces", "list", "--limit", "10", "--json")
    assert got["show"] == _cli(store, "traces", "show", tid, "--json")
    cli_triage = _cli(store, "triage", "--ticket", ticket_file, "--manifest", "manifest.jsonl", "--json")
    assert got["triage_file"] == cli_triage
    assert got["triage_text"] == cli_triage
    assert cli_triage["verdict"] in {"no_fault", "ignored_by_model"}
    cli_build = _cli(
        store, "regress", "build", "--ticket", ticket_file, "--manifest", "manifest.jsonl",
        "--out", str(suite_cli), "--json",
    )  # fmt: skip
    # The same report but for the folder each was told to write into.
    assert json.loads(json.dumps(got["build"]).replace("suite-mcp", "suite-cli")) == cli_build
    assert cli_build["written"]
    assert sorted(p.name for p in suite_mcp.iterdir()) == sorted(p.name for p in suite_cli.iterdir())


def test_a_unique_trace_id_prefix_names_the_trace_as_in_traces_show(work: dict[str, Any]) -> None:
    store, tid = work["store"], work["trace_ids"][0]
    other = work["trace_ids"][1]
    common = next(i for i in range(32) if tid[i] != other[i])  # the shortest unique prefix is one longer
    prefix = tid[: max(common + 1, 8)].upper()
    manifest = [dict(e) for e in MANIFEST]  # drafting reads what changed: both versions need content
    manifest[0]["content"] = (
        "Attachment v1. Payment terms.\nPrepayment shall not exceed 50,000 RMB per order."
    )
    (work["dir"] / "swept.jsonl").write_text("".join(json.dumps(e) + "\n" for e in manifest), "utf-8")

    async def go() -> tuple[Any, Any, Any, Any]:
        async with _session(work) as c:
            shown = _structured(await c.call_tool("show_trace", {"trace_id": prefix}))
            triaged = _structured(
                await c.call_tool(
                    "triage",
                    {"ticket": TICKET.format(trace_id=tid), "manifest": "manifest.jsonl", "trace_id": prefix},
                )
            )
            drafted = _structured(
                await c.call_tool("draft_ticket", {"trace_id": prefix, "manifest": "swept.jsonl"})
            )
            empty = await c.call_tool("show_trace", {"trace_id": "  "})
            return shown, triaged, drafted, empty

    shown, triaged, drafted, empty = _run(go)
    assert shown == _cli(store, "traces", "show", tid, "--json")
    assert triaged["trace_id"] == tid
    assert drafted["trace_id"] == tid
    assert empty.is_error
    assert "trace_id is empty" in empty.content[0].text


def test_bad_arguments_are_tool_errors_that_say_what_to_fix(work: dict[str, Any], tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.yaml"
    outside.write_text(TICKET.format(trace_id=work["trace_ids"][0]), "utf-8")

    async def go() -> list[tuple[bool, str]]:
        async with _session(work) as c:
            calls = [
                ("show_trace", {"trace_id": "0" * 32}),
                ("triage", {"ticket": "required: [oops"}),
                ("triage", {"ticket": str(work["tickets"] / "EXP-310.yaml"), "manifest": "nope.jsonl"}),
                ("triage", {"ticket": str(outside)}),
                ("list_traces", {"from": "yesterday"}),
                ("build_sample", {"ticket": str(work["tickets"] / "EXP-310.yaml"), "out": "suite"}),
                ("show_trace", {"trace_id": work["trace_ids"][0], "cursor": "not-a-cursor"}),
                ("triage", {"ticket": str(work["tickets"] / "EXP-310.yaml"), "write_back": "langfuse"}),
            ]
            out = []
            for name, args in calls:
                r = await c.call_tool(name, args)
                out.append((r.is_error, r.content[0].text))
            # The server is still there after every error.
            assert _structured(await c.call_tool("list_traces", {}))
            return out

    results = _run(go)
    assert all(is_error for is_error, _ in results), results
    texts = [t for _, t in results]
    assert "no spans stored for trace" in texts[0]
    assert "list_traces" in texts[0]
    assert "<ticket argument>:1:" in texts[1]
    assert "broken YAML" in texts[1]
    assert "nope.jsonl" in texts[2]
    assert "outside the folders" in texts[3]
    assert "--root" in texts[3]
    assert "ISO 8601" in texts[4]
    assert "read-only" in texts[5]
    assert "--allow-write" in texts[5]
    assert "cursor" in texts[6]
    assert "read-only" in texts[7]
    assert not (work["dir"] / "suite").exists()


def test_long_results_are_paged_and_the_pages_join_to_the_whole(work: dict[str, Any]) -> None:
    tid = work["trace_ids"][0]
    store = open_store(work["store"])
    roots = [work["dir"].resolve()]
    server = build_server(Toolbox(store, roots=roots), McpOptions(roots=roots, page_chars=700))

    async def go() -> tuple[list[str], int]:
        async with Client(server) as c:
            texts: list[str] = []
            cursor = None
            while True:
                args: dict[str, Any] = {"trace_id": tid}
                if cursor is not None:
                    args["cursor"] = cursor
                r = await c.call_tool("show_trace", args)
                assert not r.is_error, r.content[0].text
                page = r.structured_content
                assert page is not None
                texts.append(page["text"])
                cursor = page["next_cursor"]
                if cursor is None:
                    return texts, page["pages"]

    texts, pages = _run(go)
    assert pages == len(texts) > 2
    assert json.loads("".join(texts)) == _cli(work["store"], "traces", "show", tid, "--json")


def test_resources_and_the_debug_prompt(work: dict[str, Any]) -> None:
    tid = work["trace_ids"][0]

    async def go() -> tuple[Any, Any, Any, Any]:
        async with _session(work) as c:
            listed = await c.list_resources()
            ticket = await c.read_resource("ticket://EXP-310")
            trace = await c.read_resource(f"trace://{tid}")
            prompt = await c.get_prompt("debug-wrong-answer", {"trace_id": tid})
            return listed, ticket, trace, prompt

    listed, ticket, trace, prompt = _run(go)
    assert {str(r.uri) for r in listed.resources} == {"ticket://EXP-310", "ticket://EXP-311"}
    assert ticket.contents[0].text == (work["tickets"] / "EXP-310.yaml").read_text("utf-8")
    assert json.loads(trace.contents[0].text) == _cli(work["store"], "traces", "show", tid, "--json")
    text = prompt.messages[0].content.text
    assert tid in text
    assert "show_trace" in text
    assert "triage" in text
    assert "missing" in text
    for verdict in ("not_indexed", "filtered", "not_retrieved", "dropped_in_context", "ignored_by_model"):
        assert verdict in text


def test_stdio_the_way_an_mcp_client_starts_it(work: dict[str, Any]) -> None:
    tid = work["trace_ids"][1]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tracejudge", "--store", work["store"], "mcp", "--tickets", str(work["tickets"])],
        cwd=str(work["dir"]),
    )

    async def go() -> tuple[Any, Any, bool]:
        async with Client(params) as c:
            listed = _structured(await c.call_tool("list_traces", {}))
            triaged = _structured(
                await c.call_tool("triage", {"ticket": "tickets/EXP-311.yaml", "manifest": "manifest.jsonl"})
            )
            refused = await c.call_tool("build_sample", {"ticket": "tickets/EXP-311.yaml", "out": "s"})
            return listed, triaged, refused.is_error

    listed, triaged, refused = _run(go)
    assert listed == _cli(work["store"], "traces", "list", "--json")
    assert triaged == _cli(
        work["store"], "triage", "--ticket", "tickets/EXP-311.yaml", "--manifest", "manifest.jsonl", "--json"
    )
    assert triaged["trace_id"] == tid
    assert refused


@pytest.fixture
def http_server(work: dict[str, Any]) -> Iterator[Callable[..., str]]:
    stops: list[tuple[threading.Event, threading.Thread]] = []

    def start(listen: str = "127.0.0.1:0", token: str | None = None) -> str:
        store = open_store(work["store"])
        roots = [work["dir"].resolve()]
        server = build_server(Toolbox(store, roots=roots), McpOptions(roots=roots))
        ready: list[str] = []
        got = threading.Event()
        stop = threading.Event()

        def on_ready(url: str) -> None:
            ready.append(url)
            got.set()

        thread = threading.Thread(
            target=run_http,
            args=(server, listen),
            kwargs={"token": token, "on_ready": on_ready, "stop": stop},
        )
        thread.start()
        stops.append((stop, thread))
        assert got.wait(30), "the MCP HTTP server did not start"
        return ready[0]

    yield start
    for stop, thread in stops:
        stop.set()
        thread.join(30)


def test_streamable_http_returns_the_same_json(work: dict[str, Any], http_server: Callable[..., str]) -> None:
    url = http_server()
    tid = work["trace_ids"][0]

    async def go() -> Any:
        async with Client(url) as c:
            return _structured(await c.call_tool("show_trace", {"trace_id": tid}))

    assert _run(go) == _cli(work["store"], "traces", "show", tid, "--json")


def test_http_token_rule(work: dict[str, Any], http_server: Callable[..., str]) -> None:
    # Without a token: only loopback names are answered (a rebound DNS name is refused).
    url = http_server()
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    rebound = httpx.post(url, json=body, headers={"Host": "evil.example:80"}, timeout=10)
    assert rebound.status_code == 421
    # With a token: every request must carry it; a wrong one is refused; the right one is served.
    tokened = http_server(token="s3cret-token")
    assert httpx.post(tokened, json=body, timeout=10).status_code == 401
    wrong = httpx.post(tokened, json=body, headers={"Authorization": "Bearer nope"}, timeout=10)
    assert wrong.status_code == 401
    assert "s3cret-token" not in wrong.text

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def go() -> Any:
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"}) as http,
            Client(streamable_http_client(tokened, http_client=http)) as c,
        ):
            return _structured(await c.call_tool("list_traces", {}))

    assert _run(go) == _cli(work["store"], "traces", "list", "--json")


def test_exposed_without_a_token_is_refused(work: dict[str, Any]) -> None:
    result = CliRunner().invoke(cli, ["--store", work["store"], "mcp", "--http", "0.0.0.0:0"])
    assert result.exit_code == 2
    assert "without a token" in result.output
    assert "--token" in result.output


RESTAURANT = Path(__file__).resolve().parents[2] / "examples" / "restaurant"


def _volatile_free(data: Any) -> Any:
    """A score run's JSON without what differs between two runs of the same items: ids and times."""
    if isinstance(data, dict):
        return {
            k: _volatile_free(v)
            for k, v in data.items()
            if k not in {"run_id", "started_at", "finished_at", "created_at", "duration_s"}
            and "latency" not in k
        }
    if isinstance(data, list):
        return [_volatile_free(v) for v in data]
    return data


def test_score_trace_returns_what_score_json_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    from tests.conftest import load_module
    from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer

    traces = load_module(RESTAURANT / "traces.py", "restaurant_traces_mcp")
    monkeypatch.chdir(tmp_path)
    store_url = f"sqlite:///{tmp_path}/t.db"
    store = open_store(store_url)
    store.put_spans(traces.all_spans())
    store.close()
    # The CLI scores an identical copy, so that neither run sees the other's cache or history.
    shutil.copy(tmp_path / "t.db", tmp_path / "t2.db")
    store = open_store(store_url)
    tid = next(s.trace_id for s in traces.SCENARIOS if s.key != "judge-glitch")
    rubric = str(RESTAURANT / "rubric.yaml")
    manifest = str(RESTAURANT / "manifest.jsonl")
    rules = [Rule(reply=r["reply"], any_message=re.escape(r["match"])) for r in traces.judge_rules()]
    with ScriptedOpenAIServer(rules) as judge:
        monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-do-not-print")
        roots = [tmp_path.resolve(), RESTAURANT]
        server = build_server(Toolbox(store, roots=roots), McpOptions(roots=roots))

        async def go() -> tuple[Any, Any, Any]:
            async with Client(server) as c:
                scored = _structured(
                    await c.call_tool(
                        "score_trace", {"trace_id": tid, "rubric": rubric, "manifest": manifest}
                    )
                )
                inline = _structured(
                    await c.call_tool(
                        "score_trace",
                        {
                            "trace_id": tid,
                            "rubric": (RESTAURANT / "rubric.yaml").read_text(),
                            "manifest": manifest,
                        },
                    )
                )
                broken = await c.call_tool(
                    "score_trace", {"trace_id": tid, "rubric": "name: x\ncriteria: [\n"}
                )
                return scored, inline, broken

        scored, inline, broken = _run(go)
        store.close()
        cli_json = _cli(
            f"sqlite:///{tmp_path}/t2.db",
            "score",
            "--rubric",
            rubric,
            "--manifest",
            manifest,
            "--trace",
            tid,
            "--json",
        )
    assert [i["trace_id"] for i in scored["items"]] == [tid]
    assert scored["items"][0]["verdict"] in {"pass", "fail"}, scored["items"][0]["reason"]
    assert _volatile_free(scored) == _volatile_free(cli_json)
    assert [(i["verdict"], i["criteria"]) for i in inline["items"]] == [
        (i["verdict"], i["criteria"]) for i in cli_json["items"]
    ]
    assert broken.is_error
    assert "<rubric argument>" in broken.content[0].text
    assert "sk-test-secret-do-not-print" not in json.dumps(scored)


def test_draft_ticket_and_sweep_return_the_clis_json(work: dict[str, Any]) -> None:
    store = work["store"]
    # The manifest's versions must both carry content for the sweep to tell what changed.
    manifest = [dict(e) for e in MANIFEST]
    manifest[0]["content"] = (
        "Attachment v1. Payment terms.\nPrepayment shall not exceed 50,000 RMB per order."
    )
    (work["dir"] / "swept.jsonl").write_text("".join(json.dumps(e) + "\n" for e in manifest), "utf-8")
    feedback = "It said 50,000 RMB; the cap is 30,000 RMB now."

    async def go() -> tuple[Any, Any, list[Any]]:
        async with _session(work) as c:
            swept = _structured(await c.call_tool("sweep", {"manifest": "swept.jsonl"}))
            window = _structured(
                await c.call_tool("sweep", {"manifest": "swept.jsonl", "from": "2030-01-01T00:00:00Z"})
            )
            drafts = [
                _structured(
                    await c.call_tool(
                        "draft_ticket", {"trace_id": tid, "manifest": "swept.jsonl", "feedback": feedback}
                    )
                )
                for tid in work["trace_ids"]
            ]
            return swept, window, drafts

    swept, window, drafts = _run(go)
    assert swept == _cli(store, "triage", "--sweep", "--manifest", "swept.jsonl", "--json")
    assert [f["used"] for f in swept["flagged"]] == ["v1"]  # the ignored trace answered 50,000
    assert window == {"flagged": [], "scanned": 0, "still_arriving": [], "unreadable": []}
    for tid, got in zip(work["trace_ids"], drafts, strict=True):
        cli_draft = _cli(
            store,
            "ticket",
            "draft",
            "--trace",
            tid,
            "--manifest",
            "swept.jsonl",
            "--feedback",
            feedback,
            "--json",
        )
        assert got == cli_draft
        assert got["ticket"]["status"] == "draft"


def test_secrets_never_leave_the_server(work: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from tracejudge.schema import RawSpan

    secret = "sk-lf-0d9e8f7a6b5c4d3e2f1a"
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", secret)
    store = open_store(work["store"])
    store.put_spans(
        [
            RawSpan(
                trace_id="f" * 32,
                span_id="e" * 16,
                name="leaky",
                start_time_unix_nano=1,
                end_time_unix_nano=2,
                attributes={"input.value": f"the key is {secret}", "output.value": "ok"},
            )
        ]
    )
    store.close()

    async def go() -> tuple[str, str]:
        async with _session(work) as c:
            shown = await c.call_tool("show_trace", {"trace_id": "f" * 32})
            bad = await c.call_tool("triage", {"ticket": f"{{trace_id: {secret}, required: []}}"})
            return json.dumps(shown.structured_content) + shown.content[0].text, bad.content[0].text

    shown, bad = _run(go)
    assert secret not in shown
    assert "[redacted]" in shown
    assert secret not in bad
