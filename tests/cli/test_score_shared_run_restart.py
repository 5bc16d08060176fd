"""``score --run NAME`` workers ride out a PostgreSQL restart: every session of the store ended and none
taken for a while (what a restart or a failover does to a client; the shared test server is not
restarted, other tests use it). The workers exited 1 on the first statement that found their connection
gone; now they wait for the store (``--reconnect-timeout``, 60 s by default) and finish the run, each
item's result stored once. A store gone for longer than that still ends a worker, and a rerun resumes."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import Iterator

import psycopg
import pytest

from tests.cli import score_workers as sw
from tests.cli.score_workers import judge  # noqa: F401 - the slow scripted judge
from tests.store.conftest import (
    postgres_admin_url,
    postgres_url,  # noqa: F401 - the fresh-database fixture
)
from tests.store.test_postgres_network import BlackHoleProxy
from tracejudge.testing.openai_server import ScriptedOpenAIServer


@contextlib.contextmanager
def _store_down(url: str) -> Iterator[None]:
    """The store's database down as far as its clients can tell: every session of it ended, no new one
    accepted until the block ends."""
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_admin_url(), autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                " WHERE datname = %s AND usename = current_user AND pid <> pg_backend_pid()",
                (name,),
            )
            yield
        finally:
            admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")


@contextlib.contextmanager
def _black_holed(proxy: BlackHoleProxy) -> Iterator[None]:
    """The store's server silent at the network level from the block's start (it stays so)."""
    proxy.black_hole()
    yield


def _totals(url: str, run: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT done FROM run_totals WHERE run_id = %s", (run,)).fetchone()
    assert row is not None
    return int(row[0])


def _ended_by(
    outage: contextlib.AbstractContextManager[object],
    url: str,
    run: str,
    worker: subprocess.Popen[str],
    n: int,
) -> tuple[int, str]:
    """Once ``worker`` has stored ``n`` items of ``run`` (and holds more), the store goes away (``outage``)
    until the worker exits, which must be with 1: the items it had stored then, and its stderr."""
    with sw.reaped(worker):
        sw.wait_stored(url, run, worker, n)
        done = sw.held_by(url, run, worker.pid)[0]
        with outage:
            _, err = worker.communicate(timeout=60)
    assert worker.returncode == 1, err[-2000:]
    return done, err


def test_workers_ride_out_a_restart_and_store_each_item_once(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
) -> None:
    everything = sorted({s.trace_id for s in sw.put_copies(postgres_url, 6)})
    args = ("--run", "restarted", "--lease", "2", "--concurrency", "2")
    workers = [sw.start_worker(postgres_url, judge, *args) for _ in range(2)]
    with sw.reaped(*workers):
        for w in workers:
            sw.wait_stored(postgres_url, "restarted", w, 1)
        # Down for longer than the lease: the workers' claims run out meanwhile, and each may find an
        # item it holds taken by the other when the store is back.
        with _store_down(postgres_url):
            time.sleep(3)
            assert all(w.poll() is None for w in workers), "a worker exited while the store was down"
        done = [sw.finish(w) for w in workers]
    assert sorted(sw.stored_ids(postgres_url, "restarted")) == everything
    assert _totals(postgres_url, "restarted") == len(everything)  # each result counted once
    theirs = [{i["trace_id"] for i in data["items"]} for data in done]
    assert not theirs[0] & theirs[1]
    assert sorted(theirs[0] | theirs[1]) == everything  # what each stored, it reported
    assert {d["status"] for d in done} == {"complete"}
    assert max(d["summary"]["n"] for d in done) == len(everything)


def test_a_store_down_longer_than_the_reconnect_timeout_ends_the_worker_and_a_rerun_resumes(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
) -> None:
    spans = sw.put_copies(postgres_url, 2)
    args = ("--run", "gone", "--concurrency", "2", "--lease", "2")
    worker = sw.start_worker(postgres_url, judge, *args, env={"TRACEJUDGE_SCORE_RECONNECT_TIMEOUT": "1"})
    done_before, err = _ended_by(_store_down(postgres_url), postgres_url, "gone", worker, 2)
    assert "lost its connection" in err or "cannot reconnect" in err, err[-2000:]
    # It gave up once its 1 s were up, not after the default 60 s; how far past 1 s is the machine's
    # (the last try and the scheduling: 'waited 2 s' on a loaded CI machine).
    waited = re.search(r"waited (\d+) s for it to come back", err)
    assert waited is not None, err[-2000:]
    assert 1 <= int(waited[1]) < 30, err[-2000:]
    assert "--reconnect-timeout" in err
    assert "resumes" in err
    assert "tracejudge:tracejudge@" not in err  # the password never shows
    rerun = sw.finish(sw.start_worker(postgres_url, judge, *args))
    assert rerun["status"] == "complete"
    assert len(rerun["items"]) <= 28 - done_before
    assert sorted(sw.stored_ids(postgres_url, "gone")) == sorted({s.trace_id for s in spans})
    assert _totals(postgres_url, "gone") == 28


@pytest.mark.parametrize("given", ["--reconnect-timeout=0", "env"])
def test_a_reconnect_timeout_of_0_exits_on_the_first_lost_connection(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
    given: str,
) -> None:
    """As before workers rode restarts out; the argument wins over the environment."""
    sw.put_copies(postgres_url, 2)
    args = ("--run", "at-once", "--concurrency", "2", "--lease", "2")
    if given == "env":
        worker = sw.start_worker(postgres_url, judge, *args, env={"TRACEJUDGE_SCORE_RECONNECT_TIMEOUT": "0"})
    else:
        env = {"TRACEJUDGE_SCORE_RECONNECT_TIMEOUT": "600"}
        worker = sw.start_worker(postgres_url, judge, *args, given, env=env)
    # Waiting 600 s (the environment's) would time _ended_by's wait for the exit out.
    _, err = _ended_by(_store_down(postgres_url), postgres_url, "at-once", worker, 1)
    assert "waited" not in err
    assert "run a stopped command again" in err


def test_a_server_that_stops_answering_ends_the_worker_after_its_reconnect_timeout_and_the_bounds(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
) -> None:
    """The store's server silent at the network level (its connections cut, new ones never answered):
    before, each reconnect waited psycopg's ~130 s, past this test's 60 s, whatever --reconnect-timeout
    said; now the worker gives up within its reconnect timeout and the connect timeout (10 s)."""
    sw.put_copies(postgres_url, 2)
    proxy = BlackHoleProxy(postgres_url)
    args = ("--run", "silent", "--concurrency", "2", "--lease", "2")
    try:
        worker = sw.start_worker(proxy.url(postgres_url), judge, *args, "--reconnect-timeout", "1")
        _, err = _ended_by(_black_holed(proxy), postgres_url, "silent", worker, 1)
    finally:
        proxy.close()
    assert "cannot reconnect" in err, err[-2000:]
    assert "for it to come back" in err, err[-2000:]
    assert "tracejudge:tracejudge@" not in err
    rerun = sw.finish(sw.start_worker(postgres_url, judge, *args))
    assert rerun["status"] == "complete"
    assert _totals(postgres_url, "silent") == 28
