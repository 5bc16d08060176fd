"""``serve`` (the live report and /metrics) and ``mcp`` on PostgreSQL across a real restart: the
server stopped (sessions ended, connections refused while it is down) and started again, on a
PostgreSQL of the test's own (the shared test server serves the other tests meanwhile). Both use the
store's reconnecting connection: while the server is down a request is answered, saying so, and the
process keeps running; once it is back the next request reads the store on a new connection.

Before, ``serve`` answered each request while the server was down with a bare 500 and wrote a whole
traceback per request to its log."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.store.conftest import private_postgres  # noqa: F401 - the private server fixture
from tests.store.private_postgres import PrivatePostgres
from tests.store.test_postgres_reconnect import TRACE, _span
from tracejudge.store import open_store


def _untimed(html: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "TIME", html)


@pytest.fixture
def stored(private_postgres: PrivatePostgres) -> PrivatePostgres:  # noqa: F811
    store = open_store(private_postgres.url)
    try:
        store.put_spans([_span(0), _span(1)])
    finally:
        store.close()
    return private_postgres


@pytest.fixture
def served(stored: PrivatePostgres) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracejudge", "--store", stored.url, "serve", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on "), proc.communicate(timeout=30)[1][-2000:]
        yield line.split()[-1], proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def test_serve_answers_503_while_postgresql_is_down_and_reads_again_once_it_is_back(
    stored: PrivatePostgres, served: tuple[str, subprocess.Popen[str]]
) -> None:
    url, proc = served
    before = {path: httpx.get(url + path, timeout=60) for path in ("/", "/metrics")}
    assert all(r.status_code == 200 for r in before.values())
    assert "tracejudge_info{" in before["/metrics"].text
    stored.stop()
    for path in ("/", "/metrics", "/"):
        down = httpx.get(url + path, timeout=60)
        assert down.status_code == 503, (path, down.status_code, down.text[:500])
        assert down.headers["Retry-After"]
        assert "the store is unavailable" in down.text
        assert str(stored.port) not in down.text  # where the store lives is the log's, not the page's
    assert httpx.get(url + "/healthz", timeout=60).status_code == 200  # the process itself is alive
    stored.start()
    back = {path: httpx.get(url + path, timeout=60) for path in ("/", "/metrics")}
    assert all(r.status_code == 200 for r in back.values()), {p: r.text[:500] for p, r in back.items()}
    assert _untimed(back["/"].text) == _untimed(before["/"].text)  # the same report, made anew
    assert back["/metrics"].text == before["/metrics"].text
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    # One line per refused request, saying why; no traceback apiece while the outage lasts.
    assert "Traceback" not in err, err[-3000:]
    refusals = [line for line in err.splitlines() if "reading the store failed, answered 503" in line]
    assert len(refusals) == 3, err[-3000:]
    assert all("cannot reconnect" in r or "lost its connection" in r for r in refusals)


def _mcp(store_url: str, cwd: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "tracejudge", "--store", store_url, "mcp"], cwd=str(cwd)
    )


def _data(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    return data["result"] if set(data) == {"result"} else data


def test_mcp_tools_say_the_store_is_down_while_it_is_and_work_again_once_it_is_back(
    stored: PrivatePostgres, tmp_path: Path
) -> None:
    async def go() -> tuple[Any, Any, Any, Any]:
        async with Client(_mcp(stored.url, tmp_path)) as c:
            listed = _data(await c.call_tool("list_traces", {}))
            stored.stop()
            refused = await c.call_tool("list_traces", {})
            refused_show = await c.call_tool("show_trace", {"trace_id": TRACE})
            stored.start()
            again = _data(await c.call_tool("list_traces", {}))
            shown = _data(await c.call_tool("show_trace", {"trace_id": TRACE}))
            return listed, (refused, refused_show), again, shown

    listed, refusals, again, shown = asyncio.run(go())
    assert [t["trace_id"] for t in listed] == [TRACE]
    for refused in refusals:
        assert refused.is_error
        text = refused.content[0].text
        assert "cannot reconnect" in text or "lost its connection" in text, text
        assert "check that PostgreSQL is up" in text
    assert again == listed
    assert json.dumps(shown).count('"span_id"') >= 2
