"""What the ``score --run`` worker tests share (tests/cli/test_score_*.py, the PostgreSQL restart
tests): the restaurant example's traces copied under other trace ids and stored, a slow scripted judge,
a worker started as a user starts it (``python -m tracejudge … score --json``), and what the store says
it did."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import load_module
from tracejudge.schema import RawSpan
from tracejudge.store import open_store
from tracejudge.testing.langfuse_server import LangfuseServer
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "restaurant"
traces = load_module(EXAMPLE / "traces.py", "restaurant_traces")


def copies(n: int) -> list[RawSpan]:
    """The example's 14 traces ``n`` times, each copy a trace of its own."""
    spans = list(traces.all_spans())
    out: list[RawSpan] = []
    for k in range(n):
        out.extend(s.model_copy(update={"trace_id": f"{k:02x}" + s.trace_id[2:]}) for s in spans)
    return out


def put_copies(url: str, n: int) -> list[RawSpan]:
    """``copies(n)``, stored in the store at ``url``."""
    spans = copies(n)
    store = open_store(url)
    try:
        store.put_spans(spans)
    finally:
        store.close()
    return spans


@pytest.fixture
def judge() -> Iterator[ScriptedOpenAIServer]:
    # A slow judge, so workers overlap and a worker can be killed mid-run.
    rules = [
        Rule(reply=r["reply"], any_message=re.escape(r["match"]), delay=0.25) for r in traces.judge_rules()
    ]
    with ScriptedOpenAIServer(rules) as s:
        yield s


def start_worker(
    store_url: str,
    judge: ScriptedOpenAIServer,
    *extra: str,
    env: dict[str, str] | None = None,
    manifest: Path | None = EXAMPLE / "manifest.jsonl",
) -> subprocess.Popen[str]:
    """``tracejudge --store URL score --rubric … --no-cache --json EXTRA`` in a process of its own."""
    env = {
        **os.environ,
        "OPENAI_BASE_URL": judge.base_url,
        "OPENAI_API_KEY": "sk-test",
        "NO_PROXY": "127.0.0.1",
        **(env or {}),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracejudge",
            "--store",
            store_url,
            "score",
            "--rubric",
            str(EXAMPLE / "rubric.yaml"),
            *(("--manifest", str(manifest)) if manifest else ()),
            "--no-cache",
            "--json",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


@contextlib.contextmanager
def langfuse() -> Iterator[tuple[LangfuseServer, dict[str, str]]]:
    """The local Langfuse stand-in (v4) while the block runs, and the environment that points a worker's
    ``--write-back langfuse`` at it."""
    server = LangfuseServer(generation="v4").start()
    try:
        yield (
            server,
            {
                "LANGFUSE_BASE_URL": server.base_url,
                "LANGFUSE_PUBLIC_KEY": server.public_key,
                "LANGFUSE_SECRET_KEY": server.secret_key,
            },
        )
    finally:
        server.stop()


@contextlib.contextmanager
def reaped(*workers: subprocess.Popen[str]) -> Iterator[None]:
    """The workers killed on the way out, should the block end before they exit."""
    try:
        yield
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()


def held_by(url: str, run: str, pid: int) -> tuple[int, int]:
    """(items done, items claimed) by the worker in process ``pid`` (worker ids are host:pid:random)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT state, count(*) FROM run_queue WHERE run_id = %s AND worker LIKE %s GROUP BY state",
            (run, f"%:{pid}:%"),
        ).fetchall()
    counts = dict(rows)
    return int(counts.get("done", 0)), int(counts.get("claimed", 0))


def stored_ids(url: str, run: str) -> list[str]:
    """The trace ids of the run's stored items, one per stored result."""
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT trace_id FROM score_items WHERE run_id = %s", (run,))]


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """The worker's ``--json`` output, once it exited 0."""
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    data: dict[str, Any] = json.loads(out)
    return data


def wait_stored(url: str, run: str, proc: subprocess.Popen[str], n: int) -> None:
    """Wait until the worker in ``proc`` has stored ``n`` items and holds more."""
    deadline = time.monotonic() + 120
    while (held := held_by(url, run, proc.pid))[0] < n or held[1] == 0:
        assert time.monotonic() < deadline, "the worker stored too few items"
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.02)
