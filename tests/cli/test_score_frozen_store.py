"""A ``score --run`` worker whose PostgreSQL froze while its kernel still answers TCP (a stopped
backend, a host swapping, a middlebox that stops forwarding): every byte is acknowledged and every
keepalive answered, so the connection's network bounds never fire. Before, the worker's statement
waited forever and the worker with it; now the store's statement bound (TRACEJUDGE_STORE_STATEMENT_
TIMEOUT) ends the connection, the worker waits for the store as for a restart (--reconnect-timeout),
then exits 1 saying so, and a rerun once the server is back resumes the run."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.cli import score_workers as sw
from tests.cli.score_workers import judge  # noqa: F401 - the slow scripted judge
from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tests.store.test_postgres_network import BlackHoleProxy
from tracejudge.testing.openai_server import ScriptedOpenAIServer


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[BlackHoleProxy]:  # noqa: F811
    p = BlackHoleProxy(postgres_url)
    try:
        yield p
    finally:
        p.close()


def test_a_worker_on_a_frozen_server_exits_with_what_happened_and_a_rerun_resumes(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
    proxy: BlackHoleProxy,
) -> None:
    spans = sw.put_copies(postgres_url, 2)
    through_proxy = f"{proxy.url(postgres_url)}?connect_timeout=2"
    args = ("--run", "frozen", "--concurrency", "2", "--lease", "2")
    env = {"TRACEJUDGE_STORE_STATEMENT_TIMEOUT": "1", "TRACEJUDGE_SCORE_RECONNECT_TIMEOUT": "2"}
    worker = sw.start_worker(through_proxy, judge, *args, env=env)
    with sw.reaped(worker):
        sw.wait_stored(postgres_url, "frozen", worker, 2)
        proxy.freeze()
        try:
            _, err = worker.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the worker still waits for the frozen server")
    assert worker.returncode == 1, err[-2000:]
    assert "did not answer a statement within 1 s" in err or "cannot reconnect" in err, err[-2000:]
    assert "for it to come back" in err, err[-2000:]
    assert "resumes" in err
    assert "tracejudge:tracejudge@" not in err  # the password never shows
    proxy.thaw()
    rerun = sw.finish(sw.start_worker(through_proxy, judge, *args))
    assert rerun["status"] == "complete"
    assert sorted(sw.stored_ids(postgres_url, "frozen")) == sorted({s.trace_id for s in spans})
