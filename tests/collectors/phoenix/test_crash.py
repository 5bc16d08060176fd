"""A Phoenix pull killed (SIGKILL) between its commits loses nothing and doubles nothing on rerun."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tracejudge.store import SqliteStore
from tracejudge.testing.phoenix_server import Fault, synthetic_spans
from tracejudge_collectors._pull_common import scope_key
from tracejudge_collectors.phoenix import PullOptions, pull_phoenix

from .conftest import KEY

# The pull as a process of its own, many small commits (2 traces a batch, 2 batches at once).
CHILD = """
import sys
from tracejudge.store import SqliteStore
from tracejudge.write import PhoenixApi, PhoenixCredentials
from tracejudge_collectors.phoenix import PullOptions, pull_phoenix

store = SqliteStore(sys.argv[1])
env = {"PHOENIX_COLLECTOR_ENDPOINT": sys.argv[2], "PHOENIX_API_KEY": sys.argv[3]}
creds = PhoenixCredentials.from_env(env)
with PhoenixApi(creds, max_retries=0, timeout=120) as api:
    pull_phoenix(store, api, PullOptions(page_size=10, trace_batch=2, concurrency=2))
"""


def test_a_pull_killed_between_commits_resumes_without_loss_or_doubling(server, api_for, tmp_path):
    traces = [synthetic_spans(i) for i in range(40)]
    for spans in traces:
        for span in spans:
            server.add_span("default", span)
    # The listing's first page and 8 batches answer; every request after them hangs.
    server.inject(Fault("slow", path="/spans", after=9, times=None, delay=60))
    db = tmp_path / "pull.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), server.base_url, KEY],
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        stored = 0
        while time.monotonic() < deadline and stored < 4 and proc.poll() is None:
            time.sleep(0.05)
            if db.exists():
                st = SqliteStore(db)
                stored = len(st.list_traces())
                st.close()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert 4 <= stored < 40

    store = SqliteStore(db)
    try:
        kept = {t.trace_id: t.span_count for t in store.list_traces()}
        # What the killed run committed is whole and marked; it left no watermark behind.
        assert kept
        assert all(n == 4 for n in kept.values())
        assert all(store.get_meta("phoenix.trace:" + t) is not None for t in kept)
        watermark = scope_key("phoenix", [server.base_url, "default"])
        assert store.get_meta(watermark) is None
        server.faults.clear()
        with api_for(server) as api:
            report = pull_phoenix(store, api, PullOptions(page_size=10, trace_batch=2, concurrency=2))
        assert (report.fetched, report.skipped, report.complete) == (40 - len(kept), len(kept), True)
        assert report.spans_new == 4 * (40 - len(kept))
        everything = {spans[0]["trace_id"]: 4 for spans in traces}
        assert {t.trace_id: t.span_count for t in store.list_traces()} == everything
        assert sum(len(store.get_spans(t)) for t in everything) == 160
        assert report.watermark is not None
        assert store.get_meta(watermark) is not None
    finally:
        store.close()
